// Hangs: a job whose every worker is alive but that makes no step (one process stuck before a
// collective holds all the others in it: JAX's heartbeat sees only dead processes). Pure logic;
// the monitor (workload_ops.cpp) asks for the stacks and carries out the verdict.
//
// The rule: the job reports steps (step_ledger.hpp), it has made at least one in this attempt,
// every worker is RUNNING, and no step began for the hang timeout: --hang-timeout, else
// max(60 s, 20 x the ideal step time). Then every worker's Python stacks are gathered (SIGUSR1
// to the process that registered faulthandler for it: the worker's log gets them, as
// cloud-tpu-diagnostics and xpk's stack-trace sidecar collect them) and compared: the main
// thread's stack (the thread whose last frame is the program's <module>) of each worker, as its
// list of (file, line, function) frames. When one worker's differs from a stack the others share
// (the one that sleeps, or reads, while the rest wait in the collective), it is named. The hang
// is then the job's failure: restarted under --max-restarts, else FAILED, saying which worker.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "provision/workload/workload.hpp"

namespace tpuctl::provision {

inline constexpr int64_t k_hang_floor_ms = 60'000;
inline constexpr int64_t k_hang_ideal_multiple = 20;

// The hang timeout in force: `configured_ms` when > 0, else max(60 s, 20 x the ideal step).
int64_t hang_timeout_ms(const Workload& workload);

// Why the workload hangs at `now_ms` ("no step for 1m4s after step 41 (ideal step 52ms, hang
// timeout 1m)"), or nullopt.
std::optional<std::string> hang_check(const Workload& workload, int64_t now_ms);

// The main thread's stack in a faulthandler dump: its frames as "FILE:LINE in FUNC", most
// recent first; empty when the dump holds none.
std::vector<std::string> main_stack(const std::string& dump);

struct OddStack {
  size_t worker = 0;  // index into the dumps
  std::string where;  // its outermost frame that differs, "train.py:42 in <module>"
  std::string others; // the others' frame there
};

// The one worker whose main stack differs from one that every other worker with a stack
// shares (at least two of them); nullopt when there is no such single worker.
std::optional<OddStack> odd_stack(const std::vector<std::optional<std::string>>& dumps);

} // namespace tpuctl::provision
