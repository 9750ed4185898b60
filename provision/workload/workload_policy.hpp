// The workload's failure policy, as pure logic: how one poll of a worker changes what tpuctl
// believes about it (observe), and what the monitor does next (decide). No IO: the monitor
// (workload_monitor.hpp) feeds it polls and carries out the verdict.
//
// A worker is LOST only when it is (workload_watch.hpp says how the monitor hears from workers):
// its supervisor process is gone while the status still says running (the worker's own host
// says so), or its host has been silent for `lost_after` and a second, independent check (a new
// SSH session) could not reach it either, or two such checks in a row were refused (nothing
// listens there: a refusal is never a slow host). Silence is counted in the monitor's own running time,
// so a monitor that was stopped or starved never blames the workers for it. A heartbeat that is
// late while the supervisor lives means a slow host, not a lost worker: it is noted, not acted
// on. A dead host is noticed about 2 s after it died when its connections are refused; one
// that hangs within 14 s (documented in README and workload_watch.hpp).
//
// A worker whose command a stop of tpuctl's ended (a peer's failure, a restart) is STOPPED, not
// FAILED: it is never a culprit. Of several failed or lost workers, the one that ended first (by
// the clocks of the workers, which a cascade follows by seconds: a failed worker's end, a lost
// one's last heartbeat) is the failure: the message names it, its exit code and its last line,
// counts the others, and it alone decides. A lost worker first is the infrastructure's failure
// (repaired, never a restart), whatever its peers did after it (JAX's peers die when one
// process dies); a failed one first is the job's, and its exit code alone decides whether the
// job restarts.
// Verdicts: every worker SUCCEEDED -> succeeded. Policy any: one FAILED or LOST worker ends the
// attempt; policy all: once every worker has ended, any FAILED or LOST does. Then the failure is
// the job's or the infrastructure's, and each has its own budget (SkyPilot draws the same line):
//   - a FAILED worker (its exit code) is the job's: restart every worker while restarts <
//     max_restarts, else fail. With --restart-on-exit-codes given, xpk's rule first: only exit
//     codes 42, 127-255 (deaths by signal) and those listed restart; any other fails at once.
//     Without it every non-zero exit may restart (tpuctl's default: --max-restarts is 0 unless
//     asked for, and a Python job's transient error is exit 1).
//   - a LOST worker only (its host died or hung) is the infrastructure's: repair its slice while
//     repairs < max_repairs (default 3; each repair drains the lost host), never counting a
//     restart; else fail.
// Past the timeout -> fail.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "provision/workload/workload.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

// What one worker said (a line of `tpuctl agent supervise-watch`, or of `supervise-status` over
// a new session), or why it could not be heard.
struct WorkerObservation {
  bool reached = false; // the SSH session ran the status command and its output parsed
  std::string error;    // why not, when !reached
  bool has_status = false;
  int attempt = -1;
  std::string state;        // "running" or "exited"
  int exit_code = -1;       // exited: the status, 128+N for signal N
  int64_t finished_ms = 0;  // exited: when (worker clock)
  bool stopped = false;     // exited: a stop of tpuctl's ended it, not the command itself
  std::string last_line;    // exited: the log's last line
  nlohmann::json events = nlohmann::json::object(); // the latest event of each kind
  // The steps the worker read since its last line (agent/step_source.hpp): (number, unix ms);
  // a turn hands out every line's since the last turn. And the attempt's progress so far.
  std::vector<std::pair<int64_t, int64_t>> steps;
  nlohmann::json progress;
  int64_t heartbeat_ms = 0; // worker clock
  int64_t now_ms = 0;       // worker clock when polled
  bool supervisor_alive = false;
  // When !reached: how long the worker has been silent (the monitor's running time only) and
  // how many independent checks in a row could not reach it.
  int64_t silent_ms = 0;
  int failed_checks = 0;
  bool refused = false; // the last check's connection was refused: nothing listens there
};

struct PolicyConfig {
  std::chrono::milliseconds lost_after{10000};
  // A worker whose stream has been silent this long (or whose stream ended) gets an
  // independent check; it takes a failed check and lost_after of silence to make it LOST.
  std::chrono::milliseconds suspect_after{7000};
};

// Folds `obs` into `worker` (observed at `now_ms` on this machine) for the workload's current
// attempt (`attempt`, started at `attempt_started_ms`). An unreached worker is LOST when
// obs.silent_ms > lost_after and obs.failed_checks >= 1, or at once when two checks in a row
// had their connection refused (no sshd listens there any more: a refusal is no slow host).
void observe(WorkloadWorker& worker, const WorkerObservation& obs, int attempt,
             int64_t attempt_started_ms, int64_t now_ms, const PolicyConfig& config);

// Folds what process 0 (workers[0]: slice 0, worker 0) said of its steps in `obs0` into the
// workload's goodput ledger (step_ledger.hpp), opening the current attempt's segment first. A
// step the ledger already has (a stream opened again sends the attempt's steps again) is
// skipped: a number not above the last one at a time not after it.
void fold_steps(Workload& workload, const std::optional<WorkerObservation>& obs0);

enum class Verdict { keep_running, succeeded, restart, fail };

struct Decision {
  Verdict verdict = Verdict::keep_running;
  std::string message;          // for people: which workers, which exit codes
  std::vector<size_t> culprits; // indices into workload.workers that failed or were lost
  bool counts_restart = false;  // restart: the job failed (uses up --max-restarts)
};

// The job failed (`what` says how): every worker restarts while restarts < max_restarts (a
// restart counted), else the workload fails; the message says which, and why.
Decision job_failure(const Workload& workload, const std::string& what);

// One inclusive range of exit codes.
struct ExitCodes {
  int from = 0;
  int to = 0;
};
// --restart-on-exit-codes "3,10-12": codes 1 to 255, single or `a-b` (a <= b). Errors (usage):
// the value and what is wrong with it.
Expected<std::vector<ExitCodes>> parse_exit_codes(const std::string& text);
// The ranges as text ("3,10-12"), the form a record keeps.
std::string to_string(const std::vector<ExitCodes>& codes);
// Whether exit `code` restarts under `given` (the record's restart_on_exit_codes): with nothing
// given, every non-zero code; else xpk's 42 and 127-255 and those given.
bool restartable_exit(int code, const std::string& given);

// What to do now with `workload` (its workers as observed).
Decision decide(const Workload& workload, int64_t now_ms);

} // namespace tpuctl::provision
