// agent::start_supervised through real processes: the command runs detached in its own process
// group, its output goes to the log, its exit status and heartbeat to files, and a signal to the
// supervisor stops its whole tree; supervise-stop and supervise-watch, the controller's ways in.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <signal.h>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "agent/supervise.hpp"
#include "tests/support/helpers.hpp"
#include "util/process_tree.hpp"

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

// The stream's first line: the control lines this agent takes.
const nlohmann::json k_hello = {{"watching", {{"accepts", {"stop", "start", "close", "dump"}}}}};

// Runs watch_supervised(dir) on a thread, with pipes for its stdin and its stdout: `first_input`
// is written to its stdin at once, `on_line` sees every line it writes (and may write to or close
// its stdin: `in` is -1 once closed). Returns every line, once it ended by itself.
std::vector<nlohmann::json>
run_watch(const std::string& dir, const std::string& first_input,
          const std::function<void(const std::vector<nlohmann::json>&, int& in)>& on_line) {
  int in[2];
  int out[2];
  REQUIRE(::pipe(in) == 0);
  REQUIRE(::pipe(out) == 0);
  std::thread watcher([&] {
    CHECK(tpuctl::agent::watch_supervised({dir, std::chrono::milliseconds(5000), ""}, in[0], out[1]));
    ::close(out[1]);
  });
  if (!first_input.empty()) {
    REQUIRE(::write(in[1], first_input.data(), first_input.size()) ==
            static_cast<ssize_t>(first_input.size()));
  }
  std::string text;
  std::vector<nlohmann::json> lines;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) {
    text.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = text.find('\n')) != std::string::npos; text.erase(0, nl + 1)) {
      lines.push_back(nlohmann::json::parse(text.substr(0, nl)));
      on_line(lines, in[1]);
    }
  }
  watcher.join();
  ::close(in[0]);
  if (in[1] >= 0) {
    ::close(in[1]);
  }
  ::close(out[0]);
  return lines;
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

TEST_CASE("agent supervise: TERM to the supervisor stops its whole tree, escaped daemons too") {
  tpuctl::test::TempDir tmp;
  SuperviseOptions o;
  o.dir = (tmp.path() / "w").string();
  const std::string marker = "TPUCTL_TEST_TREE=" + tmp.path().filename().string();
  // A daemon in its own session after a double fork (it leaves the group and its parent), one
  // that ignores TERM, and the command's own sleep.
  o.command = "export " + marker +
              "; (setsid sh -c 'sleep 60' &) ; "
              "(trap '' TERM; sleep 61) & sleep 62";
  o.kill_grace = std::chrono::milliseconds(500);
  auto started = start_supervised(o);
  REQUIRE(started);
  std::vector<int> tree;
  for (int i = 0; i < 100 && tree.size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    tree = tpuctl::util::processes_tagged(marker);
  }
  REQUIRE(tree.size() >= 3);
  REQUIRE(::kill(started->supervisor_pid, SIGTERM) == 0);
  auto s = wait_exited(o.dir, std::chrono::seconds(10));
  CHECK(s["status"]["state"] == "exited");
  CHECK(s["status"]["stopped"] == true);
  CHECK(s["status"]["exit_code"] == 128 + SIGTERM);
  CHECK(tpuctl::util::processes_tagged(marker).empty()); // nothing of the tree is left
}

TEST_CASE("agent supervise: what a command leaves running when it exits is stopped with it") {
  tpuctl::test::TempDir tmp;
  SuperviseOptions o;
  o.dir = (tmp.path() / "w").string();
  const std::string marker = "TPUCTL_TEST_LEFT=" + tmp.path().filename().string();
  o.command = "export " + marker + "; (setsid sleep 60 &); sleep 0.3; exit 4";
  o.kill_grace = std::chrono::milliseconds(500);
  auto started = start_supervised(o);
  REQUIRE(started);
  auto s = wait_exited(o.dir, std::chrono::seconds(10));
  CHECK(s["status"]["exit_code"] == 4);
  CHECK(s["status"]["stopped"] == false);
  CHECK(tpuctl::util::processes_tagged(marker).empty());
}

TEST_CASE("agent supervise-stop stops through the supervisor, and by the tag when it was killed") {
  tpuctl::test::TempDir tmp;
  const std::string marker = "TPUCTL_TEST_STOP=" + tmp.path().filename().string();
  SuperviseOptions a;
  a.dir = (tmp.path() / "a").string();
  a.command = "export " + marker + "; sleep 60";
  a.kill_grace = std::chrono::milliseconds(300);
  SuperviseOptions b = a;
  b.dir = (tmp.path() / "b").string();
  auto sa = start_supervised(a);
  auto sb = start_supervised(b);
  REQUIRE(sa);
  REQUIRE(sb);
  SUBCASE("live supervisors: no scan") {
    auto stopped =
        tpuctl::agent::stop_supervised({a.dir, b.dir}, marker, std::chrono::milliseconds(300));
    CHECK(stopped.supervisors == 2);
    CHECK(!stopped.scanned);
    CHECK(supervised_status(a.dir)["status"]["stopped"] == true);
    CHECK(supervised_status(b.dir)["status"]["state"] == "exited");
  }
  SUBCASE("a supervisor SIGKILLed: its orphans are found by the tag") {
    REQUIRE(::kill(sa->supervisor_pid, SIGKILL) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto stopped =
        tpuctl::agent::stop_supervised({a.dir, b.dir}, marker, std::chrono::milliseconds(300));
    CHECK(stopped.supervisors == 1);
    CHECK(stopped.scanned);
    CHECK(stopped.terminated >= 1);
  }
  CHECK(tpuctl::util::processes_tagged(marker).empty());
}

TEST_CASE("agent supervise-stop's shorter grace holds over the supervisor's own") {
  // A job that holds TERM (as JAX does while a collective waits for a dead peer) under a
  // supervisor whose own grace is an hour: the stop's 300 ms still reaches a KILL through the
  // supervisor, which records the exit itself. Had the supervisor kept its own grace, it would
  // still be waiting when the stop gave up on it (300 ms + 10 s) and was KILLed: no exit
  // recorded, its tree found by the tag instead.
  tpuctl::test::TempDir tmp;
  const std::string marker = "TPUCTL_TEST_SHORT=" + tmp.path().filename().string();
  SuperviseOptions o;
  o.dir = (tmp.path() / "w").string();
  const auto trapped = tmp.path() / "trapped";
  // exec: the shell that holds TERM carries the marker in its own environment (an export
  // alone changes only the shell's copy), so nothing can outlive the test unseen.
  o.command = "export " + marker + "; exec sh -c \"trap '' TERM; : > " + trapped.string() +
              "; while :; do sleep 0.2; done\"";
  o.kill_grace = std::chrono::hours(1);
  REQUIRE(start_supervised(o));
  REQUIRE(tpuctl::test::wait_until([&] { return std::filesystem::exists(trapped); },
                                   std::chrono::seconds(30)));
  auto stopped = tpuctl::agent::stop_supervised({o.dir}, marker, std::chrono::milliseconds(300));
  CHECK(stopped.supervisors == 1);
  CHECK(!stopped.scanned);
  const auto s = supervised_status(o.dir);
  CHECK(s["status"]["state"] == "exited");
  CHECK(s["status"]["stopped"] == true);
  CHECK(s["status"]["signal"] == "KILL");
  CHECK(tpuctl::util::processes_tagged(marker).empty());
}

TEST_CASE("agent supervise-watch: a line at once, one on exit, heartbeats; ends when stdin does") {
  tpuctl::test::TempDir tmp;
  SuperviseOptions o;
  o.dir = (tmp.path() / "w").string();
  o.command = "sleep 0.8; exit 3";
  o.heartbeat_interval = std::chrono::milliseconds(100);
  REQUIRE(start_supervised(o));
  int in[2];
  int out[2];
  REQUIRE(::pipe(in) == 0);
  REQUIRE(::pipe(out) == 0);
  std::thread watcher([&] {
    CHECK(tpuctl::agent::watch_supervised({o.dir, std::chrono::milliseconds(200), ""}, in[0], out[1]));
    ::close(out[1]);
  });
  std::string text;
  std::vector<nlohmann::json> lines;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool exited = false;
  while (!exited && std::chrono::steady_clock::now() < until) {
    char buf[4096];
    ssize_t n = ::read(out[0], buf, sizeof buf);
    REQUIRE(n > 0);
    text.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = text.find('\n')) != std::string::npos; text.erase(0, nl + 1)) {
      lines.push_back(nlohmann::json::parse(text.substr(0, nl)));
      exited =
          exited ||
          lines.back().value("status", nlohmann::json::object()).value("state", "") == "exited";
    }
  }
  REQUIRE(exited);
  REQUIRE(lines.size() >= 4); // what it takes, running, heartbeats every 200 ms over 0.8 s, exited
  CHECK(lines.front() == k_hello);
  CHECK(lines[1]["status"]["state"] == "running");
  CHECK(lines.back()["status"]["exit_code"] == 3);
  ::close(in[1]); // the channel closes: the watch ends
  watcher.join();
  ::close(in[0]);
  ::close(out[0]);
  CHECK(!tpuctl::agent::watch_supervised({o.dir, std::chrono::milliseconds(50), ""}, 0, 1));
}

TEST_CASE("agent supervise-watch: a stop line stops the worker, removes its files and answers; "
          "the workload's directory goes with its last worker") {
  tpuctl::test::TempDir tmp;
  const std::string marker = "TPUCTL_TEST_WATCH_STOP=" + tmp.path().filename().string();
  const auto workload = tmp.path() / "workloads" / "uid1";
  std::filesystem::create_directories(workload / "app");
  SuperviseOptions a;
  a.dir = (workload / "node-0").string();
  a.command = "export " + marker + "; sleep 60";
  a.kill_grace = std::chrono::milliseconds(300);
  SuperviseOptions b = a;
  b.dir = (workload / "node-1").string();
  REQUIRE(start_supervised(a));
  REQUIRE(start_supervised(b));
  // Runs one watch of `dir`, sends the stop line once the first status line came, and returns
  // every line it wrote; without `remove` the watch goes on after its answer, until its stdin
  // closes (once the status line after the answer came).
  auto stop_through_watch = [&](const std::string& dir, bool remove) {
    return run_watch(dir, "", [&](const std::vector<nlohmann::json>& lines, int& in) {
      if (lines.size() == 2) { // what it takes, then the first status line
        const std::string stop = "not json\n{\"stop\": {\"grace_ms\": 300, \"tag\": \"" + marker +
                                 "\", \"remove\": " + (remove ? "true" : "false") + "}}\n";
        REQUIRE(::write(in, stop.data(), stop.size()) == static_cast<ssize_t>(stop.size()));
      }
      if (!remove && lines.size() == 5) {
        ::close(in); // the channel closes: the watch ends
        in = -1;
      }
    }); // with remove, it returned by itself after the answer: stdin still open
  };
  SuperviseOptions c = a;
  c.dir = (workload / "node-2").string();
  REQUIRE(start_supervised(c));
  auto kept = stop_through_watch(c.dir, false);
  REQUIRE(kept.size() == 5);
  CHECK(kept[0] == k_hello);
  CHECK(kept[2] == nlohmann::json{{"stopping", true}});
  CHECK(kept[3]["stopped"]["supervisors"] == 1);
  CHECK(kept[3]["stopped"]["removed"] == false);
  CHECK(kept[4]["status"]["state"] == "exited"); // it went on watching, and saw the stop
  CHECK(std::filesystem::exists(c.dir));
  std::filesystem::remove_all(c.dir);

  auto first = stop_through_watch(a.dir, true);
  REQUIRE(first.size() == 4);
  CHECK(first[1]["status"]["state"] == "running");
  CHECK(first[2] == nlohmann::json{{"stopping", true}});
  CHECK(first[3]["stopped"]["supervisors"] == 1);
  CHECK(first[3]["stopped"]["removed"] == true);
  CHECK(!std::filesystem::exists(a.dir));
  CHECK(std::filesystem::exists(b.dir)); // the other worker's, still running
  CHECK(tpuctl::util::processes_tagged(marker).size() >= 1);

  auto last = stop_through_watch(b.dir, true);
  REQUIRE(last.size() == 4);
  CHECK(last[3]["stopped"]["removed"] == true);
  CHECK(!std::filesystem::exists(workload)); // the last worker took the script dir with it
  CHECK(std::filesystem::exists(tmp.path() / "workloads"));
  CHECK(tpuctl::util::processes_tagged(marker).empty());
}

TEST_CASE("agent supervise-watch: a start line runs the command as a session would and answers "
          "with its exit status and output; a close line ends the stream") {
  tpuctl::test::TempDir tmp;
  const std::string dir = (tmp.path() / "w").string();
  const std::string marker = (tmp.path() / "ran").string();
  // The controller's line: the command it would send over a new session (shell syntax, an
  // environment assignment, a redirect), answered once it returned; then the close line, which
  // ends the watch while its stdin stays open.
  const std::string command = "TPUCTL_TEST_X=7 sh -c 'echo \"x=$TPUCTL_TEST_X\" > " + marker +
                              "'; echo to-out; echo to-err >&2; read -r line; exit 3";
  const auto lines = run_watch(
      dir, nlohmann::json{{"start", {{"command", command}}}}.dump() + "\n{\"close\": {}}\n",
      [](const std::vector<nlohmann::json>&, int&) {});
  REQUIRE(!lines.empty());
  CHECK(lines.front() == k_hello);
  nlohmann::json started;
  for (const auto& l : lines) {
    if (l.contains("started")) {
      started = l["started"];
    }
  }
  REQUIRE(started.is_object());
  CHECK(started["exit_code"] == 3); // its stdin was empty: `read` saw end-of-file
  CHECK(started["out"] == "to-out\n");
  CHECK(started["err"] == "to-err\n");
  CHECK(tpuctl::test::read_file(marker) == "x=7\n");
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
        "first\n--- tpuctl: attempt 1 ---\nsecond\n");

  SuperviseOptions empty;
  empty.dir = o.dir;
  auto refused = start_supervised(empty);
  REQUIRE(!refused);
  CHECK(refused.error().kind == tpuctl::ErrorKind::usage);
  CHECK(supervised_status((tmp.path() / "none").string())["status"].is_null());
}
