// A workload at 64 workers on a local pool of 64 real sshd: the monitor hears its workers through
// one stream each (workload_watch.hpp), so a monitor that does not run for 30 s (SIGSTOP) blames
// no worker for its own absence; a delete is carried out by the monitor through the streams it
// holds (no new session), or, when the monitor cannot answer, by one session per host; after it
// nothing of tpuctl's is left on any host (no supervisor, stream, reaper, kill script or file).
// Addresses: 127.0.240.0/24 and 127.0.241.0/24.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include <doctest/doctest.h>

#include "provision/pool/local_pool.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "tests/support/workload_env.hpp"
#include "util/process_tree.hpp"

using namespace tpuctl::test;
using nlohmann::json;

TEST_SUITE_BEGIN("integration");

namespace {

// Processes started through the pool's servers (every session carries the pool's directory).
std::string listing(const std::vector<int>& pids) {
  std::string out;
  for (int pid : pids) {
    std::string cmd = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    out += "\n  " + cmd.substr(0, 200);
  }
  return out;
}

// The detached monitor (its pid, alone in the vector), once it hears all `workers` through their
// streams; waits up to `limit` (required).
std::vector<int> watching_monitor(const WorkloadEnv& env, size_t workers,
                                  std::chrono::seconds limit) {
  std::vector<int> monitor;
  REQUIRE(tpuctl::test::wait_until(
      [&] {
        monitor = named(processes_with_marker(env.dir.path().string()), "monitor");
        return monitor.size() == 1 && env.pool_processes("supervise-watch").size() == workers;
      },
      limit));
  return monitor;
}

// What is left of the workload `uid` in the hosts' work directories.
std::vector<std::string> files_of(const WorkloadEnv& env, const std::string& uid) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(env.dir.path(), ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() == uid) {
      out.push_back(it->path().string());
    }
  }
  return out;
}

} // namespace

TEST_CASE("workload at 64 workers: a monitor stopped for 30 s loses no worker; a delete leaves "
          "nothing on any host") {
  WorkloadEnv env(64, "127.0.240.2", "16x16");
  auto made = env.run({"cluster", "create", "--cluster", "big", "--tpu-type", "v5litepod-256"});
  REQUIRE_MESSAGE(made.exit_code == 0, made.err);
  const std::string uid = env.create_workload("big", "scale", "sleep 600");
  auto wl = env.run_json({"workload", "describe", "scale"});
  REQUIRE(wl["workers"].size() == 64);
  CHECK(wl["running"] == 64);

  const std::vector<int> monitor = watching_monitor(env, 64, std::chrono::seconds(120));

  REQUIRE(::kill(monitor[0], SIGSTOP) == 0);
  std::this_thread::sleep_for(std::chrono::seconds(30));
  REQUIRE(::kill(monitor[0], SIGCONT) == 0);
  // Two lost_after windows of the resumed monitor's own time: a false LOST would show by then.
  std::this_thread::sleep_for(std::chrono::seconds(20));
  wl = env.run_json({"workload", "describe", "scale"});
  CHECK(wl["state"] == "RUNNING");
  CHECK(wl["restarts"] == 0);
  CHECK(wl["running"] == 64);
  for (const auto& w : wl["workers"]) {
    CHECK_MESSAGE(w["state"] == "RUNNING", w.dump());
  }
  CHECK(workload_processes(uid).size() >= 64 * 2); // a supervisor and a sleep on every worker

  // The monitor holds a stream to every worker: it stops them all, no new session per host.
  auto del = env.run_json({"workload", "delete", "scale"});
  CHECK(del["stopped_by_monitor"] == 64);
  CHECK(del["unreachable"].empty());
  CHECK(workload_processes(uid).empty()); // stopped before the delete returned
  CHECK(files_of(env, uid).empty());      // and every worker's files removed
  // The monitor ends with its workload and its streams with it: nothing is left on any host.
  std::vector<int> left;
  CHECK_MESSAGE(tpuctl::test::wait_until(
                    [&] {
                      left = env.pool_processes();
                      return left.empty();
                    },
                    std::chrono::seconds(30)),
                ("still running on the pool's hosts:" + listing(left)));

  auto gone = env.run({"cluster", "delete", "big", "--force"});
  CHECK_MESSAGE(gone.exit_code == 0, gone.err);
  CHECK(tpuctl::test::wait_until([&] { return env.pool_processes().empty(); },
                                 std::chrono::seconds(30)));
}

TEST_CASE("workload delete: a monitor that cannot answer (stopped) does not hold it up; the "
          "delete stops the workers through new sessions") {
  WorkloadEnv env(4, "127.0.241.2");
  auto made = env.run({"cluster", "create", "--cluster", "small", "--tpu-type", "v5litepod-16"});
  REQUIRE_MESSAGE(made.exit_code == 0, made.err);
  const std::string uid = env.create_workload("small", "held", "sleep 600");
  const std::vector<int> monitor = watching_monitor(env, 4, std::chrono::seconds(60));
  REQUIRE(::kill(monitor[0], SIGSTOP) == 0);
  auto del = env.run_json({"workload", "delete", "held"});
  ::kill(monitor[0], SIGCONT);
  CHECK(del["stopped_by_monitor"] == 0);
  CHECK(del["unreachable"].empty());
  CHECK(workload_processes(uid).empty());
  CHECK(files_of(env, uid).empty());
  CHECK(env.run({"workload", "describe", "held"}).exit_code == 4);
  // The resumed monitor finds its workload gone and ends, its streams with it.
  CHECK(tpuctl::test::wait_until([&] { return env.pool_processes().empty(); },
                                 std::chrono::seconds(30)));
}
