// The check-in with the coordinator, every process a thread of this test on its own loopback
// address (127.0.121.x: this file's block; the coordinator on 127.0.121.1, slice 1 on .11..).
#include <chrono>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "agent/rendezvous.hpp"

using namespace tpuctl::agent;
using namespace std::chrono_literals;

TEST_SUITE_BEGIN("agent");

namespace {

constexpr int k_port = 8476;

std::vector<std::string> slice_hosts(int slice, int workers) {
  std::vector<std::string> hosts;
  for (int w = 0; w < workers; ++w) {
    hosts.push_back("127.0.121." + std::to_string(slice * 10 + w + 1));
  }
  return hosts;
}

RendezvousOptions options_for(int process, int workers, int slices,
                              std::chrono::milliseconds timeout) {
  RendezvousOptions o;
  o.job = JobSpec{
      11, 128, 128, 64, tpuctl::kernels::GemmDtype::int8, workers * slices, 1, workers * slices};
  int slice = process / workers, worker = process % workers;
  o.slice_hostnames = slice_hosts(slice, workers);
  o.self = ProcessEntry{process, slice, worker, o.slice_hostnames[static_cast<size_t>(worker)],
                        20000 + process};
  o.coordinator = HostPort{"127.0.121.1", k_port};
  o.timeout = timeout;
  return o;
}

struct Outcome {
  bool ok = false;
  std::string error;
  std::vector<ProcessEntry> table;
  std::chrono::steady_clock::duration elapsed{};
  Rendezvous rendezvous;
};

// Runs the given processes' rendezvous at once, one thread each.
std::vector<Outcome> run_all(const std::vector<RendezvousOptions>& all) {
  std::vector<Outcome> out(all.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < all.size(); ++i) {
    threads.emplace_back([&, i] {
      auto t0 = SteadyClock::now();
      auto r = rendezvous(all[i]);
      out[i].elapsed = SteadyClock::now() - t0;
      out[i].ok = r.has_value();
      if (r) {
        out[i].table = r->table;
        out[i].rendezvous = std::move(*r);
      } else {
        out[i].error = r.error().message;
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return out;
}

} // namespace

TEST_CASE("agent::rendezvous: every process checks in and gets the same table; reports arrive") {
  std::vector<RendezvousOptions> all;
  for (int p = 3; p >= 0; --p) { // the coordinator last: workers retry until it listens
    all.push_back(options_for(p, 4, 1, 20s));
  }
  auto out = run_all(all);
  for (const auto& o : out) {
    CHECK_MESSAGE(o.ok, o.error);
  }
  REQUIRE(out[3].ok);
  const auto& table = out[3].table;
  REQUIRE(table.size() == 4);
  for (int p = 0; p < 4; ++p) {
    CHECK(table[static_cast<size_t>(p)].process == p);
    CHECK(table[static_cast<size_t>(p)].host == "127.0.121." + std::to_string(p + 1));
    CHECK(table[static_cast<size_t>(p)].ring_port == 20000 + p);
  }
  for (const auto& o : out) {
    REQUIRE(o.table.size() == 4);
    CHECK(o.table[2].host == table[2].host);
    CHECK(o.table[2].ring_port == table[2].ring_port);
  }
  // Reports travel back on the same connections.
  const JobSpec job = all[0].job;
  for (int i = 0; i < 3; ++i) {
    int process = 3 - i;
    WorkerReport r{process, 1.5 * process, 0.25, 10.0 + process, process != 2, "", 100.0 * i};
    REQUIRE(send_report(out[static_cast<size_t>(i)].rendezvous, job, r, 5s));
  }
  auto reports = collect_reports(out[3].rendezvous, job, WorkerReport{0, 1, 2, 3, true, ""}, 5s);
  REQUIRE_MESSAGE(reports, reports.error().message);
  REQUIRE(reports->size() == 4);
  CHECK((*reports)[3].compute_ms == 4.5);
  CHECK((*reports)[1].gops == 11.0);
  CHECK((*reports)[1].peak_gops == 200.0); // the unit's peak the MFU divides by travels too
  CHECK((*reports)[2].checksum_ok == false);
  CHECK((*reports)[0].checksum_ok == true);
}

TEST_CASE("agent::rendezvous: a missing peer fails every process in bounded time, named") {
  SUBCASE("one slice, worker 3 never starts") {
    auto out = run_all(
        {options_for(0, 4, 1, 500ms), options_for(1, 4, 1, 500ms), options_for(2, 4, 1, 500ms)});
    const std::string expected = "rendezvous at 127.0.121.1:8476 failed: 1 of 4 processes did not "
                                 "check in within 500ms: process 3 (slice 0, worker 3, "
                                 "127.0.121.4)";
    for (const auto& o : out) {
      REQUIRE(!o.ok);
      CHECK(o.error.rfind(expected, 0) == 0); // the workers hear the coordinator's verdict
      CHECK(o.elapsed < 4s);
    }
  }
  SUBCASE("two slices: a missing worker of a slice that checked in is named with its address; "
          "a whole missing slice by its ids") {
    auto out = run_all(
        {options_for(0, 2, 3, 500ms), options_for(1, 2, 3, 500ms), options_for(2, 2, 3, 500ms)});
    REQUIRE(!out[0].ok);
    CHECK(out[0].error.find("3 of 6 processes did not check in within 500ms: process 3 (slice 1, "
                            "worker 1, 127.0.121.12), process 4 (slice 2, worker 0, address "
                            "unknown: no process of slice 2 checked in), process 5 (slice 2, "
                            "worker 1, address unknown") != std::string::npos);
    CHECK(out[2].error == out[0].error);
  }
  SUBCASE("the coordinator never starts") {
    auto out = run_all({options_for(2, 4, 1, 400ms)});
    REQUIRE(!out[0].ok);
    CHECK(out[0].error.rfind("cannot reach the coordinator, process 0 (slice 0, worker 0) at "
                             "127.0.121.1:8476 within 400ms: connection refused",
                             0) == 0);
    CHECK(out[0].elapsed < 3s);
  }
}

TEST_CASE("agent::rendezvous: another job or a taken process id is refused, with the reason") {
  SUBCASE("another job") {
    auto worker = options_for(1, 2, 1, 500ms);
    worker.job.k = 512;
    worker.job.seed = 12;
    auto out = run_all({options_for(0, 2, 1, 500ms), worker});
    REQUIRE(!out[1].ok);
    CHECK(out[1].error ==
          "the coordinator, process 0 (slice 0, worker 0) at 127.0.121.1:8476 refused process 1 "
          "(slice 0, worker 1, 127.0.121.2): process 1 runs a different job than the coordinator "
          "(seed 11 on process 0, 12 on process 1; k 64 on process 0, 512 on process 1): start "
          "every worker with the same --m/--n/--k/--dtype/--mesh/--seed");
    CHECK(out[1].elapsed < 1500ms); // refused at once, not at the deadline
    REQUIRE(!out[0].ok);
    CHECK(out[0].error.find("process 1 (slice 0, worker 1, 127.0.121.2); refused 1 "
                            "connection(s): from 127.0.121.2:") != std::string::npos);
  }
  SUBCASE("two processes claim the same id") {
    auto twin = options_for(1, 3, 1, 800ms);
    twin.self.host = "127.0.121.9";
    auto first = run_all({options_for(0, 3, 1, 800ms), options_for(1, 3, 1, 800ms), twin});
    int refused = 0;
    for (size_t i = 1; i < 3; ++i) {
      const auto& e = first[i].error;
      if (e.rfind("the coordinator", 0) == 0 &&
          e.find("process 1 already checked in (from 127.0.121.") != std::string::npos) {
        ++refused;
      }
    }
    CHECK(refused == 1);
  }
}

TEST_CASE("agent::collect_reports names a process whose report never comes") {
  auto out =
      run_all({options_for(1, 3, 1, 20s), options_for(2, 3, 1, 20s), options_for(0, 3, 1, 20s)});
  for (const auto& o : out) {
    REQUIRE_MESSAGE(o.ok, o.error);
  }
  const JobSpec job = options_for(0, 3, 1, 20s).job;
  WorkerReport failed{1, 0, 0, 0, false, "ring: something broke"};
  REQUIRE(send_report(out[0].rendezvous, job, failed, 5s));
  // Process 2 stays silent.
  auto t0 = SteadyClock::now();
  auto reports = collect_reports(out[2].rendezvous, job, WorkerReport{}, 300ms);
  REQUIRE(!reports);
  CHECK(reports.error().message ==
        "no report from process 2 (slice 0, worker 2, 127.0.121.3): nothing received before the "
        "deadline (0 of 64 bytes)");
  CHECK(SteadyClock::now() - t0 < 3s);
}
