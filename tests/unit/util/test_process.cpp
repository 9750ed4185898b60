#include <doctest/doctest.h>

#include "util/process.hpp"

using namespace tpuctl::util;

TEST_SUITE_BEGIN("util");

TEST_CASE("util::run_process captures stdout, stderr and the exit status") {
  auto r = run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  REQUIRE(r);
  CHECK(r->out == "out\n");
  CHECK(r->err == "err\n");
  CHECK(r->exit_code == 3);
}

TEST_CASE("util::run_process passes argv without a shell") {
  auto r = run_process({"printf", "%s|", "a b", "$(echo no)", ";x"});
  REQUIRE(r);
  CHECK(r->out == "a b|$(echo no)|;x|");
}

TEST_CASE("util::run_process feeds stdin and sets the environment") {
  ProcessOptions opt;
  opt.stdin_data = "hello";
  opt.env_set["TPUCTL_TEST_VAR"] = "v1";
  auto r = run_process({"sh", "-c", "cat; printf ' %s' \"$TPUCTL_TEST_VAR\""}, opt);
  REQUIRE(r);
  CHECK(r->out == "hello v1");
}

TEST_CASE("util::run_process reports a signal death and a timeout") {
  auto killed = run_process({"sh", "-c", "kill -9 $$"});
  REQUIRE(killed);
  CHECK(killed->signal == 9);
  CHECK(killed->exit_code == 137);

  ProcessOptions opt;
  opt.timeout = std::chrono::milliseconds(300);
  auto slow = run_process({"sleep", "30"}, opt);
  REQUIRE(slow);
  CHECK(slow->timed_out);
}

TEST_CASE("util::run_process names a missing program") {
  auto r = run_process({"tpuctl-no-such-program"});
  REQUIRE(!r);
  CHECK(r.error().message.find("'tpuctl-no-such-program'") != std::string::npos);
}

TEST_SUITE_END();
