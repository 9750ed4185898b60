// What a workload does on its workers, over SSH: start an attempt under `tpuctl agent
// supervise`, poll each worker's status, stop every tagged process, read the logs, remove the
// files. One fan-out per step across every worker of every slice (remote/fanout.hpp); the
// environment comes from plan_workers (slice_workers.hpp), as for `tpuctl ssh`, plus the
// workload's tags:
//   TPUCTL_WORKLOAD (name), TPUCTL_WORKLOAD_UID (what stop looks for in /proc/*/environ),
//   TPUCTL_WORKLOAD_ATTEMPT (0 for the first run, then the restart number).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "provision/slice/slice_workers.hpp"
#include "provision/workload/workload.hpp"
#include "provision/workload/workload_policy.hpp"
#include "remote/ssh_types.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

inline constexpr const char* k_workload_uid_var = "TPUCTL_WORKLOAD_UID";
// The tag every process of the workload carries (VAR=uid): what a stop finds orphans by.
inline std::string workload_tag(const Workload& wl) {
  return std::string(k_workload_uid_var) + "=" + wl.uid;
}

// The workload's grace between TERM and KILL (-tgps).
inline std::chrono::milliseconds grace_of(const Workload& wl) {
  return std::chrono::milliseconds(wl.termination_grace_ms);
}
// The grace of the workers left when a peer failed or its host was lost: the lesser of
// --failure-grace-period-seconds and -tgps.
inline std::chrono::milliseconds failure_grace_of(const Workload& wl) {
  return std::chrono::milliseconds(std::min(wl.failure_grace_ms, wl.termination_grace_ms));
}

// The workers of the slices the workload holds (`slices`; every slice of its cluster when it
// holds none: a queued workload's script dir goes everywhere, and so does a delete's cleanup),
// in worker order, with its environment: MEGASCALE_SLICE_ID and _NUM_SLICES number the held
// slices 0..n-1. Errors: the queued resource is gone or not ACTIVE (failure, naming its state),
// the store's.
Expected<std::vector<WorkerPlan>> plan_workload(state::StateStore& store, const Workload& workload);

// The `workers` entries of a new attempt: one PENDING entry per plan.
std::vector<WorkloadWorker> pending_workers(const std::vector<WorkerPlan>& plans, int attempt);

// The shell command that starts attempt `workload.attempt` on the worker of `plan`.
std::string launch_command(const Workload& workload, const WorkerPlan& plan);

// The persistent JAX compilation cache of the worker's cluster on its host:
// <workdir>/jax-cache/<the cluster's request uid>. Every attempt of every workload of the cluster
// uses it (the supervisor exports JAX_COMPILATION_CACHE_DIR unless the job sets its own), so a
// restart, a repair or a resumed eviction does not compile again.
std::string compilation_cache_dir(const WorkerPlan& plan);

// Starts the current attempt on every worker at once. Per-worker results in plan order; a
// worker whose result is not ok did not start.
Expected<std::vector<remote::HostResult>>
launch_workers(const Workload& workload, const std::vector<WorkerPlan>& plans,
               const remote::SshOptions& ssh, const remote::FanoutCallbacks& callbacks = {});

// Checks that `dir` is one filesystem every worker of `plans` sees (agent/shared_dir.hpp: worker
// 0 writes a file there, every other worker must read it), in one round. Errors: usage naming
// the directory, the first worker that did not see it (NODE/WORKER@HOST) and what it said, and
// how to fix it; failure when workers cannot be reached.
Status check_shared_dir(const std::string& dir, const std::vector<WorkerPlan>& plans,
                        const remote::SshOptions& ssh);

// Polls every worker's status. Never fails for a worker (an unreachable one is an observation
// with reached = false); errors are the engine's (bad options).
Expected<std::vector<WorkerObservation>> poll_workers(const Workload& workload,
                                                      const std::vector<WorkerPlan>& plans,
                                                      const remote::SshOptions& ssh);
// Parses `tpuctl agent supervise-status --format json` output.
WorkerObservation parse_observation(const std::string& out);

// Stops the workload's processes on every host of `plans`, one session per host: each worker's
// supervisor stops its own process tree (TERM, its grace, KILL: `agent supervise-stop`), and
// this waits for them; only orphans of a supervisor that was killed are found by the
// TPUCTL_WORKLOAD_UID tag (one scan of that host's processes), and so is everything on a host
// whose agent is missing. With `remove_files` (a delete), each host whose processes were stopped
// also removes the workload's files, in the same session. Hosts of a local pool (this machine:
// WorkerPlan::this_machine) share one session for up to 256 workers. Per-host results, in the
// order the hosts first appear in `plans` (index: that position; host: the pool host's name).
Expected<std::vector<remote::HostResult>> stop_workers(const Workload& workload,
                                                       const std::vector<WorkerPlan>& plans,
                                                       const remote::SshOptions& ssh,
                                                       bool remove_files = false);

// Removes the workload's directory (<workdir>/workloads/<uid>) on every host of `plans`.
Expected<std::vector<remote::HostResult>>
remove_workload_files(const Workload& workload, const std::vector<WorkerPlan>& plans,
                      const remote::SshOptions& ssh);

// Where a worker's first log read starts (`workload logs --tail N --since D`).
struct LogStart {
  int64_t tail_lines = 0; // > 0: only the last N lines of what is read
  // > 0: only what was written since this time (Unix ms), to within the supervisor's
  // heartbeat (2 s): it indexes the log's size as it grows (agent/supervise.hpp, log.index).
  int64_t since_ms = 0;
};

// One line of a worker's log (by plan index) as it arrives; `complete` false for a last line
// with no newline yet, or a piece of a line longer than 1 MiB. Called one at a time.
using LogLine = std::function<void(size_t plan, std::string_view text, bool complete)>;

// Reads each worker's log from `offsets[i]` on (missing logs give nothing), streaming it to
// `on_line` as it arrives: a log of any size passes through in bounded memory. `offsets[i]`
// advances past what was read. A worker read for the first time (offset 0) starts where
// `start` says: its log as it is now, from the size it had at `since_ms`, cut to its last
// `tail_lines` lines, in one consistent read (the size first, then the bytes up to it), and its
// offset moves to that size, so a follow-up read goes on from there. Returns each worker's
// outcome (no output kept). Errors: the engine's.
Expected<std::vector<remote::HostResult>> read_logs(const Workload& workload,
                                                    const std::vector<WorkerPlan>& plans,
                                                    std::vector<uint64_t>& offsets,
                                                    const remote::SshOptions& ssh,
                                                    const LogStart& start, const LogLine& on_line);

} // namespace tpuctl::provision
