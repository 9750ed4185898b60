// Provisioning a placed queued resource: what turns claimed hosts into an ACTIVE slice.
// The scheduler calls provision_slice() once a request is PROVISIONING (hosts claimed, qr.nodes
// filled); a report with ok == false moves it to FAILED with report.failure, and the caller
// releases the hosts. stop_slice_processes() is what suspend and delete run on every host.
// Steps and their shell commands are in provisioning.cpp; the preflight JSON and the clock check
// are in preflight_report.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provision/pool/pools.hpp"
#include "provision/queue/queued_resource.hpp"
#include "provision/slice/worker_env.hpp"
#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

struct ProvisionOptions {
  std::filesystem::path binary; // the local tpuctl to ship (cli passes /proc/self/exe)
  remote::SshOptions ssh;       // from the user's SSH flags
  std::chrono::milliseconds step_timeout{120000};
  std::chrono::milliseconds preflight_timeout{20000};
  std::chrono::milliseconds max_clock_skew{2000};
  int coordinator_port = k_jax_coordinator_port; // 8476
  // The agent goes over SSH to one worker in every `relay_group` (a seed: worker 0, 64, 128...)
  // and the others of its group fetch it from that seed over TCP on `relay_port` (plain, checked
  // against the sha256 sent over SSH); a worker whose fetch fails gets it over SSH. 0: no relay.
  int relay_port = 8477;
  size_t relay_group = 64;
  bool kernel_check = true;
  // Only these nodes (indices into qr.nodes) are provisioned: a repair re-placed one slice, and
  // the others keep their agents. Empty: every node.
  std::vector<int> only_nodes;
  std::function<void(const std::string&)> progress; // one line per step for stderr; may be empty
  // Per worker, as each finishes a step ("push", "probe", "startup", "preflight"): how many of
  // `total` are done, and the worker's host. For a live display; may be empty.
  std::function<void(const std::string& step, size_t done, size_t total, const std::string& host)>
      worker_progress;
};

struct ProvisionTimings {
  int64_t push_ms = 0, probe_ms = 0, startup_ms = 0, preflight_ms = 0, total_ms = 0;
};

struct ProvisionReport {
  bool ok = false;
  // code "PROVISIONING_FAILED" (push, probe, startup script) or "PREFLIGHT_FAILED" (peers,
  // clock, kernel); worker, node and host set; the message names the worker, host and what failed.
  std::optional<QrError> failure;
  std::string agent_sha256;
  // Per worker, node by node in worker order: node, worker, host, agent_path, unchanged (bool),
  // facts (the probe's json), preflight (the agent's json plus "clock": {skew_ms, ...}).
  nlohmann::json workers = nlohmann::json::array();
  ProvisionTimings timings;
};

// {"ok", "failure"?: {code, message, worker, node, host}, "agent_sha256", "workers",
//  "timings": {push_ms, probe_ms, startup_ms, preflight_ms, total_ms}}. Never fails.
nlohmann::json to_json(const ProvisionReport& report);

// What the queued-resource record keeps of a report: to_json() as it is for slices of up to
// k_report_workers_kept workers; for larger ones, the same fields but "workers" only the failed
// workers (at most k_report_workers_kept of them), plus "workers_total", "facts_common" (the
// probe facts every worker shares) and "preflight_summary" ({passed, failed, max_skew_ms}), so
// the record stays a few tens of KB whatever the slice's size (a whole report is ~3 KB a worker
// and grows with the slice: it cannot be stored for a pod of 2,304 hosts).
inline constexpr size_t k_report_workers_kept = 64;
nlohmann::json to_stored_json(const ProvisionReport& report);

// The failure code of each step.
inline constexpr const char* k_provisioning_failed = "PROVISIONING_FAILED";
inline constexpr const char* k_preflight_failed = "PREFLIGHT_FAILED";

// Runs every step on every worker of every node in parallel and stops at the first failing step:
//  (a) push `options.binary` to agent_path(host, sha256) (content-addressed, verified, 0755;
//      skipped when already there), (b) `<agent> agent probe`, (c) metadata "startup-script"
//      through `bash -s` under the worker's environment, (d) `<agent> agent preflight` on all
//      workers of a node at once, then the clock check against this machine and the kernel check.
// Errors (nothing done): the binary cannot be read; bad ssh options; the request has no nodes or
// names a host the pool lacks. Everything that fails on a worker is in the report instead.
Expected<ProvisionReport> provision_slice(const QueuedResource& qr, const PoolView& pool,
                                          const ProvisionOptions& options,
                                          const remote::CancelToken* cancel = nullptr);

// In QueuedResource::provisioning, true while nothing tagged with the request's uid can be
// running on its hosts: set when provisioning ends ACTIVE without a startup script (every agent
// it started has exited), removed by note_launch before the first command or workload.
inline constexpr const char* k_nothing_launched = "nothing_launched";

// Kills, on every host of the slice, every process whose environment holds
// TPUCTL_QR_UID=<qr.uid> (TERM, then KILL after ssh.kill_grace), found by scanning
// /proc/*/environ. Each host's stdout is "terminated N killed M". Per-host results, in the order
// of hosts_of(qr) without duplicates; the hosts of a local pool share this machine's process
// table, so only one of them is contacted (its scan covers them all; the next is tried when
// one cannot be reached), and its result comes last. A request that still carries provisioning's
// k_nothing_launched mark (ACTIVE with no startup script, and no command or workload started on
// it since: note_launch) has nothing tagged to stop: no host is contacted and the result is empty.
// Errors: usage when qr.uid is empty or not [A-Za-z0-9_-]; the errors of run_fanout.
Expected<std::vector<remote::HostResult>>
stop_slice_processes(const QueuedResource& qr, const PoolView& pool, const remote::SshOptions& ssh,
                     const remote::CancelToken* cancel = nullptr);

// The most a workload's job may ask for between TERM and KILL (-tgps), in seconds.
inline constexpr int64_t k_max_grace_seconds = 3600;
// The environment variable in which a process carries its own grace, in seconds (a workload's
// -tgps): a stop waits the longest of those it finds, up to k_max_grace_seconds.
inline constexpr const char* k_process_grace_var = "TPUCTL_TERMINATION_GRACE_SECONDS";

// The POSIX sh script stop_slice_processes runs (exposed for tests). `grace_ms` is the wait
// between TERM and KILL, or longer where a process found carries k_process_grace_var (the
// longest found). Precondition: uid is validated.
std::string stop_processes_script(const std::string& uid, int64_t grace_ms);
// The same for any tag: kills every process whose environment holds exactly `variable=value`
// (fixed-string match, so the value needs no escaping beyond the shell quoting done here).
std::string stop_tagged_processes_script(const std::string& variable, const std::string& value,
                                         int64_t grace_ms);

} // namespace tpuctl::provision
