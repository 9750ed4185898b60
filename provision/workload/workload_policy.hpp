// The workload's failure policy, as pure logic: how one poll of a worker changes what tpuctl
// believes about it (observe), and what the monitor does next (decide). No IO: the monitor
// (workload_monitor.hpp) feeds it polls and carries out the verdict.
//
// A worker is LOST when tpuctl cannot tell whether it still runs: its host has not answered a
// poll for `lost_after`, its supervisor process is gone while the status still says running, or
// its heartbeat (written every 2 s by `tpuctl agent supervise`) is older than `lost_after` on the
// worker's own clock. With the monitor's 1 s poll and a connect timeout of 5 s, a dead host is
// noticed within lost_after + 6 s: 16 s with the default 10 s (documented in README).
//
// Verdicts: every worker SUCCEEDED -> succeeded. Policy any: one FAILED or LOST worker -> restart
// every worker (while restarts < max_restarts) or fail. Policy all: once every worker has ended,
// any FAILED or LOST -> restart or fail. Past the timeout -> fail.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "provision/workload/workload.hpp"

namespace tpuctl::provision {

// One poll of one worker (`tpuctl agent supervise-status` through SSH).
struct WorkerObservation {
  bool reached = false; // the SSH session ran the status command and its output parsed
  std::string error;    // why not, when !reached
  bool has_status = false;
  int attempt = -1;
  std::string state;        // "running" or "exited"
  int exit_code = -1;       // exited: the status, 128+N for signal N
  int64_t heartbeat_ms = 0; // worker clock
  int64_t now_ms = 0;       // worker clock when polled
  bool supervisor_alive = false;
};

struct PolicyConfig {
  std::chrono::milliseconds lost_after{10000};
};

// Folds `obs` into `worker` (observed at `now_ms` on this machine) for the workload's current
// attempt (`attempt`, started at `attempt_started_ms`).
void observe(WorkloadWorker& worker, const WorkerObservation& obs, int attempt,
             int64_t attempt_started_ms, int64_t now_ms, const PolicyConfig& config);

enum class Verdict { keep_running, succeeded, restart, fail };

struct Decision {
  Verdict verdict = Verdict::keep_running;
  std::string message;          // for people: which workers, which exit codes
  std::vector<size_t> culprits; // indices into workload.workers that failed or were lost
};

// What to do now with `workload` (its workers as observed).
Decision decide(const Workload& workload, int64_t now_ms);

} // namespace tpuctl::provision
