// Spares and hot swap, through the binary: a pool holds hosts back (`pool spares N`: shown in
// describe, never placed for ordinary requests), a lost host's slice is repaired on them at once,
// and `--on-straggler swap` moves a straggler's slice onto them. Real sshd on the address block
// 127.177.x (owned by this file), a scratch HOME and SQLite store.
#include <optional>
#include <set>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/jax_env.hpp"
#include "tests/support/machine.hpp"

using nlohmann::json;

TEST_SUITE_BEGIN("integration");

namespace {

std::set<std::string> spares_of(const json& pool) {
  std::set<std::string> out;
  for (const auto& h : pool["spares"]) {
    out.insert(h.get<std::string>());
  }
  return out;
}

} // namespace

TEST_CASE("spares: held back from ordinary requests and shown in describe; more than the pool "
          "can hold back is refused in one line, changing nothing") {
  tpuctl::test::JaxEnv env(8, tpuctl::test::free_address_base("127.177.", 0, 250, 8));
  auto set = env.run({"pool", "spares", "4", "--format", "json"});
  REQUIRE_MESSAGE(set.exit_code == 0, set.err);
  CHECK(json::parse(set.out).size() == 4);
  auto pool = env.run_json({"pool", "describe"});
  const auto spares = spares_of(pool);
  CHECK(spares.size() == 4);
  CHECK(pool["spare"] == 4);
  auto text = env.run({"pool", "describe"});
  CHECK(text.out.find("spares:    4 held back for repairs") != std::string::npos);
  CHECK(text.out.find(" S ") != std::string::npos);

  REQUIRE(env.run({"qr", "create", "a", "--accelerator-type", "v5litepod-16"}).exit_code == 0);
  for (const auto& h : tpuctl::test::worker_hosts(env.describe("a"))) {
    CHECK(spares.count(h) == 0); // never on a spare
  }
  auto b = env.run({"qr", "create", "b", "--accelerator-type", "v5litepod-16", "--timeout", "2s"});
  CHECK(b.exit_code == 3); // waits: the only free block is the spares
  CHECK(env.describe("b")["pending_reason"].get<std::string>().find(
            "4 hosts are spares held back for repairs (tpuctl pool spares)") != std::string::npos);

  auto many = env.run({"pool", "spares", "5"});
  CHECK(many.exit_code == 2);
  CHECK(many.err == "tpuctl: error: spares 5 is more than pool 'local' can hold back: it has 0 "
                    "free hosts and 4 spares (give 0 to 4, or free hosts first: delete "
                    "requests, undrain hosts)\n");
  CHECK(spares_of(env.run_json({"pool", "describe"})) == spares);

  REQUIRE(env.run({"qr", "delete", "b", "--force", "-q"}).exit_code == 0);
  REQUIRE(env.run({"pool", "spares", "0"}).exit_code == 0); // released: placeable again
  CHECK(spares_of(env.run_json({"pool", "describe"})).empty());
  auto c = env.run({"qr", "create", "c", "--accelerator-type", "v5litepod-16"});
  CHECK_MESSAGE(c.exit_code == 0, c.err);
  CHECK(env.describe("c")["state"] == "ACTIVE");
}

TEST_CASE("spares: a lost host's slice is repaired on the spares; --on-straggler swap moves a "
          "straggler's slice onto them") {
  tpuctl::test::JaxEnv env(8, tpuctl::test::free_address_base("127.177.", 0, 250, 8));
  REQUIRE(env.run({"pool", "spares", "4"}).exit_code == 0);
  const auto spares = spares_of(env.run_json({"pool", "describe"}));
  REQUIRE(env.run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-16"})
              .exit_code == 0);

  SUBCASE("a lost host") {
    const std::string uid = env.create_workload(
        "c", "loop", "i=0; while :; do echo \"completed step: $i\"; i=$((i+1)); sleep 0.2; done");
    auto before = env.wait_for(
        "loop", [](const json& w) { return tpuctl::test::all_running_attempt(w, 0); }, std::chrono::seconds(60));
    REQUIRE(tpuctl::test::all_running_attempt(before, 0));
    const std::string lost = before["workers"][1]["host"].get<std::string>();
    env.kill_worker_host(uid, lost, 1);
    auto after = env.wait_for(
        "loop", [](const json& w) { return tpuctl::test::all_running_attempt(w, 1); }, std::chrono::seconds(120));
    INFO(env.monitor_log("loop"));
    REQUIRE(tpuctl::test::all_running_attempt(after, 1));
    CHECK(after["repairs"] == 1);
    CHECK(after["restarts"] == 0);
    CHECK(tpuctl::test::workload_hosts(after) == spares); // the slice whole again at once, on the spares
    auto pool = env.run_json({"pool", "describe"});
    for (const auto& h : pool["host_list"]) {
      if (h["name"] == lost) {
        CHECK(h["state"] == "drained");
      }
    }
    // The spares stay spares: taken by the repair, shown so.
    CHECK(spares_of(pool) == spares);
  }

  SUBCASE("a straggler swapped out") {
    const std::string uid = env.create_workload(
        "c", "plain",
        "python3 " + tpuctl::test::jax_program("barrier_steps.py") + " --work-ms 30",
        {"--straggler-interval", "10s", "--on-straggler", "swap", "--step-pattern", ""});
    auto before = env.wait_for(
        "plain", [](const json& w) { return tpuctl::test::all_running_attempt(w, 0); }, std::chrono::seconds(60));
    REQUIRE(tpuctl::test::all_running_attempt(before, 0));
    const std::string slow = before["workers"][2]["host"].get<std::string>();
    auto python = tpuctl::test::python_processes(uid, 2);
    REQUIRE(python.size() == 1);
    std::optional<tpuctl::test::Throttle> throttle;
    throttle.emplace(python[0], std::chrono::milliseconds(200), std::chrono::milliseconds(100));
    auto after = env.wait_for(
        "plain", [](const json& w) { return tpuctl::test::all_running_attempt(w, 1); }, std::chrono::seconds(120));
    throttle.reset();
    INFO(env.monitor_log("plain"));
    REQUIRE(tpuctl::test::all_running_attempt(after, 1));
    CHECK(tpuctl::test::workload_hosts(after) == spares);
    CHECK(after["repairs"] == 1);
    auto pool = env.run_json({"pool", "describe"});
    for (const auto& h : pool["host_list"]) {
      if (h["name"] == slow) {
        CHECK(h["state"] == "drained");
        CHECK(h["drain_reason"].get<std::string>().find("is a straggler (busy ") !=
              std::string::npos);
      }
    }
  }

  auto bad = env.run({"workload", "create", "--cluster", "c", "--workload", "bad", "--command",
                      "true", "--on-straggler", "kill"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.rfind("tpuctl: error: --on-straggler 'kill' is not an action", 0) == 0);
  CHECK(env.run({"workload", "describe", "bad"}).exit_code == 4);
}

TEST_CASE("hot swap: with no spare and no free block, a lost host's workload takes a "
          "lower-priority workload's slice; that one waits for the broken slice's repair and "
          "runs again once hosts free up") {
  tpuctl::test::JaxEnv env(12, tpuctl::test::free_address_base("127.177.", 0, 250, 12));
  REQUIRE(env.run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-16",
                   "--num-slices", "2"})
              .exit_code == 0);
  // The pool (4x3 hosts) has one row left: taken host by host, no free block and no spare is
  // left for a repair.
  for (int i = 0; i < 4; ++i) {
    auto b = env.run({"qr", "create", "b" + std::to_string(i), "--accelerator-type", "v5litepod-4"});
    REQUIRE_MESSAGE(b.exit_code == 0, b.err);
  }
  const std::string steps =
      "i=0; while :; do echo \"completed step: $i\"; i=$((i+1)); sleep 0.2; done";
  const std::string uid =
      env.create_workload("c", "urgent", steps, {"--priority", "high", "--num-slices", "1"});
  env.create_workload("c", "batch", steps, {"--priority", "low", "--num-slices", "1"});
  auto running = [](int attempt) {
    return [attempt](const json& w) { return tpuctl::test::all_running_attempt(w, attempt); };
  };
  auto urgent = env.wait_for("urgent", running(0), std::chrono::seconds(60));
  auto batch = env.wait_for("batch", running(0), std::chrono::seconds(60));
  REQUIRE(tpuctl::test::all_running_attempt(urgent, 0));
  REQUIRE(tpuctl::test::all_running_attempt(batch, 0));
  const auto batch_hosts = tpuctl::test::workload_hosts(batch);
  const std::string lost = urgent["workers"][1]["host"].get<std::string>();

  env.kill_worker_host(uid, lost, 1);
  urgent = env.wait_for("urgent", running(1), std::chrono::seconds(120));
  INFO(env.monitor_log("urgent"));
  REQUIRE(tpuctl::test::all_running_attempt(urgent, 1));
  CHECK(tpuctl::test::workload_hosts(urgent) == batch_hosts); // batch's slice, whole
  CHECK(urgent["repairs"] == 1);
  CHECK(urgent["restarts"] == 0);
  batch = env.run_json({"workload", "describe", "batch"});
  CHECK(batch["state"] == "QUEUED");
  CHECK(batch["evictions"] == 1);
  CHECK(batch["restarts"] == 0);
  CHECK_MESSAGE(batch["message"].get<std::string>().find("waiting for a repair") !=
                    std::string::npos,
                batch["message"]);
  auto swapped = env.run_json({"events", "--type", "HOTSWAP"});
  REQUIRE(swapped.size() == 1);
  CHECK(swapped[0]["object"] == "workload/urgent");

  // Hosts free up: the waiting workload's monitor places the broken slice again, and it runs.
  for (int i = 0; i < 4; ++i) {
    REQUIRE(env.run({"qr", "delete", "b" + std::to_string(i), "--force", "-q"}).exit_code == 0);
  }
  batch = env.wait_for("batch", running(1), std::chrono::seconds(150));
  INFO(env.monitor_log("batch"));
  REQUIRE(tpuctl::test::all_running_attempt(batch, 1));
  CHECK(tpuctl::test::workload_hosts(batch).count(lost) == 0);
  urgent = env.run_json({"workload", "describe", "urgent"});
  CHECK(tpuctl::test::all_running_attempt(urgent, 1)); // untouched by the repair
}
