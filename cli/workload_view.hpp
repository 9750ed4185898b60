// How workloads and clusters look on stdout: the one record -> json mapping for each (fields in
// README "Output fields"), and the describe text for people. Workers lead with the same fields as
// every worker tpuctl prints: node, slice, worker, host.
#pragma once

#include <optional>
#include <ostream>
#include <vector>

#include "cli/output.hpp"
#include "provision/queue/queued_resource.hpp"
#include "provision/workload/cluster.hpp"
#include "provision/workload/workload.hpp"

namespace tpuctl::cli {

// A workload worker: node, slice, worker, host, state, exit_code (null until it exited),
// attempt, last_heartbeat and last_contact (RFC 3339, null before the first), detail.
Json workload_worker_json(const provision::WorkloadWorker& worker);

// What the current attempt's workers reported of JAX (their events, agent/supervise.hpp):
// {"attempt", "distributed": {started_by: tpuctl|program|both, processes_reporting,
// num_processes} or null, "compilation_cache": {hits, misses, used, workers} or null}.
Json jax_summary(const provision::Workload& workload);
// `workload describe`'s line of goodput by steps (Google's buckets): "" when the job reports no
// steps.
std::string step_goodput_line(const provision::Workload& workload);
// Its one line for `workload describe`: "" when nothing was reported.
std::string jax_line(const Json& jax);
// A workload: its record (times as RFC 3339, null when unset; the monitor's lease left out),
// plus running and worker_count.
Json workload_json(const provision::Workload& workload);
// `workload list`'s columns: fields of workload_json.
extern const std::vector<Column> k_workload_columns;
// "goodput: 97.1% of 2h0m (running ..., lost ..., recovering ..., queued ..., provisioning ...)".
std::string goodput_line(const provision::Goodput& goodput);
// `describe`, `create`, `wait` for people: state, command, message, one row per worker.
void print_workload(std::ostream& os, const provision::Workload& workload);

// A cluster as `cluster create|describe|list` print it: name, pool, tpu_type, num_slices, tier,
// state (its queued resource's, MISSING without one), queued_resource, created_at,
// running_workloads, slices (node objects: name, slice, workers), workloads ({name, state}),
// reason (why it waits, else "") and error (null, or the request's {code, message}).
Json cluster_json(const provision::Cluster& cluster,
                  const std::optional<provision::QueuedResource>& qr,
                  const std::vector<provision::Workload>& workloads);
extern const std::vector<Column> k_cluster_columns;
void print_cluster(std::ostream& os, const Json& cluster);

} // namespace tpuctl::cli
