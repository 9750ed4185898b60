// A workload's termination grace (xpk's -tgps) through the real binary on a local pool of real
// sshd (address block 127.0.242.x, owned by this file): every stop sends TERM to the job, waits
// up to the grace for it to checkpoint and exit, then KILLs what is left; the job reads its grace
// from TPUCTL_TERMINATION_GRACE_SECONDS. A delete returns once the processes are gone, or at
// once with --async; a grace out of range is refused and nothing is stored.
#include <chrono>
#include <filesystem>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/workload_env.hpp"

using nlohmann::json;
using tpuctl::test::workload_processes;
using tpuctl::test::WorkloadEnv;

TEST_SUITE_BEGIN("integration");

namespace {

// A pool of 4 hosts with the ACTIVE one-slice cluster "demo".
struct GraceEnv : WorkloadEnv {
  explicit GraceEnv(const std::string& address_base) : WorkloadEnv(4, address_base) {
    auto r = run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-16"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  }
};

} // namespace

TEST_CASE("workload delete: every worker's job gets TERM and its grace to checkpoint, and the "
          "delete returns once they are gone") {
  GraceEnv env("127.0.242.2");
  const auto ckpt = env.dir.path() / "ckpt";
  std::filesystem::create_directories(ckpt);
  // The job checkpoints for 2 s when told to stop, writing the grace it was given.
  const std::string uid = env.create_workload(
      "demo", "train",
      "trap 'sleep 2; echo \"$TPUCTL_TERMINATION_GRACE_SECONDS\" > \"$CKPT/$TPU_WORKER_ID\"; "
      "exit 0' TERM; while :; do sleep 0.2; done",
      {"-tgps", "20", "--env", "CKPT=" + ckpt.string()});
  auto wl = env.run_json({"workload", "describe", "train"});
  CHECK(wl["termination_grace_seconds"] == 20);
  REQUIRE(tpuctl::test::wait_until([&] { return workload_processes(uid).size() >= 4 * 2; },
                                   std::chrono::seconds(30)));

  auto del = env.run_json({"workload", "delete", "train"});
  CHECK(del["unreachable"].empty());
  for (int worker = 0; worker < 4; ++worker) {
    CHECK(tpuctl::test::read_file(ckpt / std::to_string(worker)) == "20\n");
  }
  CHECK(workload_processes(uid).empty()); // gone before the delete returned
}

TEST_CASE("workload: a job that ignores TERM is KILLed after its grace; delete --async returns "
          "at once; a grace out of range is refused and nothing is stored") {
  GraceEnv env("127.0.242.10");
  for (const std::string flag : {"-tgps", "--failure-grace-period-seconds"}) {
    for (const std::string bad : {"-1", "3601", "soon"}) {
      auto refused = env.run({"workload", "create", "--cluster", "demo", "--workload", "bad",
                              "--command", "true", flag, bad});
      CHECK(refused.exit_code == 2);
      CHECK_MESSAGE(refused.err.find(flag == "-tgps" ? "--termination-grace-period-seconds"
                                                     : flag) != std::string::npos,
                    refused.err);
      CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
    }
  }
  CHECK(env.run_json({"workload", "list"}).empty());

  const std::string uid = env.create_workload(
      "demo", "stubborn", "trap '' TERM; while :; do sleep 0.2; done", {"-tgps", "1"});
  REQUIRE(tpuctl::test::wait_until([&] { return workload_processes(uid).size() >= 4 * 2; },
                                   std::chrono::seconds(30)));
  auto del = env.run_json({"workload", "delete", "stubborn", "--async"});
  REQUIRE(del.size() == 1);
  CHECK(del[0]["deleted"] == false);
  // The detached delete TERMs, waits its 1 s, KILLs, and forgets the workload.
  CHECK(tpuctl::test::wait_until(
      [&] {
        return env.run({"workload", "describe", "stubborn"}).exit_code == 4;
      },
      std::chrono::seconds(60)));
  CHECK(workload_processes(uid).empty());
}

TEST_CASE("workload: when a worker fails, the others get the failure grace, not -tgps: a job "
          "missing a peer can neither step nor checkpoint") {
  GraceEnv env("127.0.242.20");
  // Worker 1 fails; the others hold TERM as JAX does while a collective waits for the dead
  // peer. With an hour of -tgps they would hold the workload for an hour.
  const std::string uid = env.create_workload(
      "demo", "peerless",
      "if [ \"$TPU_WORKER_ID\" = 1 ]; then sleep 1; exit 3; fi; "
      "trap '' TERM; while :; do sleep 0.2; done",
      {"-tgps", "3600", "--failure-grace-period-seconds", "1", "--max-restarts", "0"});
  auto wl = env.run_json({"workload", "describe", "peerless"});
  CHECK(wl["termination_grace_seconds"] == 3600);
  CHECK(wl["failure_grace_seconds"] == 1);
  REQUIRE(tpuctl::test::wait_until(
      [&] { return env.run_json({"workload", "describe", "peerless"})["state"] == "FAILED"; },
      std::chrono::seconds(120)));
  wl = env.run_json({"workload", "describe", "peerless"});
  CHECK_MESSAGE(wl["message"].get<std::string>().find("/1@") != std::string::npos,
                wl["message"]);
  CHECK(workload_processes(uid).empty());
}
