// Hangs as pure logic: when a job that reports steps hangs, and which worker's Python stack
// differs (faulthandler's dumps, as a worker's log gets them).
#include <doctest/doctest.h>

#include "provision/workload/workload_hang.hpp"

using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

namespace {

std::string dump(int line) {
  return "Thread 0x00007f0000000001 (most recent call first):\n"
         "  File \"/usr/lib/python3.11/threading.py\", line 331 in wait\n"
         "  File \"/usr/lib/python3.11/threading.py\", line 1002 in _bootstrap\n"
         "\n"
         "Current thread 0x00007f0000000002 (most recent call first):\n"
         "  File \"/opt/x/site-packages/jax/_src/array.py\", line 650 in __float__\n"
         "  File \"/home/u/job/train.py\", line " +
         std::to_string(line) + " in <module>\n";
}

Workload stepping(int64_t last_ms) {
  Workload w;
  w.attempt = 0;
  w.steps.source = "protocol";
  begin_attempt(w.steps, 0, 0);
  for (int i = 0; i < 20; ++i) {
    add_step(w.steps, 0, i, 1000 + i * 200);
  }
  w.steps.segment.last_ms = last_ms;
  for (int i = 0; i < 4; ++i) {
    WorkloadWorker x;
    x.worker = i;
    x.state = WorkerState::running;
    w.workers.push_back(x);
  }
  return w;
}

} // namespace

TEST_CASE("provision::main_stack finds the thread that runs the program's <module>") {
  auto s = main_stack(dump(42));
  REQUIRE(s.size() == 2);
  CHECK(s[0] == "array.py:650 in __float__");
  CHECK(s[1] == "train.py:42 in <module>");
  CHECK(main_stack("(no stacks: it does not import JAX)").empty());
}

TEST_CASE("provision::odd_stack names the one worker whose stack differs from the others'") {
  std::vector<std::optional<std::string>> dumps{dump(42), dump(42), dump(17), dump(42)};
  auto odd = odd_stack(dumps);
  REQUIRE(odd);
  CHECK(odd->worker == 2);
  CHECK(odd->where == "train.py:17 in <module>"); // where they part, not their common top
  CHECK(odd->others == "train.py:42 in <module>");
  // Two and two, all alike, or a missing answer with the rest alike: no single culprit.
  CHECK(!odd_stack({dump(42), dump(42), dump(17), dump(17)}));
  CHECK(!odd_stack({dump(42), dump(42), dump(42)}));
  CHECK(!odd_stack({dump(42), std::nullopt, dump(17)}));
}

TEST_CASE("provision::hang_check: no step for the timeout while every worker runs") {
  auto w = stepping(4800);
  CHECK(hang_timeout_ms(w) == k_hang_floor_ms); // 20 x 200 ms is under the floor
  CHECK(!hang_check(w, 4800 + 60'000));
  auto why = hang_check(w, 4800 + 60'001);
  REQUIRE(why);
  CHECK(why->find("after step 19") != std::string::npos);
  w.hang_timeout_ms = 5000;
  CHECK(hang_check(w, 10'000));
  w.workers[1].state = WorkerState::failed; // a failure is the failure policy's, not a hang
  CHECK(!hang_check(w, 10'000));
  auto quiet = stepping(4800);
  quiet.steps.source.clear(); // a job that reports no steps never hangs by this rule
  CHECK(!hang_check(quiet, 1'000'000));
}
