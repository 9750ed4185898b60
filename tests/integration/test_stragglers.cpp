// Stragglers, through the binary: the worker a synchronous job waits for is named within one
// interval (describe's mark and evidence, list's count, an event), in a real JAX job (one worker
// computing longer before each collective) and in a plain multi-process program (one worker's
// process throttled with SIGSTOP and SIGCONT); a healthy job on a loaded machine is flagged
// nothing. Real sshd on the address block 127.176.x (owned by this file).
#include <optional>
#include <csignal>
#include <memory>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/background.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/jax_env.hpp"
#include "tests/support/machine.hpp"
#include "util/process.hpp"

using nlohmann::json;
using tpuctl::test::JaxEnv;
using tpuctl::test::jax_program;

TEST_SUITE_BEGIN("integration");

namespace {

struct StragglerEnv : JaxEnv {
  StragglerEnv() : JaxEnv(4, tpuctl::test::free_address_base("127.176.", 0, 250, 4)) {
    REQUIRE(run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-16"})
                .exit_code == 0);
  }
  // Waits until the workload has had `intervals` straggler intervals decided; returns describe.
  json decided(const std::string& name, int64_t after_ms, std::chrono::seconds timeout) const {
    return wait_for(
        name,
        [&](const json& w) {
          return w.contains("stragglers") && w["stragglers"].is_object() &&
                 w["stragglers"]["at_ms"].get<int64_t>() > after_ms;
        },
        timeout);
  }
};

} // namespace

TEST_CASE("stragglers: the JAX worker that computes longer before each collective is named "
          "within one interval, with its evidence, in describe, list and the event log") {
  StragglerEnv env;
  env.create_workload("c", "slow",
                      "python3 " + jax_program("collective_steps.py") +
                          " --step-seconds 0.1 --slow-worker 2 --slow-ms 300",
                      {"--straggler-interval", "15s"});
  // The first decided interval after every worker runs names worker 2, and only it.
  auto w = env.wait_for(
      "slow", [](const json& d) { return d["straggler_count"].get<int>() > 0; },
      std::chrono::seconds(120));
  INFO(env.monitor_log("slow"));
  INFO(w.dump());
  REQUIRE(w["straggler_count"] == 1);
  const std::string node = w["workers"][2]["node"].get<std::string>();
  const std::string who = "worker " + node + "/2@" + w["workers"][2]["host"].get<std::string>();
  CHECK(w["straggler_workers"] == json::array({who}));
  const std::string evidence = w["workers"][2]["straggler"].get<std::string>();
  CHECK(evidence.rfind("busy ", 0) == 0);
  CHECK(evidence.find("of the last ") != std::string::npos);
  CHECK(evidence.find("< 0.70") != std::string::npos);
  CHECK(w["stragglers"]["found"].size() == 1);
  CHECK(w["stragglers"]["found"][0]["index"] == 2);
  auto text = env.run({"workload", "describe", "slow"});
  CHECK(text.out.find("straggler: " + who + ": busy ") != std::string::npos);
  auto list = env.run_json({"workload", "list"});
  REQUIRE(list.size() == 1);
  CHECK(list[0]["straggler_count"] == 1);
  auto events = env.run({"events", "--format", "json"});
  CHECK(events.out.find(who + " is a straggler: busy ") != std::string::npos);
  REQUIRE(env.run({"workload", "delete", "slow"}).exit_code == 0);
}

TEST_CASE("stragglers: a plain multi-process program whose worker 1 is throttled (SIGSTOP and "
          "SIGCONT) is named; a healthy one on a loaded machine is flagged nothing") {
  StragglerEnv env;
  const std::string uid = env.create_workload(
      "c", "plain", "python3 " + jax_program("barrier_steps.py") + " --work-ms 30",
      {"--straggler-interval", "15s", "--step-pattern", ""});
  auto running = env.wait_for(
      "plain", [](const json& d) { return d["running"] == 4; }, std::chrono::seconds(60));
  REQUIRE(running["running"] == 4);
  // Worker 1's program, stopped 200 ms of every 300: the others wait for it at each barrier.
  std::vector<int> python = tpuctl::test::python_processes(uid, 1);
  REQUIRE(python.size() == 1);
  std::optional<tpuctl::test::Throttle> throttle;
  throttle.emplace(python[0], std::chrono::milliseconds(200), std::chrono::milliseconds(100));
  auto w = env.wait_for(
      "plain", [](const json& d) { return d["straggler_count"].get<int>() > 0; },
      std::chrono::seconds(90));
  throttle.reset();
  INFO(env.monitor_log("plain"));
  INFO(w.dump());
  REQUIRE(w["straggler_count"] == 1);
  CHECK(w["workers"][1]["straggler"].get<std::string>().rfind("busy ", 0) == 0);
  REQUIRE(env.run({"workload", "delete", "plain"}).exit_code == 0);

  // Healthy, while two busy loops load both cores of the machine: two intervals, no straggler.
  std::vector<std::unique_ptr<tpuctl::test::Background>> hogs;
  for (int i = 0; i < 2; ++i) {
    hogs.push_back(std::make_unique<tpuctl::test::Background>(
        std::vector<std::string>{"/bin/sh", "-c", "while :; do :; done"},
        std::map<std::string, std::string>{}, std::vector<std::string>{}, env.dir.path(),
        "hog" + std::to_string(i)));
  }
  const std::string healthy_uid = env.create_workload(
      "c", "healthy", "python3 " + jax_program("barrier_steps.py") + " --work-ms 30",
      {"--straggler-interval", "15s", "--step-pattern", ""});
  (void)healthy_uid;
  auto first = env.decided("healthy", 0, std::chrono::seconds(90));
  REQUIRE(first["stragglers"].is_object());
  auto second =
      env.decided("healthy", first["stragglers"]["at_ms"].get<int64_t>(), std::chrono::seconds(60));
  INFO(env.monitor_log("healthy"));
  INFO(second.dump());
  REQUIRE(second["stragglers"]["at_ms"].get<int64_t>() >
          first["stragglers"]["at_ms"].get<int64_t>());
  CHECK(first["stragglers"]["found"].empty());
  CHECK(second["stragglers"]["found"].empty());
  CHECK(second["straggler_count"] == 0);
  hogs.clear();
}
