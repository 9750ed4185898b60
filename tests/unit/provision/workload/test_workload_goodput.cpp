// Goodput accounting as pure logic: every moment since a workload's creation lands in one phase,
// a failed attempt's running time becomes lost, and goodput is running time over wall time.
#include <doctest/doctest.h>

#include "provision/workload/workload.hpp"
#include "provision/workload/workload_goodput.hpp"

using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

TEST_CASE("goodput: a workload that ran once to the end: provisioning then running, all of it "
          "counted") {
  WorkloadTime t;
  enter(t, TimePhase::provisioning, 1000); // created
  enter(t, TimePhase::running, 1500);      // every worker started
  enter(t, TimePhase::none, 11500);        // succeeded
  Goodput g = goodput_of(t, 1000, 11500);
  CHECK(g.wall_ms == 10500);
  CHECK(g.provisioning_ms == 500);
  CHECK(g.running_ms == 10000);
  CHECK(g.lost_ms == 0);
  CHECK(g.goodput == doctest::Approx(10000.0 / 10500.0));
}

TEST_CASE("goodput: a repair: the lost attempt's running time is lost, recovering and the new "
          "slice's provisioning are counted, and the open phase runs up to now") {
  WorkloadTime t;
  enter(t, TimePhase::provisioning, 0);
  enter(t, TimePhase::running, 1000);
  // A worker lost at 9000: the attempt's 8 s are thrown away.
  enter(t, TimePhase::recovering, 9000);
  lose_attempt(t);
  CHECK(t.running_ms == 0);
  CHECK(t.lost_ms == 8000);
  enter(t, TimePhase::queued, 9500);        // requeued, waiting for capacity
  enter(t, TimePhase::provisioning, 12500); // placed again
  enter(t, TimePhase::recovering, 14500);   // ACTIVE: the workers restarting
  enter(t, TimePhase::running, 15000);      // attempt 1 running
  Goodput g = goodput_of(t, 0, 20000);      // still running at 20 s
  CHECK(g.running_ms == 5000);
  CHECK(g.lost_ms == 8000);
  CHECK(g.recovering_ms == 1000);
  CHECK(g.queued_ms == 3000);
  CHECK(g.provisioning_ms == 3000);
  CHECK(g.wall_ms == 20000);
  CHECK(g.provisioning_ms + g.queued_ms + g.recovering_ms + g.running_ms + g.lost_ms == g.wall_ms);
  CHECK(g.goodput == doctest::Approx(0.25));
  // The record is unchanged by the query: the open phase is counted on a copy.
  CHECK(t.phase == TimePhase::running);
  CHECK(t.running_ms == 0);
}

TEST_CASE("goodput: a clock that went back adds nothing; a time no monitor saw still counts in "
          "the wall time") {
  WorkloadTime t;
  enter(t, TimePhase::running, 5000);
  enter(t, TimePhase::recovering, 4000); // the clock stepped back
  CHECK(t.running_ms == 0);
  Goodput g = goodput_of(t, 5000, 3000); // and "now" is before the phase began
  CHECK(g.recovering_ms == 0);
  CHECK(g.wall_ms == 0);
  CHECK(g.goodput == 0.0);
  // Created at 2000, phases only from 6000 on (no monitor before): the wall time is since
  // creation.
  WorkloadTime late;
  enter(late, TimePhase::running, 6000);
  Goodput h = goodput_of(late, 2000, 10000);
  CHECK(h.wall_ms == 8000);
  CHECK(h.running_ms == 4000);
  CHECK(h.goodput == doctest::Approx(0.5));
}

TEST_CASE("goodput: a cluster's sum weighs each workload by its wall time") {
  Goodput a;
  a.wall_ms = 1000;
  a.running_ms = 1000;
  Goodput b;
  b.wall_ms = 3000;
  b.running_ms = 1000;
  b.lost_ms = 2000;
  Goodput total;
  total += a;
  total += b;
  CHECK(total.wall_ms == 4000);
  CHECK(total.running_ms == 2000);
  CHECK(total.lost_ms == 2000);
  CHECK(total.goodput == doctest::Approx(0.5));
}

TEST_CASE("goodput: the stored time survives a round trip through json; an old record without it "
          "starts at zero") {
  WorkloadTime t;
  enter(t, TimePhase::provisioning, 100);
  enter(t, TimePhase::queued, 300);
  t.lost_ms = 42;
  WorkloadTime back = workload_time_from_json(to_json(t));
  CHECK(back.provisioning_ms == 200);
  CHECK(back.lost_ms == 42);
  CHECK(back.phase == TimePhase::queued);
  CHECK(back.phase_since_ms == 300);
  WorkloadTime old = workload_time_from_json(nlohmann::json());
  CHECK(old.phase == TimePhase::none);
  CHECK(old.running_ms == 0);
  // A finished workload's goodput stops at its end, not at the time of the query.
  Workload w;
  w.created_at_ms = 1000;
  w.state = WorkloadState::succeeded;
  w.finished_at_ms = 3000;
  enter(w.time, TimePhase::running, 1000);
  enter(w.time, TimePhase::none, 3000);
  Goodput g = goodput_of(w, 999999);
  CHECK(g.wall_ms == 2000);
  CHECK(g.goodput == doctest::Approx(1.0));
}

TEST_SUITE_END();
