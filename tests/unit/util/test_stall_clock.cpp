// util::StallClock: the time a process was stopped counts as stalled; it only grows.
#include <chrono>
#include <csignal>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "util/stall_clock.hpp"

TEST_SUITE_BEGIN("unit");

TEST_CASE("util::StallClock counts the time its process was stopped (SIGSTOP)") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    int64_t before = 0;
    {
      tpuctl::util::StallClock clock;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      before = clock.stalled_ms();
      // The parent stops this process for 2 s in the next second.
      std::this_thread::sleep_for(std::chrono::milliseconds(3500));
      const int64_t after = clock.stalled_ms();
      int64_t both[2] = {before, after};
      (void)!::write(fds[1], both, sizeof both);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  REQUIRE(::kill(child, SIGSTOP) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  REQUIRE(::kill(child, SIGCONT) == 0);
  int64_t both[2] = {-1, -1};
  REQUIRE(::read(fds[0], both, sizeof both) == static_cast<ssize_t>(sizeof both));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(both[1] >= both[0]);
  CHECK(both[1] - both[0] >= 1500); // stopped 2 s: at least that, less a tick and some slack
}
