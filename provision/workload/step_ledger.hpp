// Goodput by steps, as Google's ml-goodput-measurement counts it (shared/reference/
// failures-and-jax.md section 3), from the steps a workload's process 0 reports.
//
// The monitor feeds every step it hears of process 0 (its number and when it started, on the
// worker's clock) together with the attempt it belongs to; the ledger keeps running totals, so
// it stays small however long the job runs:
//
//   - A step's time is the start of the next step minus its own start, for consecutive steps
//     only. The first step of each segment (an attempt of the job) also carries the compile and
//     the warm-up: only the ideal step time of it is productive, the rest is PROGRAM_STARTUP,
//     and so is the time from the attempt's start (its processes starting) to that first step.
//   - A segment ends when the job restarts. Google's library sees a restart when a step number
//     comes again; tpuctl also knows when a new attempt began, so a job that resumes exactly at
//     the next step (a preemption's save) is a disruption too, with nothing wasted. Steps of the
//     old segment from the new first step on were done twice: WASTED_PROGRESS_FROM_DISRUPTION,
//     from the start of that step to the start of the old segment's last step.
//     INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION runs from that last step's start to the new
//     attempt's start.
//   - Blocking checkpoint saves and restores the program reports (the event protocol, with
//     their seconds) are UNPRODUCTIVE_CHECKPOINT_SAVE_TIME and _RESTORE_TIME; a save is taken
//     out of the step it happened in, a restore out of the start-up.
//   - The last step counts as productive only once the job has ended (its end closes it).
//   - The ideal step time is the mean of the step times up to median + 3 x MAD (Google drops
//     step times under 1 s first, for TPU steps; tpuctl keeps them: its jobs may step faster).
//   - goodput = productive / total, total = from the first attempt's start to the end (or now);
//     OTHER is what no bucket explains.
// The window of recent steps (their start times) bounds how far back a restart can be placed
// exactly; a resume further back is placed by the segment's mean step time. Pure logic: no IO.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpuctl::provision {

struct StepSegment {
  int attempt = -1;
  int64_t start_ms = 0;   // the attempt's start (its processes were started then)
  int64_t first_step = -1; // -1: no step yet
  int64_t first_ms = 0;
  int64_t first_duration_ms = -1; // the first step's time, once the second began
  int64_t last_step = -1;
  int64_t last_ms = 0;
  int64_t steps = 0;     // steps seen
  int64_t sum_ms = 0;    // the times of its steps after the first (closed ones)
  int64_t restore_ms = 0; // checkpoint restores reported in it
  int64_t save_ms = 0;    // blocking checkpoint saves reported in it
};

struct StepLedger {
  std::string source; // where the steps come from: "protocol", "pattern", "" (none yet)
  int64_t job_start_ms = -1; // the first attempt's start; -1 before one began
  StepSegment segment; // the current one
  // The current segment's recent steps: (number, start) pairs, oldest first, at most
  // k_step_window.
  std::vector<std::pair<int64_t, int64_t>> recent;
  // The segment before, while the current one has no step yet (where that resumes decides what
  // of this one was wasted); attempt -1 when none is pending.
  StepSegment previous;
  std::vector<std::pair<int64_t, int64_t>> previous_recent;
  // Recent closed step times (not first steps), at most k_step_samples: for the ideal step time.
  std::vector<int32_t> samples;
  // The first step times of the closed segments: split between productive time (up to the
  // ideal step) and start-up with the ideal step time of the report, as Google's report splits
  // them. At most k_step_samples; older ones are folded with the ideal of their time.
  std::vector<int64_t> first_durations;
  // Totals of the segments before the current one (its own are added on report).
  int64_t productive_ms = 0;
  int64_t startup_ms = 0;
  int64_t wasted_ms = 0;
  int64_t recovery_ms = 0;
  int64_t save_ms = 0;
  int64_t restore_ms = 0;
  int disruptions = 0;
  int64_t last_productive_step = -1;
};

inline constexpr size_t k_step_window = 512;
inline constexpr size_t k_step_samples = 1000;

// The attempt `attempt` started at `start_ms` (the monitor's clock). Closing the previous
// segment waits for the new one's first step (a disruption is placed then).
void begin_attempt(StepLedger& ledger, int attempt, int64_t start_ms);

// Step `step` of process 0 started at `start_ms` in attempt `attempt` (steps of another attempt
// than the current one are ignored).
void add_step(StepLedger& ledger, int attempt, int64_t step, int64_t start_ms);

// A blocking checkpoint save (its duration) in the current segment; a restore likewise.
void add_checkpoint(StepLedger& ledger, int attempt, bool save, int64_t duration_ms);

// The ideal step time: the mean of the samples up to median + 3 MAD; 0 with no samples.
int64_t ideal_step_ms(const std::vector<int32_t>& samples);

struct StepGoodput {
  bool has_steps = false;
  int64_t total_ms = 0;
  int64_t productive_ms = 0;
  double goodput = 0;
  int64_t program_startup_ms = 0;
  int64_t wasted_progress_ms = 0;     // WASTED_PROGRESS_FROM_DISRUPTION
  int64_t infrastructure_recovery_ms = 0; // INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION
  int64_t checkpoint_save_ms = 0;
  int64_t checkpoint_restore_ms = 0;
  int64_t other_ms = 0;
  int disruptions = 0;
  int64_t ideal_step_ms = 0;
  int64_t last_productive_step = -1;
  int64_t steps = 0; // steps of the current segment
};

// The report at `end_ms` (now, or when the job ended; `ended`: the job finished, so its last
// step counts).
StepGoodput step_goodput(const StepLedger& ledger, int64_t end_ms, bool ended);

nlohmann::json to_json(const StepLedger& ledger);
StepLedger step_ledger_from_json(const nlohmann::json& doc); // missing or bad: empty
nlohmann::json to_json(const StepGoodput& goodput);

} // namespace tpuctl::provision
