// tpuctl agent preflight through the real binary: several workers on loopback addresses of this
// machine (block 127.0.71.x, owned by this file) run at once and must find each other.
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"

using nlohmann::json;
using tpuctl::test::run_tpuctl;

namespace {

// Runs `count` of the `hostnames` workers (0..count-1) at the same time.
std::vector<tpuctl::util::ProcessResult> run_workers(const std::string& hostnames, int count,
                                                     const std::string& timeout,
                                                     const std::string& port) {
  std::vector<tpuctl::util::ProcessResult> results(static_cast<size_t>(count));
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      results[static_cast<size_t>(i)] =
          run_tpuctl({"agent", "preflight", "--worker", std::to_string(i), "--hostnames", hostnames,
                      "--port", port, "--timeout", timeout, "--kernel-check", "--format", "json"});
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return results;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("agent preflight: every worker reaches every peer by its own address") {
  auto results = run_workers("127.0.71.2,127.0.71.3,127.0.71.4,127.0.71.5", 4, "10s", "8476");
  for (int i = 0; i < 4; ++i) {
    const auto& r = results[static_cast<size_t>(i)];
    INFO(r.out, r.err);
    CHECK(r.exit_code == 0);
    auto j = json::parse(r.out);
    CHECK(j["ok"] == true);
    CHECK(j["worker"] == i);
    CHECK(j["bind_address"] == "127.0.71." + std::to_string(i + 2) + ":8476");
    CHECK(j["reached"].size() == 3);
    CHECK(j["heard_from"].size() == 3);
    CHECK(j["unreachable"].empty());
    CHECK(j["kernel_check"]["ok"] == true);
    CHECK(j["kernel_check"]["mismatches"] == 0);
    CHECK(j["clock_ms"].get<int64_t>() > 1700000000000);
  }
}

TEST_CASE("agent preflight: a missing worker is unreachable, a corrupt kernel fails, exit 1") {
  // Worker 2 never starts: the others report it and still print their JSON.
  auto results = run_workers("127.0.71.10,127.0.71.11,127.0.71.12", 2, "1500ms", "8477");
  for (int i = 0; i < 2; ++i) {
    const auto& r = results[static_cast<size_t>(i)];
    CHECK(r.exit_code == 1);
    auto j = json::parse(r.out);
    CHECK(j["ok"] == false);
    REQUIRE(j["unreachable"].size() == 1);
    CHECK(j["unreachable"][0]["worker"] == 2);
    CHECK(j["unreachable"][0]["address"] == "127.0.71.12:8477");
    CHECK(j["unreachable"][0]["error"] == "connection refused");
    CHECK(j["reached"].size() == 1);
  }
  // An unresolvable name is reported as such.
  auto unresolved =
      run_tpuctl({"agent", "preflight", "--worker", "0", "--hostnames",
                  "127.0.71.20,no-such-host.invalid", "--timeout", "1s", "--format", "json"});
  CHECK(unresolved.exit_code == 1);
  auto u = json::parse(unresolved.out);
  CHECK(u["unreachable"][0]["error"].get<std::string>().find("name not resolved") == 0);

  auto corrupt = run_tpuctl({"agent", "preflight", "--worker", "0", "--hostnames", "127.0.71.21",
                             "--kernel-check", "--format", "json"},
                            {{"TPUCTL_DEBUG_CORRUPT_RESULT", "1"}});
  CHECK(corrupt.exit_code == 1);
  auto c = json::parse(corrupt.out);
  CHECK(c["kernel_check"]["ok"] == false);
  CHECK(c["kernel_check"]["mismatches"] == 1);
  CHECK(c["unreachable"].empty()); // a single worker has no peers
}

TEST_CASE("agent preflight: I=ADDR hostnames name only the peers a worker needs") {
  // Worker 1 of 4 calls worker 3 and expects worker 0's call; 0 calls 1; 3 expects 1. Each is
  // given only its own and its callees' addresses, as provisioning does.
  const std::vector<std::vector<std::string>> args{
      {"--worker", "0", "--hostnames", "0=127.0.71.30,1=127.0.71.31", "--calls", "1", "--expects",
       "none"},
      {"--worker", "1", "--hostnames", "1=127.0.71.31,3=127.0.71.33", "--calls", "3", "--expects",
       "0"},
      {"--worker", "3", "--hostnames", "3=127.0.71.33", "--calls", "none", "--expects", "1"}};
  std::vector<tpuctl::util::ProcessResult> results(args.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < args.size(); ++i) {
    threads.emplace_back([&, i] {
      std::vector<std::string> a{"agent", "preflight", "--num-workers", "4",        "--port",
                                 "8476",  "--timeout", "10s",           "--format", "json"};
      a.insert(a.end(), args[i].begin(), args[i].end());
      results[i] = run_tpuctl(a);
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (const auto& r : results) {
    INFO(r.out, r.err);
    CHECK(r.exit_code == 0);
  }
  CHECK(json::parse(results[1].out)["reached"] == json::array({3}));
  CHECK(json::parse(results[1].out)["heard_from"] == json::array({0}));
  // The count is required with this form, and an index must be one of its workers.
  auto no_count = run_tpuctl({"agent", "preflight", "--worker", "0", "--hostnames", "0=a"});
  CHECK(no_count.exit_code == 2);
  CHECK(no_count.err.find("--num-workers") != std::string::npos);
  auto out_of_range = run_tpuctl(
      {"agent", "preflight", "--worker", "0", "--num-workers", "2", "--hostnames", "0=a,2=b"});
  CHECK(out_of_range.exit_code == 2);
  CHECK(out_of_range.err.find("--hostnames: 2 is out of range") != std::string::npos);
}

TEST_CASE("agent preflight: bad options are usage errors") {
  auto r = run_tpuctl({"agent", "preflight", "--worker", "3", "--hostnames", "a,b", "--port", "0"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--worker: '3'") != std::string::npos);
  CHECK(r.err.find("--port: '0'") != std::string::npos);
  auto t =
      run_tpuctl({"agent", "preflight", "--worker", "0", "--hostnames", "a", "--timeout", "x"});
  CHECK(t.exit_code == 2);
}

TEST_SUITE_END();
