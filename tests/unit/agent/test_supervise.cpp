// agent::start_supervised through real processes: the command runs detached in its own process
// group, its output goes to the log, its exit status and heartbeat to files, and a signal to the
// supervisor stops the whole group.
#include <chrono>
#include <fstream>
#include <signal.h>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "agent/supervise.hpp"
#include "tests/support/helpers.hpp"

using tpuctl::agent::start_supervised;
using tpuctl::agent::supervised_status;
using tpuctl::agent::SuperviseOptions;

TEST_SUITE_BEGIN("unit");

namespace {

// Waits up to `limit` for the status to say "exited"; returns the last status.
nlohmann::json wait_exited(const std::string& dir, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  nlohmann::json s;
  while (std::chrono::steady_clock::now() < until) {
    s = supervised_status(dir);
    if (s["status"].is_object() && s["status"]["state"] == "exited" && !s["supervisor_alive"]) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return s;
}

} // namespace

TEST_CASE("agent supervise records output, exit status and heartbeats of a detached command") {
  tpuctl::test::TempDir tmp;
  SuperviseOptions o;
  o.dir = (tmp.path() / "w" / "c-0-1").string();
  o.command = "echo out; echo err >&2; sleep 0.5; exit 3";
  o.heartbeat_interval = std::chrono::milliseconds(100);
  auto started = start_supervised(o);
  REQUIRE_MESSAGE(started, started.error().message);
  CHECK(started->pid > 0);
  CHECK(started->supervisor_pid != getpid());
  CHECK(getpgid(started->pid) == started->pid); // its own process group
  auto running = supervised_status(o.dir);
  CHECK(running["status"]["state"] == "running");
  CHECK(running["supervisor_alive"] == true);
  auto s = wait_exited(o.dir, std::chrono::seconds(10));
  CHECK(s["status"]["state"] == "exited");
  CHECK(s["status"]["exit_code"] == 3);
  CHECK(s["status"]["stopped"] == false);
  CHECK(s["heartbeat_ms"].get<int64_t>() >= s["status"]["started_ms"].get<int64_t>());
  CHECK(tpuctl::test::read_file(o.dir + "/log") == "out\nerr\n");
  struct stat st {};
  REQUIRE(::stat((o.dir + "/log").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(o.dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("agent supervise: TERM to the supervisor stops the command's whole group") {
  tpuctl::test::TempDir tmp;
  SuperviseOptions o;
  o.dir = (tmp.path() / "w").string();
  o.command = "sleep 60 & sleep 60";
  o.kill_grace = std::chrono::milliseconds(500);
  auto started = start_supervised(o);
  REQUIRE(started);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  REQUIRE(::kill(started->supervisor_pid, SIGTERM) == 0);
  auto s = wait_exited(o.dir, std::chrono::seconds(10));
  CHECK(s["status"]["state"] == "exited");
  CHECK(s["status"]["stopped"] == true);
  CHECK(s["status"]["exit_code"] == 128 + SIGTERM);
  CHECK(!tpuctl::agent::group_has_live_members(started->pid)); // nothing of the group is left
}

TEST_CASE("agent supervise: a restart appends to the log with a marker; bad input is refused") {
  tpuctl::test::TempDir tmp;
  SuperviseOptions o;
  o.dir = (tmp.path() / "w").string();
  o.command = "echo first";
  REQUIRE(start_supervised(o));
  wait_exited(o.dir, std::chrono::seconds(10));
  o.attempt = 1;
  o.command = "echo second";
  REQUIRE(start_supervised(o));
  auto s = wait_exited(o.dir, std::chrono::seconds(10));
  CHECK(s["status"]["attempt"] == 1);
  CHECK(tpuctl::test::read_file(o.dir + "/log") ==
        "first\n--- tpuctl: attempt 1 (restart 1) ---\nsecond\n");

  SuperviseOptions empty;
  empty.dir = o.dir;
  auto refused = start_supervised(empty);
  REQUIRE(!refused);
  CHECK(refused.error().kind == tpuctl::ErrorKind::usage);
  CHECK(supervised_status((tmp.path() / "none").string())["status"].is_null());
}
