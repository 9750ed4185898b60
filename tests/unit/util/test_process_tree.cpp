// util/process_tree through real processes: a tree is walked without scanning the process table,
// a tag matches exactly, and stopping escalates to KILL for what ignores TERM.
#include <chrono>
#include <csignal>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/process_tree.hpp"
#include "util/strings.hpp"

using namespace tpuctl::util;

TEST_SUITE_BEGIN("unit");

namespace {

// Pids printed by a shell that starts them in the background and exits.
std::vector<int> start_pids(const std::string& script) {
  auto r = run_process({"/bin/sh", "-c", script}, ProcessOptions{});
  REQUIRE(r);
  std::vector<int> out;
  for (const auto& p : split(std::string(trim(r->out)), '\n')) {
    out.push_back(std::stoi(p));
  }
  return out;
}

} // namespace

TEST_CASE("util::descendants walks a process's tree, children and grandchildren") {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::execl("/bin/sh", "sh", "-c", "sleep 30 & (sleep 31 & wait) & wait", nullptr);
    ::_exit(127);
  }
  std::vector<int> tree;
  for (int i = 0; i < 200 && tree.size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    tree = descendants(child);
  }
  CHECK(tree.size() == 3); // sleep 30, the subshell, and the subshell's sleep 31
  for (int pid : tree) {
    CHECK(pid != child);
    CHECK(process_running(pid));
  }
  ::kill(child, SIGKILL);
  for (int pid : tree) {
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(!process_running(child));
  CHECK(descendants(child).empty());
}

TEST_CASE("util::processes_tagged matches the whole entry; stop_processes escalates to KILL") {
  tpuctl::test::TempDir tmp;
  const std::string value = tmp.path().filename().string();
  auto pids = start_pids("TPUCTL_TEST_TAG=" + value +
                         " setsid sh -c 'trap \"\" TERM; exec sleep 30' >/dev/null 2>&1 & echo $!; "
                         "TPUCTL_TEST_TAG=" +
                         value + "x setsid sleep 30 >/dev/null 2>&1 & echo $!");
  REQUIRE(pids.size() == 2);
  std::vector<int> tagged;
  for (int i = 0; i < 100 && tagged.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    tagged = processes_tagged("TPUCTL_TEST_TAG=" + value);
  }
  REQUIRE(tagged.size() == 1);
  CHECK(tagged[0] == pids[0]);
  const StopCount c = stop_processes(tagged, std::chrono::milliseconds(300));
  CHECK(c.terminated == 1);
  CHECK(c.killed == 1); // it ignored TERM
  for (int i = 0; i < 100 && process_running(pids[0]); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(!process_running(pids[0]));
  CHECK(process_running(pids[1])); // another value: left alone
  ::kill(pids[1], SIGKILL);
}

TEST_CASE("util::process_stopped: true while SIGSTOPped, false once continued or gone") {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::execl("/bin/sleep", "sleep", "30", nullptr);
    ::_exit(127);
  }
  CHECK(!process_stopped(child));
  REQUIRE(::kill(child, SIGSTOP) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, WUNTRACED) == child); // stopped now, as the kernel says
  CHECK(WIFSTOPPED(status));
  CHECK(process_stopped(child));
  REQUIRE(::kill(child, SIGCONT) == 0);
  REQUIRE(::waitpid(child, &status, WCONTINUED) == child);
  CHECK(!process_stopped(child));
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  CHECK(!process_stopped(child));
  CHECK(!process_stopped(-1));
}
