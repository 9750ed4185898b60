// Restart policies through the real binary on a local pool of real sshd (address block
// 127.0.243.x, owned by this file): with --restart-on-exit-codes, xpk's rule (42, 127-255 and
// the codes named restart, any other exit fails the workload at once, whatever --max-restarts
// is left); a finished workload's --ttl-seconds-after-finished; xpk's --timeout 0 that looks
// once; bad values are refused with one line and nothing is stored.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/workload_env.hpp"

using nlohmann::json;
using tpuctl::test::WorkloadEnv;

TEST_SUITE_BEGIN("integration");

TEST_CASE("workload --restart-on-exit-codes: a named code restarts, any other fails at once") {
  WorkloadEnv env(4, "127.0.243.2");
  auto made = env.run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-16"});
  REQUIRE_MESSAGE(made.exit_code == 0, made.err);
  const std::vector<std::string> policy{"--restart-on-exit-codes", "10-12", "--max-restarts", "2"};

  // Exit 11 on the first attempt (named: restarted), then 0.
  env.create_workload("demo", "flaky", "[ \"$TPUCTL_WORKLOAD_ATTEMPT\" = 0 ] && exit 11; exit 0",
                      policy);
  auto flaky = env.run({"workload", "wait", "flaky", "--timeout", "90s", "--format", "json"});
  REQUIRE_MESSAGE(flaky.exit_code == 0, flaky.err);
  auto ok = json::parse(flaky.out);
  CHECK(ok["state"] == "SUCCEEDED");
  CHECK(ok["restarts"] == 1);
  CHECK(ok["restart_on_exit_codes"] == "10-12");

  // Exit 3 is not named: FAILED on the first attempt, though two restarts were left.
  env.create_workload("demo", "buggy", "[ \"$TPU_WORKER_ID\" = 2 ] && exit 3; sleep 300", policy);
  auto buggy = env.run({"workload", "wait", "buggy", "--timeout", "90s"});
  CHECK(buggy.exit_code == 1);
  CHECK_MESSAGE(buggy.err.find("exited with 3 (exit 3 is not restarted: only 42, 127-255 and "
                               "--restart-on-exit-codes 10-12 are)") != std::string::npos,
                buggy.err);
  auto failed = env.run_json({"workload", "describe", "buggy"});
  CHECK(failed["state"] == "FAILED");
  CHECK(failed["restarts"] == 0);
}

TEST_CASE("workload create: a bad --restart-on-exit-codes or --max-repairs is refused with one "
          "line; nothing is stored") {
  WorkloadEnv env(4, "127.0.243.10");
  auto made = env.run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-16"});
  REQUIRE_MESSAGE(made.exit_code == 0, made.err);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--restart-on-exit-codes", "300"}, "--restart-on-exit-codes 300: '300' is not an exit"},
      {{"--restart-on-exit-codes", "12-10"}, "the range '12-10' runs backwards"},
      {{"--max-repairs", "-1"}, "--max-repairs"},
  };
  for (const auto& [flags, expected] : bad) {
    std::vector<std::string> args{"workload",   "create", "--cluster", "demo",
                                  "--workload", "bad",    "--command", "true"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto r = env.run(args);
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.find(expected) != std::string::npos, r.err);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  CHECK(env.run_json({"workload", "list"}).empty());
}

TEST_CASE("workload --ttl-seconds-after-finished: a finished workload is deleted once its TTL "
          "passes; list --wait-for-job-completion --timeout 0 looks once") {
  WorkloadEnv env(4, "127.0.243.20");
  // Two one-host slices: "long" holds one while the others take turns on the other.
  auto made = env.run(
      {"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-4", "--num-slices", "2"});
  REQUIRE_MESSAGE(made.exit_code == 0, made.err);
  env.create_workload("demo", "brief", "sleep 1", {"--ttl-seconds-after-finished", "3"});
  env.create_workload("demo", "long", "sleep 300");
  // xpk's --timeout 0 is one look: the running workload has not ended (124), at once.
  auto running = env.run({"workload", "list", "--cluster", "demo", "--wait-for-job-completion",
                          "long", "--timeout", "0"});
  CHECK(running.exit_code == 124);
  auto waited = env.run({"workload", "wait", "brief", "--timeout", "60s", "--format", "json"});
  REQUIRE_MESSAGE(waited.exit_code == 0, waited.err);
  CHECK(json::parse(waited.out)["ttl_seconds_after_finished"] == 3);
  env.create_workload("demo", "quick", "true");
  REQUIRE(env.run({"workload", "wait", "quick", "--timeout", "60s"}).exit_code == 0);
  auto once = env.run({"workload", "list", "--cluster", "demo", "--wait-for-job-completion",
                       "quick", "--timeout", "0"});
  CHECK_MESSAGE(once.exit_code == 0, once.err); // it ended, SUCCEEDED
  // Its monitor deletes it 3 s after it ended; the one without a TTL stays.
  CHECK(tpuctl::test::wait_until(
      [&] {
        return env.run({"workload", "describe", "brief"}).exit_code == 4;
      },
      std::chrono::seconds(60)));
  auto left = env.run_json({"workload", "list"});
  REQUIRE(left.size() == 2); // long and quick: no TTL, kept
  for (const auto& w : left) {
    CHECK(w["name"] != "brief");
    CHECK(w["ttl_seconds_after_finished"].is_null());
  }
  auto bad = env.run({"workload", "create", "--cluster", "demo", "--workload", "bad", "--command",
                      "true", "--ttl-seconds-after-finished", "-5"});
  CHECK(bad.exit_code == 2);
  CHECK_MESSAGE(bad.err.find("--ttl-seconds-after-finished -5 is out of range") !=
                    std::string::npos,
                bad.err);
  CHECK(env.run({"workload", "delete", "long"}).exit_code == 0);
}
