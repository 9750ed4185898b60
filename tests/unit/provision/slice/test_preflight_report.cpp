#include <chrono>
#include <fstream>
#include <signal.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "provision/slice/preflight_report.hpp"
#include "provision/slice/provisioning.hpp"
#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/process_tree.hpp"
#include "util/strings.hpp"

using namespace tpuctl::provision;
using std::chrono::milliseconds;

TEST_SUITE_BEGIN("provision");

TEST_CASE("provision::preflight_from_text reads back what preflight_to_json writes") {
  tpuctl::agent::PreflightResult r;
  r.worker = 2;
  r.bind_address = "127.0.70.4:8476";
  r.reached = {0, 1};
  r.unreachable = {{3, "127.0.70.5:8476", "connection refused"}};
  r.heard_from = {0, 1, 3};
  r.clock_ms = 1790000000123;
  r.duration_ms = 20004;
  r.kernel.ran = true;
  r.kernel.ok = true;
  r.kernel.m = r.kernel.n = r.kernel.k = 64;
  r.kernel.isa = "avx512-vnni";
  auto doc = preflight_to_json(r);
  CHECK(doc["ok"] == false);
  CHECK(doc["unreachable"][0]["worker"] == 3);
  CHECK(doc["kernel_check"]["ok"] == true);
  CHECK(!doc.contains("bind_error"));

  auto back = preflight_from_text(doc.dump());
  REQUIRE(back);
  CHECK(back->worker == 2);
  CHECK(back->reached == std::vector<int>{0, 1});
  REQUIRE(back->unreachable.size() == 1);
  CHECK(back->unreachable[0].address == "127.0.70.5:8476");
  CHECK(back->heard_from == std::vector<int>{0, 1, 3});
  CHECK(back->clock_ms == 1790000000123);
  CHECK(back->kernel.ran);
  CHECK(back->kernel.isa == "avx512-vnni");
  CHECK(preflight_problem(*back) ==
        "cannot reach worker 3 at 127.0.70.5:8476 (connection refused)");
}

TEST_CASE("provision::preflight_from_text names a missing field and rejects non-json") {
  auto missing = preflight_from_text(R"({"worker": 0, "bind_address": "a:1", "reached": []})");
  REQUIRE(!missing);
  CHECK(missing.error().message.find("'unreachable'") != std::string::npos);
  auto typed = preflight_from_text(
      R"({"worker": "zero", "bind_address": "a:1", "reached": [], "unreachable": [],
          "clock_ms": 1})");
  CHECK(!typed);
  auto text = preflight_from_text("bash: tpuctl: command not found");
  REQUIRE(!text);
  CHECK(text.error().message.find("not a json object") != std::string::npos);
}

TEST_CASE("provision::preflight_from_text takes numbers only as whole numbers that fit "
          "(fuzz/regressions/probe)") {
  // A remote agent's "clock_ms": 170077777777000000000 (a double past int64) was converted with
  // undefined behaviour; worker 4294967296 silently became worker 0.
  const std::string head = R"({"bind_address": "a:1", "unreachable": [], )";
  for (const char* fields :
       {R"("worker": 0, "reached": [], "clock_ms": 170077777777000000000})",
        R"("worker": 4294967296, "reached": [], "clock_ms": 1})",
        R"("worker": 0.5, "reached": [], "clock_ms": 1})",
        R"("worker": 0, "reached": [1e30], "clock_ms": 1})",
        R"("worker": 0, "reached": 3, "clock_ms": 1})",
        R"("worker": 0, "reached": [], "heard_from": [-2147483649], "clock_ms": 1})",
        R"("worker": 0, "reached": [], "clock_ms": 1, "duration_ms": 1.5})",
        R"("worker": 0, "reached": [], "clock_ms": 1, "kernel_check": {"ok": true, "m": 1e10}})"}) {
    CAPTURE(fields);
    auto r = preflight_from_text(head + fields);
    REQUIRE(!r);
    CHECK(r.error().message.find("is not a whole number in range") != std::string::npos);
  }
  auto ok = preflight_from_text(head + R"("worker": 3, "reached": [0, 1], "clock_ms":
      9007199254740993, "kernel_check": {"ok": true, "m": 64, "mismatches": 0}})");
  REQUIRE_MESSAGE(ok, ok.error().message);
  CHECK(ok->clock_ms == 9007199254740993); // exact: read as an integer, never via a double
  CHECK(ok->kernel.m == 64);
}

TEST_CASE("provision::preflight_problem names the listener, each peer and the kernel") {
  tpuctl::agent::PreflightResult r;
  CHECK(preflight_problem(r).empty());
  r.bind_error = "cannot listen on 127.0.70.2:8476: Address already in use";
  r.unreachable = {{0, "127.0.70.2:8476", "timed out"}, {2, "h2", "name not resolved: x"}};
  r.kernel.ran = true;
  r.kernel.m = r.kernel.n = r.kernel.k = 64;
  r.kernel.isa = "portable";
  r.kernel.mismatches = 5;
  std::string p = preflight_problem(r);
  CHECK(p.find("cannot listen on its own address") == 0);
  CHECK(p.find("; cannot reach worker 0 at 127.0.70.2:8476 (timed out)") != std::string::npos);
  CHECK(p.find("cannot reach worker 2 at h2 (name not resolved: x)") != std::string::npos);
  CHECK(p.find("differs from the reference in 5 elements") != std::string::npos);
}

TEST_CASE("provision::check_clock fails only a skew that is certain") {
  // Remote read at some instant in [1000, 1400]; allowed skew 2000.
  auto c = check_clock(1200, 1000, 1400, milliseconds(2000));
  CHECK(c.ok);
  CHECK(c.skew_ms == 0);
  CHECK(c.uncertainty_ms == 200);
  CHECK(check_clock(3400, 1000, 1400, milliseconds(2000)).ok);  // could be exactly 2000 off
  CHECK(!check_clock(3401, 1000, 1400, milliseconds(2000)).ok); // ahead by more than 2000
  CHECK(check_clock(-1000, 1000, 1400, milliseconds(2000)).ok);
  CHECK(!check_clock(-1001, 1000, 1400, milliseconds(2000)).ok); // behind by more than 2000
  auto behind = check_clock(-5000, 1000, 1400, milliseconds(2000));
  CHECK(behind.skew_ms == -6200);
  // A slow SSH call widens the interval, never fails a good clock.
  CHECK(check_clock(1000 + 30000, 1000, 1000 + 60000, milliseconds(100)).ok);
  // Swapped bounds are tolerated.
  CHECK(check_clock(1200, 1400, 1000, milliseconds(0)).ok);
}

TEST_CASE("provision::stop_processes_script matches the uid exactly and escalates to KILL") {
  std::string s = stop_processes_script("0123456789abcdef", 1500);
  CHECK(s.find("u='TPUCTL_QR_UID=0123456789abcdef'") == 0);
  CHECK(s.find("kill -TERM") < s.find("kill -KILL"));
  CHECK(s.find("r=15;") != std::string::npos); // 1.5 s in 0.1 s steps
  CHECK(s.find("[ $i -lt $r ]") != std::string::npos);
}

TEST_CASE("provision::stop_tagged_processes_script waits the grace a process carries (-tgps), "
          "then KILLs what ignores TERM") {
  tpuctl::test::TempDir tmp;
  const std::string done = (tmp.path() / "checkpoint").string();
  // This process's own tag: a second copy of the suite runs the same test at the same time.
  const std::string g = tmp.path().filename().string();
  // One checkpoints for 0.5 s on TERM (its grace: 5 s); one ignores TERM (its grace: 1 s).
  auto start = tpuctl::util::run_process(
      {"/bin/sh", "-c",
       "TPUCTL_TEST_GRACE=" + g +
           " TPUCTL_TERMINATION_GRACE_SECONDS=5 setsid sh -c \"trap 'sleep 0.5; "
           "echo saved > " +
           done +
           "; exit 0' TERM; while :; do sleep 0.05; done\" "
           ">/dev/null 2>&1 & echo $!; "
           "TPUCTL_TEST_GRACE=" +
           g +
           " TPUCTL_TERMINATION_GRACE_SECONDS=1 setsid sh -c \"trap '' TERM; "
           "while :; do sleep 0.05; done\" >/dev/null 2>&1 & echo $!"},
      tpuctl::util::ProcessOptions{});
  REQUIRE(start);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // The caller's own grace is 0.1 s: the processes' longer one wins.
  auto stop = tpuctl::util::run_process(
      {"/bin/sh", "-c", stop_tagged_processes_script("TPUCTL_TEST_GRACE", g, 100)},
      tpuctl::util::ProcessOptions{});
  REQUIRE(stop);
  CHECK(tpuctl::test::read_file(done) == "saved\n"); // the checkpoint was written in its grace
  // Two shells and the sleep each ran at that moment got TERM; only what ignored it got KILL.
  CHECK(stop->out.find("killed 0") == std::string::npos);
  // (a sleep of 0.05 s a KILLed shell left ends by itself)
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!tpuctl::util::processes_tagged("TPUCTL_TEST_GRACE=" + g).empty() &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(tpuctl::util::processes_tagged("TPUCTL_TEST_GRACE=" + g).empty());
}

TEST_CASE("provision::stop_tagged_processes_script kills exactly the tagged processes (real sh)") {
  // Two sleepers: one with the exact tag, one whose value only starts with it. The value is this
  // process's own (a second copy of the suite runs the same test at the same time).
  const std::string v = "t$(x)" + std::to_string(::getpid());
  auto start = tpuctl::util::run_process({"/bin/sh", "-c",
                                          "TPUCTL_TEST_TAG='" + v +
                                              "' setsid sleep 30 >/dev/null 2>&1 & echo $!; "
                                              "TPUCTL_TEST_TAG='" +
                                              v + "2' setsid sleep 30 >/dev/null 2>&1 & echo $!"},
                                         tpuctl::util::ProcessOptions{});
  REQUIRE(start);
  auto pids = tpuctl::util::split(std::string(tpuctl::util::trim(start->out)), '\n');
  REQUIRE(pids.size() == 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto stop = tpuctl::util::run_process(
      {"/bin/sh", "-c", stop_tagged_processes_script("TPUCTL_TEST_TAG", v, 500)},
      tpuctl::util::ProcessOptions{});
  REQUIRE(stop);
  CHECK(stop->out == "terminated 1 killed 0\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int exact = std::stoi(pids[0]);
  const int prefixed = std::stoi(pids[1]);
  std::ifstream gone("/proc/" + pids[0] + "/cmdline");
  std::string cmd;
  std::getline(gone, cmd);
  CHECK((cmd.empty() || ::kill(exact, 0) != 0)); // reaped or a zombie: no cmdline
  CHECK(::kill(prefixed, 0) == 0);               // the other value is left alone
  ::kill(prefixed, SIGKILL);
}

TEST_CASE("provision::to_json(ProvisionReport) carries the failure and the timings") {
  ProvisionReport r;
  r.agent_sha256 = "ab";
  r.timings.push_ms = 12;
  auto ok = to_json(r);
  CHECK(!ok.contains("failure"));
  CHECK(ok["timings"]["push_ms"] == 12);
  QrError e;
  e.code = k_preflight_failed;
  e.message = "worker n/1@h: preflight: x";
  e.worker = 1;
  e.node = "n";
  e.host = "h";
  r.failure = e;
  auto bad = to_json(r);
  CHECK(bad["failure"]["code"] == "PREFLIGHT_FAILED");
  CHECK(bad["failure"]["worker"] == 1);
  CHECK(bad["ok"] == false);
}

TEST_SUITE_END();
