// The workload failure policy as pure logic: how polls become worker states (observe) and what
// the monitor does next (decide).
#include <doctest/doctest.h>

#include "provision/workload/workload.hpp"
#include "provision/workload/workload_policy.hpp"

using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

namespace {

Workload four_workers(FailPolicy policy = FailPolicy::any, int max_restarts = 0) {
  Workload w;
  w.name = "train";
  w.fail_policy = policy;
  w.max_restarts = max_restarts;
  w.state = WorkloadState::running;
  w.started_at_ms = 1000;
  w.attempt_started_ms = 1000;
  for (int i = 0; i < 4; ++i) {
    WorkloadWorker x;
    x.node = "c-0";
    x.worker = i;
    x.host = "h" + std::to_string(i);
    x.state = WorkerState::running;
    w.workers.push_back(x);
  }
  return w;
}

WorkerObservation running(int64_t now, int64_t beat) {
  WorkerObservation o;
  o.reached = true;
  o.has_status = true;
  o.attempt = 0;
  o.state = "running";
  o.now_ms = now;
  o.heartbeat_ms = beat;
  o.supervisor_alive = true;
  return o;
}

WorkerObservation exited(int code, int attempt = 0) {
  WorkerObservation o = running(5000, 5000);
  o.state = "exited";
  o.exit_code = code;
  o.attempt = attempt;
  return o;
}

} // namespace

TEST_CASE("provision::observe turns a poll into the worker's state") {
  PolicyConfig config; // lost after 10 s
  WorkloadWorker w;
  SUBCASE("a fresh heartbeat from a live supervisor is RUNNING") {
    observe(w, running(20'000, 19'000), 0, 1000, 20'000, config);
    CHECK(w.state == WorkerState::running);
    CHECK(w.last_heartbeat_ms == 19'000);
    CHECK(w.last_contact_ms == 20'000);
  }
  SUBCASE("exit 0 is SUCCEEDED, any other status FAILED with its code") {
    observe(w, exited(0), 0, 1000, 6000, config);
    CHECK(w.state == WorkerState::succeeded);
    WorkloadWorker v;
    observe(v, exited(3), 0, 1000, 6000, config);
    CHECK(v.state == WorkerState::failed);
    CHECK(v.exit_code == 3);
  }
  SUBCASE("a late heartbeat from a live supervisor is a slow host: RUNNING, and noted") {
    observe(w, running(40'000, 25'000), 0, 1000, 40'000, config);
    CHECK(w.state == WorkerState::running);
    CHECK(w.detail.find("15s old") != std::string::npos);
  }
  SUBCASE("a supervisor gone without an exit status is LOST") {
    auto o = running(20'000, 19'500);
    o.supervisor_alive = false;
    observe(w, o, 0, 1000, 20'000, config);
    CHECK(w.state == WorkerState::lost);
  }
  SUBCASE(
      "an unheard worker is LOST only when silent past lost_after AND a new connection failed") {
    w.state = WorkerState::running;
    WorkerObservation down;
    down.error = "connection refused (127.0.0.9:2222)";
    down.silent_ms = 6'000;
    down.failed_checks = 1;
    observe(w, down, 0, 1000, 15'000, config);
    CHECK(w.state == WorkerState::running); // not silent long enough
    CHECK(w.detail == down.error);
    down.silent_ms = 60'000; // silent for long (a stopped monitor counts none of its own stall)
    down.failed_checks = 0;  // but nothing independent confirmed it
    observe(w, down, 0, 1000, 75'000, config);
    CHECK(w.state == WorkerState::running);
    down.silent_ms = 10'001;
    down.failed_checks = 2;
    observe(w, down, 0, 1000, 20'001, config);
    CHECK(w.state == WorkerState::lost);
    CHECK(w.detail.find("unreachable") != std::string::npos);
    CHECK(w.detail.find("2 new connections failed") != std::string::npos);
    CHECK(w.detail.find("connection refused") != std::string::npos);
  }
  SUBCASE("a status of an earlier attempt means the current one has not started yet") {
    observe(w, exited(3, 0), 1, 30'000, 31'000, config);
    CHECK(w.state == WorkerState::pending);
    observe(w, exited(3, 0), 1, 30'000, 45'000, config);
    CHECK(w.state == WorkerState::lost);
  }
  SUBCASE("an exit a stop of tpuctl's caused is STOPPED, never FAILED; its end and last line "
          "are kept") {
    auto o = exited(143);
    o.stopped = true;
    o.finished_ms = 4321;
    o.last_line = "Terminated";
    observe(w, o, 0, 1000, 6000, config);
    CHECK(w.state == WorkerState::stopped);
    CHECK(w.exit_code == 143);
    CHECK(w.ended_ms == 4321);
    CHECK(w.stopped);
    CHECK(w.last_line == "Terminated");
  }
  SUBCASE("events are kept per attempt: a new attempt starts without the last one's") {
    auto o = running(20'000, 19'000);
    o.events = nlohmann::json{{"compile_cache", {{"event", "compile_cache"}, {"hits", 3}}}};
    observe(w, o, 0, 1000, 20'000, config);
    CHECK(w.events["compile_cache"]["hits"] == 3);
    observe(w, exited(3, 0), 1, 30'000, 31'000, config); // attempt 1 not started yet
    CHECK(w.events.empty());
  }
  SUBCASE("an outcome is final for its attempt") {
    observe(w, exited(0), 0, 1000, 6000, config);
    WorkerObservation down;
    down.error = "refused";
    down.silent_ms = 60'000;
    down.failed_checks = 3;
    observe(w, down, 0, 1000, 60'000, config);
    CHECK(w.state == WorkerState::succeeded);
  }
}

TEST_CASE("provision::decide applies the failure policy") {
  SUBCASE("every worker exited 0: SUCCEEDED") {
    auto w = four_workers();
    for (auto& x : w.workers) {
      x.state = WorkerState::succeeded;
    }
    CHECK(decide(w, 9000).verdict == Verdict::succeeded);
  }
  SUBCASE("policy any: one failing worker fails the workload, naming it and its exit code") {
    auto w = four_workers();
    w.workers[2].state = WorkerState::failed;
    w.workers[2].exit_code = 3;
    auto d = decide(w, 9000);
    CHECK(d.verdict == Verdict::fail);
    CHECK(d.culprits == std::vector<size_t>{2});
    CHECK(d.message == "worker c-0/2@h2 exited with 3");
  }
  SUBCASE("with restarts left, a failure restarts every worker and says which restart") {
    auto w = four_workers(FailPolicy::any, 2);
    w.restarts = 1;
    w.workers[0].state = WorkerState::failed;
    w.workers[0].exit_code = 1;
    auto d = decide(w, 9000);
    CHECK(d.verdict == Verdict::restart);
    CHECK(d.counts_restart);
    CHECK(d.message.find("restart 2 of 2") != std::string::npos);
    CHECK(d.message.find("exited with 1") != std::string::npos);
    w.restarts = 2;
    d = decide(w, 9000);
    CHECK(d.verdict == Verdict::fail);
    CHECK(d.message.find("after 2 restart(s)") != std::string::npos);
  }
  SUBCASE("a lost worker is the infrastructure's failure: repaired without a restart, up to "
          "--max-repairs") {
    auto w = four_workers(FailPolicy::any, 0); // no restarts at all
    w.workers[0].state = WorkerState::lost;
    w.workers[0].detail = "no heartbeat for 12s";
    auto d = decide(w, 9000);
    CHECK(d.verdict == Verdict::restart);
    CHECK(!d.counts_restart);
    CHECK(d.message.find("repair 1 of 3") != std::string::npos);
    CHECK(d.message.find("no heartbeat for 12s") != std::string::npos);
    w.repairs = 3;
    d = decide(w, 9000);
    CHECK(d.verdict == Verdict::fail);
    CHECK(d.message.find("after 3 repair(s), --max-repairs 3") != std::string::npos);
    w.repairs = 0;
    w.max_repairs = 0;
    CHECK(decide(w, 9000).verdict == Verdict::fail);
  }
  SUBCASE("--restart-on-exit-codes: xpk's rule; an exit it does not name fails at once") {
    auto w = four_workers(FailPolicy::any, 5);
    w.restart_on_exit_codes = "3,10-12";
    for (int code : {3, 10, 12, 42, 127, 137, 143, 255}) {
      w.workers[1].state = WorkerState::failed;
      w.workers[1].exit_code = code;
      CHECK_MESSAGE(decide(w, 9000).verdict == Verdict::restart, code);
    }
    for (int code : {1, 2, 9, 13, 41, 126}) {
      w.workers[1].exit_code = code;
      auto d = decide(w, 9000);
      CHECK_MESSAGE(d.verdict == Verdict::fail, code);
      CHECK(d.message.find("exit " + std::to_string(code) + " is not restarted") !=
            std::string::npos);
    }
    w.restart_on_exit_codes.clear(); // not given: every non-zero exit may restart
    CHECK(decide(w, 9000).verdict == Verdict::restart);
  }
  SUBCASE("policy all: failures wait for every worker to end") {
    auto w = four_workers(FailPolicy::all);
    w.workers[1].state = WorkerState::failed;
    w.workers[1].exit_code = 1;
    CHECK(decide(w, 9000).verdict == Verdict::keep_running);
    for (auto& x : w.workers) {
      if (x.state == WorkerState::running) {
        x.state = WorkerState::succeeded;
      }
    }
    auto d = decide(w, 9000);
    CHECK(d.verdict == Verdict::fail);
    CHECK(d.culprits == std::vector<size_t>{1});
  }
  SUBCASE("past --timeout a running workload fails, saying so") {
    auto w = four_workers();
    w.timeout_ms = 60'000;
    CHECK(decide(w, 60'000).verdict == Verdict::keep_running);
    auto d = decide(w, 61'001);
    CHECK(d.verdict == Verdict::fail);
    CHECK(d.message.find("--timeout 1m") != std::string::npos);
  }
  SUBCASE("of several failed workers the first to end is named, with its last line; the cascade "
          "is counted, not blamed") {
    auto w = four_workers(FailPolicy::any, 5);
    w.restart_on_exit_codes = "42";
    // Worker 3's line reached the monitor first, but worker 1 ended 2 s before it.
    w.workers[3].state = WorkerState::failed;
    w.workers[3].exit_code = 1; // the peer's abort: not restartable on its own
    w.workers[3].ended_ms = 12'000;
    w.workers[1].state = WorkerState::failed;
    w.workers[1].exit_code = 137; // killed: restartable (128+N)
    w.workers[1].ended_ms = 10'000;
    w.workers[1].last_line = "Killed";
    w.workers[2].state = WorkerState::stopped; // ended by tpuctl's stop: never a culprit
    w.workers[2].exit_code = 143;
    auto d = decide(w, 13'000);
    CHECK(d.verdict == Verdict::restart); // worker 1's 137 decides, not worker 3's 1
    CHECK(d.culprits == std::vector<size_t>{1, 3});
    CHECK(d.message.find("worker c-0/1@h1 exited with 137: Killed (the first to "
                         "fail; 1 other worker failed after it)") != std::string::npos);
    CHECK(d.message.find("c-0/3@") == std::string::npos); // counted, not named
    CHECK(d.message.find("c-0/2@") == std::string::npos);
    w.workers[1].ended_ms = 13'000; // now worker 3 was first: its exit 1 is not restarted
    d = decide(w, 14'000);
    CHECK(d.verdict == Verdict::fail);
    CHECK(d.message.rfind("worker c-0/3@h3 exited with 1", 0) == 0);
  }
  SUBCASE("a host lost before its peers died of it is the infrastructure's failure: repaired, "
          "whatever exit codes the cascade left") {
    auto w = four_workers(FailPolicy::any, 0); // no restarts: a job failure would fail it
    w.workers[1].state = WorkerState::lost;
    w.workers[1].detail = "host unreachable";
    w.workers[1].last_heartbeat_ms = 9'000; // last heard of, then it died
    w.workers[2].state = WorkerState::failed;
    w.workers[2].exit_code = 134; // JAX's abort when a peer dies
    w.workers[2].ended_ms = 11'000;
    auto d = decide(w, 20'000);
    CHECK(d.verdict == Verdict::restart); // a repair
    CHECK(!d.counts_restart);
    CHECK(d.culprits == std::vector<size_t>{1, 2});
    CHECK(d.message.find("worker c-0/1@h1 was lost: host unreachable (1 other "
                         "worker failed after it)") != std::string::npos);
    CHECK(d.message.find("c-0/2@") == std::string::npos);
    // The other way round: worker 2 failed on its own first, the host went later.
    w.workers[2].ended_ms = 8'000;
    d = decide(w, 20'000);
    CHECK(d.verdict == Verdict::fail);
    CHECK(d.message.rfind("worker c-0/2@h2 exited with 134", 0) == 0);
  }
  SUBCASE("running workers keep it running") {
    CHECK(decide(four_workers(), 9000).verdict == Verdict::keep_running);
  }
}

TEST_CASE("provision::parse_exit_codes takes codes and ranges; refuses the rest naming it") {
  auto ok = parse_exit_codes("3, 10-12,255");
  REQUIRE(ok);
  CHECK(to_string(*ok) == "3,10-12,255");
  for (const std::string bad : {"", "0", "256", "12-10", "a", "3,", "-4", "1-2-3", "99999999999"}) {
    auto r = parse_exit_codes(bad);
    REQUIRE_MESSAGE(!r, bad);
    CHECK(r.error().kind == tpuctl::ErrorKind::usage);
    CHECK(r.error().message.find("--restart-on-exit-codes") == 0);
  }
}

TEST_CASE("provision::Workload survives a JSON round trip and rejects unknown values") {
  auto w = four_workers(FailPolicy::all, 3);
  w.pool = "p";
  w.uid = "0123456789abcdef";
  w.cluster = "c";
  w.queued_resource = "c";
  w.command = "python3 -c 'print(1)'";
  w.env = {{"A", "x y"}, {"B", "$(no)"}};
  w.workers[1].exit_code = 7;
  auto back = workload_from_json(to_json(w));
  REQUIRE(back);
  CHECK(back->command == w.command);
  CHECK(back->env == w.env);
  CHECK(back->fail_policy == FailPolicy::all);
  CHECK(back->max_restarts == 3);
  CHECK(back->workers.size() == 4);
  CHECK(back->workers[1].exit_code == 7);
  auto doc = to_json(w);
  doc["state"] = "EXPLODED";
  auto bad = workload_from_json(doc);
  REQUIRE(!bad);
  CHECK(bad.error().message.find("EXPLODED") != std::string::npos);
  auto policy = parse_fail_policy("some");
  REQUIRE(!policy);
  CHECK(policy.error().kind == tpuctl::ErrorKind::usage);
  CHECK(policy.error().message.find("'some'") != std::string::npos);
}

TEST_CASE("provision::workload_dir keeps each worker's files apart under the workdir") {
  CHECK(workload_dir("~/.tpuctl", "abc", "c-1", 3) == "~/.tpuctl/workloads/abc/c-1-3");
}
