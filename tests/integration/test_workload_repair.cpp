// Workloads that survive, through the real binary: a worker host that dies is drained and its
// slice placed again on free hosts, the workload running again on every worker with the next
// attempt; a requeue cluster preempted by a reserved request goes back to the queue and its
// workload resumes when the capacity returns; goodput accounts for both. Real sshd on the address
// block 127.0.201.x - 127.0.205.x (owned by this file), a real SQLite store, a scratch HOME.
#include <csignal>
#include <fstream>
#include <set>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "tests/support/workload_env.hpp"

using nlohmann::json;
using tpuctl::test::QrEnv;

TEST_SUITE_BEGIN("integration");

namespace {

using tpuctl::test::all_running_attempt;
using tpuctl::test::workload_processes;

struct RepairEnv : tpuctl::test::WorkloadEnv {
  RepairEnv(int hosts, const std::string& base, const std::string& shape = "")
      : WorkloadEnv(hosts, base, shape) {}
  // Polls `workload describe` (which also restarts a missing monitor) until `done` holds.
  json wait_for(const std::string& name, const std::function<bool(const json&)>& done,
                std::chrono::seconds timeout) {
    json last;
    tpuctl::test::wait_until(
        [&] {
          auto r = run({"workload", "describe", name, "--format", "json"});
          if (r.exit_code != 0) {
            return false;
          }
          last = json::parse(r.out);
          return done(last);
        },
        timeout);
    return last;
  }
  // A cluster "demo" of one v5litepod-16 running workload "long" on every worker's first
  // attempt (created with COMMAND and EXTRA, EXTRA_ENV added to the create's environment): its
  // uid, and `workload describe` then.
  std::pair<std::string, json>
  start_long(const std::string& command, std::vector<std::string> extra,
             const std::map<std::string, std::string>& extra_env = {}) {
    auto created = run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-16"});
    REQUIRE_MESSAGE(created.exit_code == 0, created.err);
    std::string uid = create_workload("demo", "long", command, std::move(extra), extra_env);
    json running = wait_for(
        "long", [](const json& w) { return all_running_attempt(w, 0); }, std::chrono::seconds(30));
    REQUIRE(all_running_attempt(running, 0));
    return {uid, running};
  }
  std::string monitor_log(const std::string& name) const {
    return tpuctl::test::read_file(dir.path() / "state" / "tpuctl" / "logs" /
                                   ("workload-" + name + ".log"));
  }
};

} // namespace

TEST_CASE("repair: a dead worker host is drained naming the workload, the slice is placed again "
          "on free hosts and every worker runs the next attempt") {
  RepairEnv env(8, "127.0.201.2"); // 8 hosts: the cluster's 4 and 4 spares
  const auto [uid, before] =
      env.start_long("echo attempt=$TPUCTL_WORKLOAD_ATTEMPT; sleep 300", {}); // no restarts asked
  const std::string dead = before["workers"][1]["host"];

  env.kill_worker_host(uid, dead, 1);
  json after = env.wait_for(
      "long", [](const json& w) { return all_running_attempt(w, 1); }, std::chrono::seconds(90));
  INFO(env.monitor_log("long"));
  REQUIRE(all_running_attempt(after, 1));
  CHECK(after["recoveries"] == 1);
  CHECK(after["repairs"] == 1);
  CHECK(after["restarts"] == 0); // a lost host is the infrastructure's failure: no restart used
  CHECK(after["repair"].is_null());
  // The slice is whole again, without the dead host, on hosts of the pool.
  const auto now_on = tpuctl::test::workload_hosts(after);
  CHECK(now_on.size() == 4);
  CHECK(now_on.count(dead) == 0);
  // The dead host is drained, the reason naming the workload.
  auto pool = env.run_json({"pool", "describe"});
  bool drained = false;
  for (const auto& h : pool["host_list"]) {
    if (h["name"] == dead) {
      drained = h["state"] == "drained";
      CHECK_MESSAGE(h["drain_reason"].get<std::string>().find("workload 'long'") !=
                        std::string::npos,
                    h["drain_reason"]);
    }
  }
  CHECK(drained);
  // Every worker's log shows the new attempt, with its number in the environment.
  auto logs = env.run({"workload", "logs", "long"});
  CHECK(logs.out.find("attempt=1") != std::string::npos);
  // The time is accounted: the first attempt's running time lost, the repair recovering.
  CHECK(after["goodput"]["lost_ms"].get<int64_t>() > 0);
  CHECK(after["goodput"]["recovering_ms"].get<int64_t>() > 0);
  CHECK(after["goodput"]["goodput"].get<double>() < 1.0);
  auto cluster = env.run_json({"cluster", "describe", "demo"});
  CHECK(cluster["goodput"]["lost_ms"] == after["goodput"]["lost_ms"]);

  REQUIRE(env.run({"cluster", "delete", "demo", "--force", "-q"}).exit_code == 0);
  CHECK(workload_processes(uid).empty());
}

TEST_CASE("repair: a host lost in one slice of two places that slice alone again; the other "
          "slice keeps its hosts, the cluster stays ACTIVE, and every worker runs the next "
          "attempt together") {
  RepairEnv env(12, "127.0.205.2", "4x12"); // 2x6 hosts: room for 3 slices of 2x2
  auto created = env.run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-16",
                          "--num-slices", "2"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  const json qr_before = env.describe("demo");
  const std::string uid = env.create_workload(
      "demo", "long", "echo attempt=$TPUCTL_WORKLOAD_ATTEMPT; sleep 300", {"--num-slices", "all"});
  json before = env.wait_for(
      "long", [](const json& w) { return all_running_attempt(w, 0); }, std::chrono::seconds(30));
  REQUIRE(all_running_attempt(before, 0));
  REQUIRE(before["workers"].size() == 8);
  std::set<std::string> slice0, slice1;
  for (const auto& w : before["workers"]) {
    (w["slice"] == 0 ? slice0 : slice1).insert(w["host"].get<std::string>());
  }
  const std::string dead = before["workers"][5]["host"]; // slice 1, worker 1
  REQUIRE(slice1.count(dead) == 1);
  REQUIRE(before["workers"][5]["worker"] == 1);

  // The monitor's streams are open (one supervise-watch per worker) before the kill.
  REQUIRE(tpuctl::test::wait_until(
      [&] { return env.pool_processes("supervise-watch").size() == 8; }, std::chrono::seconds(30)));
  env.kill_worker_host(uid, dead, 1, before["workers"][5]["node"]);
  json after = env.wait_for(
      "long", [](const json& w) { return all_running_attempt(w, 1); }, std::chrono::seconds(90));
  INFO(env.monitor_log("long"));
  REQUIRE(all_running_attempt(after, 1));
  CHECK(after["repairs"] == 1);
  CHECK(after["restarts"] == 0);
  // The healthy slice's workers were stopped and started again through the monitor's open
  // streams (no new SSH session), the moved slice's over new sessions.
  CHECK(env.monitor_log("long").find("attempt 1: 4 workers started through their streams, 4 "
                                     "over new sessions") != std::string::npos);
  std::set<std::string> now0, now1;
  for (const auto& w : after["workers"]) {
    (w["slice"] == 0 ? now0 : now1).insert(w["host"].get<std::string>());
  }
  CHECK(now0 == slice0); // the healthy slice: the same hosts
  CHECK(now1.count(dead) == 0);
  CHECK(now1.size() == 4);
  for (const auto& h : now1) {
    CHECK(now0.count(h) == 0);
  }
  // The request never left ACTIVE: no suspension, no requeue, the same ACTIVE since.
  const json qr_after = env.describe("demo");
  CHECK(qr_after["state"] == "ACTIVE");
  CHECK(qr_after["history"].size() == qr_before["history"].size());
  CHECK(env.monitor_log("long").find("placed again on") != std::string::npos);
  // The claims follow: the dead host is no longer the cluster's.
  auto claims = env.claims();
  CHECK(claims.size() == 8);
  CHECK(claims.count(dead) == 0);
  REQUIRE(env.run({"cluster", "delete", "demo", "--force", "-q"}).exit_code == 0);
  CHECK(workload_processes(uid).empty());
}

TEST_CASE("repair: a requeue cluster preempted by a reserved request resumes its workload when "
          "the reserved one is deleted; a plain spot request stays SUSPENDED") {
  RepairEnv env(4, "127.0.202.2"); // room for one v5litepod-16 only
  auto created =
      env.run({"cluster", "create", "--cluster", "cheap", "--tpu-type", "v5litepod-16", "--spot"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  CHECK(env.run_json({"cluster", "describe", "cheap"})["on_preemption"] == "requeue");
  const std::string uid = env.create_workload("cheap", "train", "sleep 300");
  REQUIRE(env.wait_for(
              "train", [](const json& w) { return all_running_attempt(w, 0); },
              std::chrono::seconds(30))["state"] == "RUNNING");

  auto urgent =
      env.run({"qr", "create", "urgent", "--accelerator-type", "v5litepod-16", "--reserved"});
  REQUIRE_MESSAGE(urgent.exit_code == 0, urgent.err);
  // Preempted, then back in the queue behind the reserved request; the workload waits.
  json waiting = env.wait_for(
      "train", [](const json& w) { return w["state"] == "RECOVERING"; }, std::chrono::seconds(30));
  CHECK(waiting["state"] == "RECOVERING");
  CHECK(tpuctl::test::wait_until(
      [&] {
        return env.run_json({"cluster", "describe", "cheap"})["state"] == "WAITING_FOR_RESOURCES";
      },
      std::chrono::seconds(20)));

  REQUIRE(env.run({"qr", "delete", "urgent", "--force", "-q"}).exit_code == 0);
  json resumed = env.wait_for(
      "train", [](const json& w) { return all_running_attempt(w, 1); }, std::chrono::seconds(60));
  INFO(env.monitor_log("train"));
  CHECK(all_running_attempt(resumed, 1));
  CHECK(resumed["recoveries"] == 1);
  CHECK(resumed["restarts"] == 0); // a preemption uses no restart
  CHECK(resumed["goodput"]["lost_ms"].get<int64_t>() > 0);
  REQUIRE(env.run({"cluster", "delete", "cheap", "--force", "-q"}).exit_code == 0);
  CHECK(workload_processes(uid).empty());

  // A plain spot request keeps gcloud's behaviour: SUSPENDED, and it stays so.
  REQUIRE(env.run({"qr", "create", "plain", "--accelerator-type", "v5litepod-16", "--spot"})
              .exit_code == 0);
  REQUIRE(env.run({"qr", "create", "urgent2", "--accelerator-type", "v5litepod-16", "--reserved"})
              .exit_code == 0);
  REQUIRE(env.run({"qr", "delete", "urgent2", "--force", "-q"}).exit_code == 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto plain = env.describe("plain");
  CHECK(plain["state"] == "SUSPENDED");
  CHECK(plain["on_preemption"] == "suspend");
  REQUIRE(env.run({"qr", "delete", "plain", "--force", "-q"}).exit_code == 0);
}

TEST_CASE("chaos: the monitor killed in the middle of a repair (hosts drained, the slice not yet "
          "requeued): the next command finishes the repair and nothing leaks") {
  RepairEnv env(8, "127.0.203.2");
  // Every command carries the failpoint, and so every monitor they start: whichever monitor
  // drains the lost host first dies (SIGKILL) right after, once (the marker file), and another
  // finishes the repair. (A monitor that a command starts to take over from a slow one must
  // carry it too, or on a loaded machine the repair may never meet it.)
  env.vars["TPUCTL_FAILPOINT"] =
      "workload.repair:kill@" + (env.dir.path() / "repair-failpoint-fired").string();
  const auto [uid, before] = env.start_long("sleep 300", {"--max-restarts", "1"});
  const std::string dead = before["workers"][2]["host"];
  env.kill_worker_host(uid, dead, 2);
  // The commands that follow (describe restarts a monitor that is gone) finish the repair.
  json after = env.wait_for(
      "long", [](const json& w) { return all_running_attempt(w, 1); }, std::chrono::seconds(90));
  const std::string log = env.monitor_log("long");
  INFO(log);
  REQUIRE(all_running_attempt(after, 1));
  CHECK(std::filesystem::exists(env.dir.path() / "repair-failpoint-fired"));
  // Two monitors said they were repairing: the one killed at the failpoint, and the next.
  std::set<std::string> repairers;
  for (size_t at = log.find("repairing: draining"); at != std::string::npos;
       at = log.find("repairing: draining", at + 1)) {
    const size_t open = log.rfind('[', at);
    repairers.insert(log.substr(open, log.find(']', open) - open));
  }
  CHECK(repairers.size() == 2);
  CHECK(after["recoveries"] == 1);
  CHECK(after["repairs"] == 1);
  CHECK(after["restarts"] == 0);
  CHECK(tpuctl::test::workload_hosts(after).count(dead) == 0);
  // Nothing leaked: the store is consistent, the claims are the slice's 4 hosts, and every
  // process of the workload is one of the 4 workers of attempt 1.
  auto check = env.run({"state", "check"});
  CHECK_MESSAGE(check.exit_code == 0, (check.out + check.err));
  auto claims = env.claims();
  CHECK(claims.size() == 4);
  CHECK(claims.count(dead) == 0);
  for (int pid : workload_processes(uid)) {
    const std::string vars = tpuctl::test::read_file("/proc/" + std::to_string(pid) + "/environ");
    CHECK_MESSAGE(vars.find(std::string("TPUCTL_WORKLOAD_ATTEMPT=1") + '\0') != std::string::npos,
                  pid);
  }
  REQUIRE(env.run({"cluster", "delete", "demo", "--force", "-q"}).exit_code == 0);
  CHECK(workload_processes(uid).empty());
}

TEST_CASE("repair: with no free hosts for the replacement the workload waits, RECOVERING with the "
          "reason shown, until its --timeout fails it") {
  RepairEnv env(4, "127.0.204.2"); // exactly one v5litepod-16: no spare
  const auto [uid, before] =
      env.start_long("sleep 300", {"--max-restarts", "2", "--timeout", "30s"});
  const std::string dead = before["workers"][3]["host"];
  env.kill_worker_host(uid, dead, 3);
  json waiting = env.wait_for(
      "long",
      [](const json& w) {
        return w["state"] == "RECOVERING" && w["message"].get<std::string>().find(
                                                 "waiting for cluster 'demo'") != std::string::npos;
      },
      std::chrono::seconds(30));
  INFO(env.monitor_log("long"));
  REQUIRE(waiting["state"] == "RECOVERING");
  // The request's own reason says what is missing.
  CHECK_MESSAGE(waiting["message"].get<std::string>().find("WAITING_FOR_RESOURCES") !=
                    std::string::npos,
                waiting["message"]);
  auto failed = env.run({"workload", "wait", "long", "--timeout", "40s"});
  CHECK(failed.exit_code == 1);
  CHECK_MESSAGE(failed.err.find("timed out while recovering") != std::string::npos, failed.err);
  auto ended = env.run_json({"workload", "describe", "long"});
  CHECK(ended["state"] == "FAILED");
  CHECK(ended["goodput"]["recovering_ms"].get<int64_t>() +
            ended["goodput"]["queued_ms"].get<int64_t>() >
        0);
  REQUIRE(env.run({"cluster", "delete", "demo", "--force", "-q"}).exit_code == 0);
  CHECK(workload_processes(uid).empty());
}

TEST_SUITE_END();
