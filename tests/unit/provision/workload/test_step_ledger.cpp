// Goodput by steps as Google's ml-goodput-measurement counts it, checked by arithmetic on scripted
// step timelines (milliseconds on one clock).
#include <doctest/doctest.h>

#include "provision/workload/step_ledger.hpp"

using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

namespace {

// Steps first..last of `attempt`, the first at `first_ms`, each `each` ms after the one before,
// the first one taking `first_takes`.
void steps(StepLedger& l, int attempt, int64_t first, int64_t last, int64_t first_ms,
           int64_t first_takes, int64_t each) {
  int64_t t = first_ms;
  for (int64_t n = first; n <= last; ++n) {
    add_step(l, attempt, n, t);
    t += n == first ? first_takes : each;
  }
}

StepLedger started(int64_t at = 0) {
  StepLedger l;
  l.source = "pattern";
  begin_attempt(l, 0, at);
  return l;
}

} // namespace

TEST_CASE("provision::step ledger: one run, its start-up and its compile are badput, the rest "
          "productive") {
  auto l = started();
  // Its first step at 2 s, taking 1.5 s (the compile); then 500 ms steps; it ends at 8 s.
  steps(l, 0, 0, 9, 2000, 1500, 500); // steps start at 2000, 3500, 4000, ... 7500
  auto g = step_goodput(l, 8000, true);
  CHECK(g.has_steps);
  CHECK(g.ideal_step_ms == 500);
  CHECK(g.total_ms == 8000);
  // Steps 1-8 (8 x 500), the ideal part of the first (500), the last (closed by the end, 500).
  CHECK(g.productive_ms == 5000);
  CHECK(g.program_startup_ms == 2000 + 1000); // to the first step, and the first step's excess
  CHECK(g.other_ms == 0);
  CHECK(g.disruptions == 0);
  CHECK(g.last_productive_step == 9);
  CHECK(g.goodput == doctest::Approx(5000.0 / 8000.0));
  // Still running at 8 s: the last step is not done yet.
  auto running = step_goodput(l, 8000, false);
  CHECK(running.productive_ms == 4500);
  CHECK(running.other_ms == 500);
  CHECK(running.last_productive_step == 8);
}

TEST_CASE("provision::step ledger: a restart from an earlier checkpoint wastes the steps done "
          "again and counts the recovery from the last step to the new attempt") {
  auto l = started();
  steps(l, 0, 0, 9, 1000, 500, 500); // 1000, 1500, ..., 5500; dies during step 9
  begin_attempt(l, 1, 7000);          // restarted at 7 s
  steps(l, 1, 5, 14, 8000, 500, 500); // resumed from the checkpoint after step 4: 8000 ... 12500
  auto g = step_goodput(l, 13000, true);
  CHECK(g.disruptions == 1);
  CHECK(g.wasted_progress_ms == 2000);        // steps 5-8 of the first attempt: 5500 - 3500
  CHECK(g.infrastructure_recovery_ms == 1500); // step 9's start (5500) to the new start (7000)
  CHECK(g.program_startup_ms == 1000 + 1000); // each attempt's start to its first step
  CHECK(g.productive_ms == 2500 + 5000);      // steps 0-4, then 5-14
  CHECK(g.other_ms == 0);
  CHECK(g.total_ms == 13000);
  CHECK(g.last_productive_step == 14);
}

TEST_CASE("provision::step ledger: a resume right after the last step (a preemption's save) is "
          "a disruption with nothing wasted; a step number again within one attempt is one") {
  auto l = started();
  steps(l, 0, 0, 4, 1000, 500, 500); // 1000 ... 3000
  begin_attempt(l, 1, 5000);
  steps(l, 1, 5, 6, 6000, 500, 500); // 6000, 6500
  auto g = step_goodput(l, 7000, true);
  CHECK(g.disruptions == 1);
  CHECK(g.wasted_progress_ms == 0);
  CHECK(g.infrastructure_recovery_ms == 2000); // 3000 -> 5000
  CHECK(g.productive_ms == 2000 + 1000);       // steps 0-3, then 5-6
  // The program restarts itself from step 5 within attempt 1.
  add_step(l, 1, 5, 7200);
  add_step(l, 1, 6, 7700);
  auto again = step_goodput(l, 8200, true);
  CHECK(again.disruptions == 2);
  CHECK(again.wasted_progress_ms == 500); // step 5 done again: 6500 - 6000
}

TEST_CASE("provision::step ledger: a long save after the last step heard (cut short by the "
          "disruption) does not hide the steps done again") {
  // Seen on a loaded machine: steps 0-9 every 500 ms, then the save of step 9 blocks 6 s after
  // step 9 began (outside every step's measured duration), and the host is lost; the job
  // resumes from step 5.
  auto l = started();
  steps(l, 0, 0, 9, 1000, 500, 500); // 1000 ... 5500
  add_checkpoint(l, 0, true, 6000);
  begin_attempt(l, 1, 13000);
  steps(l, 1, 5, 9, 14000, 500, 500); // 14000 ... 16000
  auto g = step_goodput(l, 16500, true);
  CHECK(g.disruptions == 1);
  CHECK(g.wasted_progress_ms == 2000); // steps 5-8 of the first attempt: 5500 - 3500
  // Every millisecond in exactly one bucket.
  CHECK(g.productive_ms + g.program_startup_ms + g.wasted_progress_ms +
            g.infrastructure_recovery_ms + g.checkpoint_save_ms + g.checkpoint_restore_ms +
            g.other_ms ==
        g.total_ms);
  CHECK(g.wasted_progress_ms > 0);
}

TEST_CASE("provision::step ledger: blocking checkpoint saves and restores are their own badput") {
  auto l = started();
  add_checkpoint(l, 0, false, 400); // a restore before the first step
  steps(l, 0, 0, 4, 1000, 500, 500);
  add_checkpoint(l, 0, true, 200); // a save inside a step
  auto g = step_goodput(l, 3500, true);
  CHECK(g.checkpoint_restore_ms == 400);
  CHECK(g.checkpoint_save_ms == 200);
  CHECK(g.program_startup_ms == 600); // 1000 to the first step, less the restore
  CHECK(g.productive_ms == 2500 - 200);
  CHECK(g.other_ms == 0);
}

TEST_CASE("provision::step ledger: a program that reports every 10 steps, and the ideal step "
          "time ignores outliers past median + 3 MAD") {
  auto l = started();
  for (int64_t n = 0; n <= 100; n += 10) {
    add_step(l, 0, n, 1000 + n * 100);
  }
  auto g = step_goodput(l, 11000, false);
  CHECK(g.ideal_step_ms == 100);
  CHECK(g.productive_ms == 10000); // step 0's start to step 100's: every step closed
  CHECK(g.program_startup_ms == 1000);
  CHECK(g.other_ms == 0);
  std::vector<int32_t> samples(20, 100);
  samples.push_back(5000);
  CHECK(ideal_step_ms(samples) == 100);
  CHECK(ideal_step_ms({}) == 0);
}

TEST_CASE("provision::step ledger: the JSON form keeps everything the report needs") {
  auto l = started();
  steps(l, 0, 0, 9, 1000, 500, 500);
  begin_attempt(l, 1, 7000);
  auto back = step_ledger_from_json(to_json(l));
  steps(back, 1, 5, 14, 8000, 500, 500);
  steps(l, 1, 5, 14, 8000, 500, 500);
  auto a = step_goodput(l, 13000, true);
  auto b = step_goodput(back, 13000, true);
  CHECK(to_json(a) == to_json(b));
  CHECK(b.wasted_progress_ms == 2000);
  CHECK(step_ledger_from_json(nlohmann::json("junk")).source.empty());
}

TEST_CASE("provision::step ledger: attempts that never stepped between two that did keep the "
          "first one's disruption to place, their time in the recovery") {
  auto l = started();
  steps(l, 0, 0, 9, 1000, 500, 500); // ... 5500
  begin_attempt(l, 1, 7000);          // never steps (the repair starts it again)
  begin_attempt(l, 2, 9000);
  steps(l, 2, 5, 6, 10000, 500, 500);
  auto g = step_goodput(l, 11000, true);
  CHECK(g.disruptions == 1);
  CHECK(g.wasted_progress_ms == 2000);        // steps 5-8 of attempt 0, as before
  CHECK(g.infrastructure_recovery_ms == 3500); // step 9's start to attempt 2's
  CHECK(g.other_ms == 0);
  // A first attempt that never stepped is start-up.
  StepLedger m = started(0);
  begin_attempt(m, 1, 4000);
  steps(m, 1, 0, 1, 5000, 500, 500);
  auto h = step_goodput(m, 6000, true);
  CHECK(h.program_startup_ms == 4000 + 1000);
  CHECK(h.disruptions == 0);
}
