// Failures and checkpoints of a real JAX job, through the binary: a small model trained with
// optax, its sharded state checkpointed by a real Orbax CheckpointManager
// (tests/jax/train_orbax.py) on local pools of real sshd. A killed process is reported as the
// first failure, not the cascade; an eviction, a delete and a cluster delete give every worker
// SIGTERM and Orbax's preemption sync saves one step on all of them; a lost host is repaired and
// the job resumes from its latest checkpoint; a half-written checkpoint is never resumed from; a
// checkpoint directory the workers do not share is refused before anything starts; a restart
// finds its programs in the cluster's compilation cache. Address blocks 127.172.x (owned by this
// file); a scratch HOME and SQLite store.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/jax_env.hpp"
#include "tests/support/machine.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::JaxEnv;
using tpuctl::test::jax_program;
using tpuctl::test::numbers_after;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

namespace {

constexpr int k_save_every = 10;

std::string base(int hosts) {
  return tpuctl::test::free_address_base("127.172.", 0, 250, hosts);
}

// The training job: `steps` steps of about 50 ms, a checkpoint every `save_every`.
std::string train(int steps, int save_every = k_save_every) {
  return "python3 " + jax_program("train_orbax.py") + " --steps " + std::to_string(steps) +
         " --save-every " + std::to_string(save_every) + " --step-seconds 0.05";
}

bool ended(const json& w) {
  return w["state"] == "SUCCEEDED" || w["state"] == "FAILED";
}

// The complete checkpoints in `dir`: the step directories Orbax finished (tmp ones left out).
std::set<int> saved_steps(const fs::path& dir) {
  std::set<int> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) {
      out.insert(std::stoi(name));
    }
  }
  return out;
}

// One attempt's part of a worker's log: the lines after "--- tpuctl: attempt N" (attempt 0: the
// lines before attempt 1's marker).
std::string attempt_part(const std::string& log, int attempt) {
  const std::string marker = "--- tpuctl: attempt ";
  size_t from = 0;
  if (attempt > 0) {
    from = log.find(marker + std::to_string(attempt) + " ---");
    if (from == std::string::npos) {
      return "";
    }
    from = log.find('\n', from) + 1;
  }
  const size_t to = log.find(marker + std::to_string(attempt + 1) + " ---", from);
  return log.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

struct TrainEnv : JaxEnv {
  fs::path ckpt;
  TrainEnv(int hosts, const std::string& shape = "") : JaxEnv(hosts, base(hosts), shape) {
    ckpt = dir.path() / "ckpt";
    auto r = run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-16"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  }
  std::string node() const {
    return run_json({"cluster", "describe", "c"})["slices"][0]["name"].get<std::string>();
  }
  // Waits until worker 0 of the workload has printed "step N" for some N >= `step`; returns the
  // last step it printed.
  int wait_for_step(const std::string& name, int step, int attempt = 0) const {
    int last = -1;
    tpuctl::test::wait_until(
        [&] {
          auto steps = numbers_after(attempt_part(log_of(name, node(), 0), attempt), "step ");
          last = steps.empty() ? -1 : steps.back();
          return last >= step;
        },
        std::chrono::seconds(240));
    INFO(monitor_log(name));
    REQUIRE(last >= step);
    return last;
  }
};

} // namespace

TEST_CASE("jax failures: a killed worker's JAX process (worker 2, then worker 0) stops the "
          "others, and `workload describe` names that worker and its exit code, not the "
          "cascade") {
  TrainEnv env(4);
  for (int victim : {2, 0}) {
    CAPTURE(victim);
    const std::string name = "kill" + std::to_string(victim);
    const std::string uid = env.create_workload(
        "c", name, train(100000),
        {"--checkpoint-dir", (env.ckpt / name).string(), "--termination-grace-period-seconds",
         "5"});
    env.wait_for_step(name, 3);
    auto python = tpuctl::test::python_processes(uid, victim);
    REQUIRE(!python.empty());
    for (int pid : python) {
      REQUIRE(::kill(pid, SIGKILL) == 0);
    }
    auto failed = env.wait_for(name, ended, std::chrono::seconds(120));
    INFO(env.monitor_log(name));
    REQUIRE(failed["state"] == "FAILED");
    const std::string message = failed["message"].get<std::string>();
    const std::string host = failed["workers"][victim]["host"].get<std::string>();
    CHECK(message.rfind("worker " + env.node() + "/" + std::to_string(victim) + "@" + host +
                            " exited with 137",
                        0) == 0);
    for (int other = 0; other < 4; ++other) {
      if (other != victim) { // never blamed: the message names only the first failure
        CHECK(message.find("/" + std::to_string(other) + "@") == std::string::npos);
      }
    }
    CHECK(failed["workers"][victim]["state"] == "FAILED");
    CHECK(failed["workers"][victim]["exit_code"] == 137);
    auto described = env.run({"workload", "describe", name});
    CHECK(described.out.find("error: worker " + env.node() + "/" + std::to_string(victim) + "@") !=
          std::string::npos);
    CHECK(tpuctl::test::wait_until([&] { return tpuctl::test::workload_processes(uid).empty(); },
                                   std::chrono::seconds(60)));
  }
}

TEST_CASE("jax checkpoints: an eviction by a higher priority gives every worker SIGTERM, Orbax "
          "saves one step on all of them within the grace, and the workload resumes at exactly "
          "that step, found in the compilation cache, without using a restart") {
  TrainEnv env(4);
  const std::string uid = env.create_workload(
      "c", "train", train(260),
      {"--checkpoint-dir", env.ckpt.string(), "--priority", "low", "--max-restarts", "0"});
  env.wait_for_step("train", 20);
  auto urgent = env.run({"workload", "create", "--cluster", "c", "--workload", "urgent",
                         "--priority", "very-high", "--command", "sleep 1"});
  REQUIRE_MESSAGE(urgent.exit_code == 0, urgent.err);
  auto done = env.wait_for("train", ended, std::chrono::seconds(400));
  INFO(env.monitor_log("train"));
  INFO(done.dump());
  REQUIRE(done["state"] == "SUCCEEDED");
  CHECK(done["evictions"] == 1);
  CHECK(done["restarts"] == 0); // an eviction is not the job's failure
  CHECK(done["attempt"] == 1);

  std::set<int> preempted_at;
  for (int worker = 0; worker < 4; ++worker) {
    CAPTURE(worker);
    const std::string log = env.log_of("train", env.node(), worker);
    const std::string first = attempt_part(log, 0);
    const std::string second = attempt_part(log, 1);
    auto saved = numbers_after(first, "preempted: saved step ");
    REQUIRE(saved.size() == 1); // it saved before the grace ran out (else KILL: no line)
    preempted_at.insert(saved[0]);
    auto steps_before = numbers_after(first, "step ");
    REQUIRE(!steps_before.empty());
    CHECK(steps_before.back() == saved[0]); // the last step it ran is the one saved
    CHECK(numbers_after(second, "resumed from step ") == std::vector<int>{saved[0]});
    auto steps_after = numbers_after(second, "step ");
    REQUIRE(!steps_after.empty());
    CHECK(steps_after.front() == saved[0] + 1); // not one step lost, none done twice
    CHECK(steps_after.back() == 259);
    CHECK(second.find("done: 260 steps") != std::string::npos);
  }
  CHECK(preempted_at.size() == 1); // the same step on every worker: Orbax's sync point
  // The second attempt compiled nothing new: the cluster's compilation cache had it all.
  CHECK(done["jax"]["compilation_cache"]["used"] == true);
  CHECK(done["jax"]["compilation_cache"]["hits"].get<int>() > 0);
  CHECK(done["jax"]["compilation_cache"]["misses"] == 0);
  CHECK(env.run({"workload", "describe", "train"}).out.find("compilation cache used") !=
        std::string::npos);
  // Goodput by the job's steps: one disruption, nothing done twice (it resumed right after the
  // step it saved), the eviction's time in infrastructure recovery, its saves and its restore
  // as checkpoint badput; every step productive to the last.
  const json steps = done["goodput"]["steps"];
  CHECK(done["goodput"]["kind"] == "steps");
  CHECK(steps["disruptions"] == 1);
  CHECK(steps["badput"]["wasted_progress_from_disruption_ms"] == 0);
  CHECK(steps["badput"]["infrastructure_recovery_from_disruption_ms"].get<int64_t>() > 0);
  CHECK(steps["badput"]["unproductive_checkpoint_save_ms"].get<int64_t>() > 0);
  CHECK(steps["badput"]["unproductive_checkpoint_restore_ms"].get<int64_t>() > 0);
  CHECK(steps["last_productive_step"] == 259);
  CHECK(done["workers"][0]["progress"]["source"] == "protocol");
  CHECK(tpuctl::test::workload_processes(uid).empty());
}

TEST_CASE("jax checkpoints: `workload delete` and `cluster delete` let every worker save the "
          "step it reached; the next run resumes there") {
  TrainEnv env(4);
  // Regular saves only at step 0 (every 1000 steps): any later step in the directory is the one
  // the SIGTERM of the stop made Orbax save.
  env.create_workload("c", "first", train(100000, 1000), {"--checkpoint-dir", env.ckpt.string()});
  const int seen = env.wait_for_step("first", 12);
  auto deleted = env.run({"workload", "delete", "first"});
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.err);
  auto steps = saved_steps(env.ckpt);
  REQUIRE(!steps.empty());
  const int at_delete = *steps.rbegin();
  CHECK(at_delete >= seen); // nothing it did was lost

  // cluster delete: the same, then a new cluster's workload resumes from that step.
  env.create_workload("c", "second", train(100000, 1000),
                      {"--checkpoint-dir", env.ckpt.string()});
  const int seen2 = env.wait_for_step("second", at_delete + 5);
  CHECK(numbers_after(env.log_of("second", env.node(), 0), "resumed from step ") ==
        std::vector<int>{at_delete});
  auto gone = env.run({"cluster", "delete", "c", "--force"});
  REQUIRE_MESSAGE(gone.exit_code == 0, gone.err);
  const int at_cluster_delete = *saved_steps(env.ckpt).rbegin();
  CHECK(at_cluster_delete >= seen2);

  REQUIRE(env.run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-16"})
              .exit_code == 0);
  env.create_workload("c", "third", train(at_cluster_delete + 3),
                      {"--checkpoint-dir", env.ckpt.string()});
  auto done = env.wait_for("third", ended, std::chrono::seconds(240));
  INFO(env.monitor_log("third"));
  REQUIRE(done["state"] == "SUCCEEDED");
  const std::string log = env.log_of("third", env.node(), 0);
  CHECK(numbers_after(log, "resumed from step ") == std::vector<int>{at_cluster_delete});
  CHECK(numbers_after(log, "step ").front() == at_cluster_delete + 1);
}

TEST_CASE("jax checkpoints: a lost host is repaired and the job resumes from its latest complete "
          "checkpoint; a half-written checkpoint is never resumed from") {
  TrainEnv env(8); // the cluster's 4 hosts and 4 to repair with
  const std::string uid = env.create_workload("c", "train", train(100000),
                                              {"--checkpoint-dir", env.ckpt.string()});
  env.wait_for_step("train", 25);
  auto running = env.run_json({"workload", "describe", "train"});
  const std::string node = env.node();
  const std::string lost = running["workers"][1]["host"].get<std::string>();
  env.kill_worker_host(uid, lost, 1);
  // The last step the job reached: worker 0 cannot pass the next collective without worker 1,
  // and its log is still where it ran (the repair comes seconds later, when worker 1 is LOST).
  const auto before = numbers_after(env.log_of("train", node, 0), "step ");
  REQUIRE(!before.empty());
  auto back = env.wait_for(
      "train", [](const json& w) { return w["attempt"] == 1 && w["state"] == "RUNNING"; },
      std::chrono::seconds(180));
  INFO(env.monitor_log("train"));
  REQUIRE(back["attempt"] == 1);
  CHECK(back["repairs"] == 1);
  CHECK(back["restarts"] == 0);
  env.wait_for_step("train", 1, 1);
  const auto resumed = numbers_after(env.log_of("train", node, 0), "resumed from step ");
  REQUIRE(resumed.size() == 1);
  CHECK(resumed[0] <= before.back());
  // At most S-1 steps to do again, or 2S-1 when the loss cut the next save short: worker 0
  // prints step kS before its save of kS, which needs worker 1 too (seen under load).
  CHECK(before.back() - resumed[0] <= 2 * k_save_every - 1);
  CHECK(resumed[0] % k_save_every == 0);                 // a regular save: no SIGTERM came
  // Goodput by steps saw it: one disruption, and wasted progress when steps were done again
  // (the first step of attempt 1 is the one after the checkpoint).
  auto now = env.wait_for(
      "train", [](const json& w) { return w["goodput"]["steps"]["disruptions"] == 1; },
      std::chrono::seconds(60));
  CHECK(now["goodput"]["steps"]["disruptions"] == 1);
  if (before.back() > resumed[0] + 1) { // steps after the checkpoint's were done, then again
    // The disruption counts as soon as the new attempt began; what it wasted is placed when the
    // monitor hears of the new attempt's first step (process 0's steps come once a second).
    auto wasted = [](const json& w) {
      return w["goodput"]["steps"]["badput"]["wasted_progress_from_disruption_ms"].get<int64_t>();
    };
    now = env.wait_for("train", [&](const json& w) { return wasted(w) > 0; },
                       std::chrono::seconds(60));
    CHECK_MESSAGE(wasted(now) > 0, "last step before the loss " << before.back() << ", resumed from "
                                                            << resumed[0] << "; goodput "
                                                            << now["goodput"].dump());
  }

  // A half-written checkpoint (what a save cut short leaves: Orbax's temporary directory) of a
  // later step is never what a run resumes from.
  REQUIRE(env.run({"workload", "delete", "train"}).exit_code == 0);
  const int latest = *saved_steps(env.ckpt).rbegin();
  const fs::path partial = env.ckpt / (std::to_string(latest + 500) + ".orbax-checkpoint-tmp-1");
  fs::create_directories(partial / "default");
  std::ofstream(partial / "default" / "_METADATA") << "{\"truncated";
  env.create_workload("c", "again", train(latest + 2), {"--checkpoint-dir", env.ckpt.string()});
  auto done = env.wait_for("again", ended, std::chrono::seconds(240));
  INFO(env.monitor_log("again"));
  REQUIRE(done["state"] == "SUCCEEDED");
  CHECK(numbers_after(env.log_of("again", node, 0), "resumed from step ") ==
        std::vector<int>{latest});
}

TEST_CASE("jax checkpoints: a --checkpoint-dir that is not one filesystem every worker sees is "
          "refused in one line before anything is stored (needs root: mount namespaces)") {
  REQUIRE_MESSAGE(::geteuid() == 0, "this test mounts a private tmpfs for one worker's sshd "
                                    "(unshare --mount): run it as root, as CI does");
  TrainEnv env(4);
  const fs::path shared = env.dir.path() / "private-ckpt";
  fs::create_directories(shared);
  // Worker 2's host gets its own disk at that path: its sshd (and so everything it runs) lives in
  // a mount namespace with a tmpfs there, as a host with a local disk would.
  auto cluster = env.run_json({"cluster", "describe", "c"});
  const std::string host = cluster["slices"][0]["workers"][2]["host"].get<std::string>();
  const fs::path hostdir = env.pool_dir() / "hosts" / host;
  int sshd = 0;
  std::ifstream(hostdir / "sshd.pid") >> sshd;
  REQUIRE(sshd > 0);
  REQUIRE(::kill(sshd, SIGTERM) == 0);
  REQUIRE(tpuctl::test::wait_until([&] { return ::kill(sshd, 0) != 0; }, std::chrono::seconds(10)));
  auto restarted = tpuctl::util::run_process(
      {"unshare", "--mount", "--propagation", "private", "sh", "-c",
       "mount -t tmpfs tpuctl-test \"$1\" && exec /usr/sbin/sshd -f \"$2\" -E \"$3\"", "sh",
       shared.string(), (hostdir / "sshd_config").string(), (hostdir / "sshd.log").string()});
  REQUIRE(restarted);
  REQUIRE_MESSAGE(restarted->exit_code == 0, restarted->err);
  REQUIRE(tpuctl::test::wait_until(
      [&] { return env.run({"ssh", "c", "--worker", "2", "--command", "true"}).exit_code == 0; },
      std::chrono::seconds(20)));

  auto r = env.run({"workload", "create", "--cluster", "c", "--workload", "w", "--command", "true",
                    "--checkpoint-dir", shared.string()});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "tpuctl: error: --checkpoint-dir '" + shared.string() +
                     "' is not shared by every worker: on " + env.node() + "/2@" + host +
                     ", the file worker 0 wrote in '" + shared.string() +
                     "' did not appear here within 10s: Orbax needs one directory every worker "
                     "shares; give a path on a filesystem they all mount (NFS, a shared disk)\n");
  CHECK(env.run_json({"workload", "list"}).empty());
  CHECK(fs::is_empty(shared)); // the check's files are gone again

  auto relative = env.run({"workload", "create", "--cluster", "c", "--workload", "w",
                           "--command", "true", "--checkpoint-dir", "ckpt"});
  CHECK(relative.exit_code == 2);
  CHECK(relative.err.find("--checkpoint-dir 'ckpt' is not an absolute path") != std::string::npos);
  CHECK(env.run_json({"workload", "list"}).empty());

  // A directory outside the private mount is one filesystem for all four: accepted, and
  // exported to the job.
  env.create_workload("c", "w", "echo \"[$TPUCTL_CHECKPOINT_DIR]\"",
                      {"--checkpoint-dir", env.ckpt.string()});
  auto done = env.wait_for("w", ended, std::chrono::seconds(60));
  INFO(env.monitor_log("w"));
  REQUIRE(done["state"] == "SUCCEEDED");
  CHECK(done["checkpoint_dir"] == env.ckpt.string());
  CHECK(env.log_of("w", env.node(), 2) == "[" + env.ckpt.string() + "]\n");
}
