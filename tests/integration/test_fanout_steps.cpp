// remote::run_steps on 8 real sshd hosts: one connection per host for every step (the client
// port sshd reports in SSH_CONNECTION never changes), steps in lockstep, a gate that stops the
// run, the push step's content-addressed skip and stamp, and a host that cannot be reached.
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "remote/session_steps.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "util/sha256.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using remote::Outcome;
namespace fs = std::filesystem;

namespace {

constexpr int k_block = 206;
constexpr size_t k_hosts = 8;

test::LocalPoolFixture& pool() {
  static test::LocalPoolFixture fixture(k_hosts, k_block);
  return fixture;
}

remote::Step command_step(const std::string& name, const std::string& command, size_t hosts,
                          size_t concurrency = 0) {
  remote::Step s;
  s.name = name;
  s.concurrency = concurrency;
  s.timeout = std::chrono::milliseconds(20000);
  s.commands.assign(hosts, command);
  return s;
}

// "client_ip client_port server_ip server_port" -> the client port.
std::string client_port(const std::string& out) {
  auto words = util::split(std::string(util::trim(out)), ' ');
  return words.size() == 4 ? words[1] : "?";
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("remote::run_steps runs every step of a host over one SSH connection") {
  auto targets = pool().targets();
  std::vector<remote::Step> steps;
  for (int k = 0; k < 3; ++k) {
    steps.push_back(
        command_step("s" + std::to_string(k), "echo $SSH_CONNECTION", k_hosts, k == 0 ? 3 : 0));
  }
  std::vector<size_t> gated;
  auto results = remote::run_steps(targets, pool().options(), steps,
                                   [&](size_t k, const std::vector<remote::HostResult>& r) {
                                     gated.push_back(k);
                                     CHECK(r.size() == k_hosts);
                                     return true;
                                   });
  REQUIRE(results);
  REQUIRE(results->size() == 3);
  CHECK(gated == std::vector<size_t>{0, 1, 2});
  std::set<std::string> ports;
  for (size_t i = 0; i < k_hosts; ++i) {
    CAPTURE(targets[i].name);
    const auto& first = (*results)[0][i];
    REQUIRE(first.outcome == Outcome::ok);
    for (size_t k = 1; k < 3; ++k) {
      CHECK((*results)[k][i].outcome == Outcome::ok);
      CHECK(client_port((*results)[k][i].out) == client_port(first.out));
    }
    ports.insert(client_port(first.out));
  }
  CHECK(ports.size() == k_hosts); // and each host had a connection of its own
}

TEST_CASE("remote::run_steps keeps the hosts in step and stops where the gate says") {
  auto targets = pool().targets();
  test::TempDir tmp;
  // Step 0 leaves a file per host; step 1 counts them: every host must see all of them.
  std::vector<remote::Step> steps;
  remote::Step mark = command_step("mark", "", k_hosts, 2);
  for (size_t i = 0; i < k_hosts; ++i) {
    mark.commands[i] = "sleep 0.$((" + std::to_string(i) + " % 3)); touch '" + tmp.path().string() +
                       "/m" + std::to_string(i) + "'";
  }
  steps.push_back(mark);
  steps.push_back(command_step("count", "ls '" + tmp.path().string() + "' | wc -l", k_hosts));
  steps.push_back(command_step("never", "touch '" + tmp.path().string() + "/never'", k_hosts));
  auto results = remote::run_steps(targets, pool().options(), steps,
                                   [](size_t k, const std::vector<remote::HostResult>&) {
                                     return k == 0; // go on after "mark", stop after "count"
                                   });
  REQUIRE(results);
  REQUIRE(results->size() == 2);
  for (const auto& r : (*results)[1]) {
    CAPTURE(r.host);
    CHECK(r.outcome == Outcome::ok);
    CHECK(util::trim(r.out) == std::to_string(k_hosts));
  }
  CHECK_FALSE(fs::exists(tmp.path() / "never"));
}

TEST_CASE("remote::run_steps reports an unreachable host in every step and runs the others") {
  auto targets = pool().targets();
  targets.resize(3);
  targets.push_back(pool().refused_target());
  std::vector<remote::Step> steps{command_step("a", "echo a", 4), command_step("b", "echo b", 4)};
  auto results =
      remote::run_steps(targets, pool().options(), steps,
                        [](size_t, const std::vector<remote::HostResult>&) { return true; });
  REQUIRE(results);
  REQUIRE(results->size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    for (size_t i = 0; i < 3; ++i) {
      CHECK((*results)[k][i].outcome == Outcome::ok);
    }
    const auto& refused = (*results)[k][3];
    CHECK(refused.outcome == Outcome::refused);
    CHECK(refused.error.find("in step 'a'") != std::string::npos);
  }
  CHECK(util::trim((*results)[1][0].out) == "b");
}

TEST_CASE("remote::run_steps runs a held step on into its later step on the same channel") {
  // Step "check" is held into step "then". Host 6's check fails, so it also runs "fix" and then
  // "then" on channels of its own; host 7 runs "then" with no command. The others run "then" in
  // the very shell that ran their check: the same $$ (a subshell's $$ is its parent's).
  auto targets = pool().targets();
  std::vector<remote::Step> steps;
  remote::Step check = command_step("check", "echo check $$; printf 'no newline'", k_hosts, 3);
  check.commands[6] = "echo check $$; exit 5";
  check.hold_into = 2;
  steps.push_back(check);
  std::vector<int> needs_fix(k_hosts, 0);
  remote::Step fix = command_step("fix", "echo fixed", k_hosts);
  fix.runs_on = [&](size_t i) { return needs_fix[i] != 0; };
  steps.push_back(fix);
  remote::Step then = command_step("then", "echo then $$; echo 'a \\ b'", k_hosts);
  then.commands[7] = "";
  std::mutex mutex;
  std::vector<std::string> then_lines;
  size_t check_ends = 0;
  steps[0].callbacks.on_host_done = [&](const remote::HostResult&) { ++check_ends; };
  then.callbacks.on_line = [&](const remote::HostLine& l) {
    std::lock_guard lock(mutex);
    then_lines.emplace_back(l.text);
  };
  steps.push_back(then);
  remote::SshOptions options = pool().options();
  options.keep_output = true;
  auto results = remote::run_steps(targets, options, steps,
                                   [&](size_t k, const std::vector<remote::HostResult>& r) {
                                     if (k == 0) {
                                       for (const auto& h : r) {
                                         needs_fix[h.index] = h.exit_code != 0;
                                       }
                                     }
                                     return true;
                                   });
  REQUIRE(results);
  REQUIRE(results->size() == 3);
  CHECK(check_ends == k_hosts);
  auto pid_of = [](const std::string& out, const std::string& word) {
    for (const auto& line : util::split(out, '\n')) {
      if (line.rfind(word + " ", 0) == 0) {
        return line.substr(word.size() + 1);
      }
    }
    return std::string("?");
  };
  for (size_t i = 0; i < k_hosts; ++i) {
    CAPTURE(i);
    const auto& c = (*results)[0][i];
    const auto& t = (*results)[2][i];
    CHECK(c.out.find("tpuctl-hold") == std::string::npos); // the mark never shows
    if (i == 6) {
      CHECK(c.outcome == Outcome::exit_code);
      CHECK(c.exit_code == 5);
      CHECK(util::trim((*results)[1][i].out) == "fixed");
      CHECK(pid_of(t.out, "then") != pid_of(c.out, "check"));
    } else if (i == 7) {
      CHECK(t.outcome == Outcome::ok);
      CHECK(t.out.empty());
    } else {
      CHECK(c.outcome == Outcome::ok);
      CHECK(c.out == "check " + pid_of(c.out, "check") + "\nno newline");
      CHECK(t.outcome == Outcome::ok);
      CHECK(t.out == "then " + pid_of(c.out, "check") + "\na \\ b\n");
      CHECK((*results)[1][i].out.empty()); // not in "fix"
    }
  }
  // Lines of "then" went to its own callbacks, none of "check".
  CHECK(then_lines.size() == 2 * (k_hosts - 1));
  for (const auto& l : then_lines) {
    CHECK(l.rfind("check", 0) == std::string::npos);
  }
}

TEST_CASE("remote::run_steps ends held commands when the gate stops the run") {
  auto targets = pool().targets();
  test::TempDir tmp;
  std::vector<remote::Step> steps;
  remote::Step check = command_step("check", "true", k_hosts);
  check.hold_into = 1;
  steps.push_back(check);
  steps.push_back(command_step("never", "touch '" + tmp.path().string() + "/never'", k_hosts));
  auto results =
      remote::run_steps(targets, pool().options(), steps,
                        [](size_t, const std::vector<remote::HostResult>&) { return false; });
  REQUIRE(results);
  REQUIRE(results->size() == 1);
  for (const auto& r : (*results)[0]) {
    CHECK(r.outcome == Outcome::ok);
  }
  CHECK_FALSE(fs::exists(tmp.path() / "never"));
}

TEST_CASE("remote::run_steps connects the hosts a step leaves out when it says connect_all") {
  // Step "seed" runs on host 0 only but connects all; then every host's sshd listener stops
  // answering (SIGSTOP: sessions already open go on), and "rest" still runs on every host.
  auto targets = pool().targets();
  std::vector<remote::Step> steps{command_step("seed", "echo seed", k_hosts, 3),
                                  command_step("rest", "echo rest", k_hosts)};
  steps[0].runs_on = [](size_t i) { return i == 0; };
  steps[0].connect_all = true;
  remote::SshOptions options = pool().options();
  options.keep_output = true;
  options.connect_timeout = std::chrono::milliseconds(1500);
  options.connect_retries = 0;
  auto results = remote::run_steps(targets, options, steps,
                                   [&](size_t k, const std::vector<remote::HostResult>&) {
                                     if (k == 0) {
                                       for (size_t i = 0; i < k_hosts; ++i) {
                                         pool().pause(i);
                                       }
                                     }
                                     return true;
                                   });
  for (size_t i = 0; i < k_hosts; ++i) {
    pool().resume(i);
  }
  REQUIRE(results);
  REQUIRE(results->size() == 2);
  CHECK(util::trim((*results)[0][0].out) == "seed");
  for (size_t i = 0; i < k_hosts; ++i) {
    CAPTURE(i);
    CHECK((*results)[1][i].outcome == Outcome::ok);
    CHECK(util::trim((*results)[1][i].out) == "rest");
  }
}

TEST_CASE("remote::run_steps refuses to hold a step into one that cannot take it") {
  auto targets = pool().targets();
  std::vector<remote::Step> steps{command_step("a", "true", k_hosts),
                                  command_step("b", "cat", k_hosts)};
  steps[0].hold_into = 1;
  steps[1].stdin_data = tpuctl::remote::InputBytes::of("x");
  auto results =
      remote::run_steps(targets, pool().options(), steps,
                        [](size_t, const std::vector<remote::HostResult>&) { return true; });
  REQUIRE_FALSE(results);
  CHECK(results.error().message.find("cannot be held into step 1") != std::string::npos);
}

TEST_CASE("remote::run_steps pushes once, then finds the stamped copy unchanged") {
  auto targets = pool().targets();
  test::TempDir tmp;
  auto local = tmp.path() / "agent.bin";
  std::ofstream(local, std::ios::binary) << std::string(300000, 'a') << "tail";
  remote::Step push;
  push.name = "push";
  push.concurrency = 3;
  push.timeout = std::chrono::milliseconds(20000);
  push.push = remote::StepPush{};
  push.push->options.local_path = local;
  push.push->options.mode = 0700;
  push.push->options.skip_if_same = true;
  push.push->options.stamp = true;
  for (const auto& t : targets) {
    push.push->remote_paths.push_back((tmp.path() / t.name / "agent").string());
  }
  remote::Step run = command_step("run", "", k_hosts);
  for (size_t i = 0; i < k_hosts; ++i) {
    run.commands[i] = "wc -c < '" + push.push->remote_paths[i] + "'";
  }
  auto go = [](size_t, const std::vector<remote::HostResult>& r) {
    for (const auto& x : r) {
      if (!x.succeeded()) {
        return false;
      }
    }
    return true;
  };
  auto first = remote::run_steps(targets, pool().options(), {push, run}, go);
  REQUIRE(first);
  REQUIRE(first->size() == 2);
  for (size_t i = 0; i < k_hosts; ++i) {
    CAPTURE((*first)[0][i].error);
    CHECK((*first)[0][i].outcome == Outcome::ok);
    CHECK_FALSE((*first)[0][i].unchanged);
    CHECK(util::trim((*first)[1][i].out) == "300004");
    CHECK(fs::exists(push.push->remote_paths[i] + ".sha256"));
  }
  // Host 0's copy is rewritten with other content (same size): the stamp no longer matches, the
  // full hash differs, so it alone is sent again.
  {
    std::ofstream(push.push->remote_paths[0], std::ios::binary)
        << std::string(300000, 'b') << "tail";
  }
  auto second = remote::run_steps(targets, pool().options(), {push, run}, go);
  REQUIRE(second);
  REQUIRE(second->size() == 2);
  CHECK_FALSE((*second)[0][0].unchanged);
  for (size_t i = 1; i < k_hosts; ++i) {
    CHECK((*second)[0][i].unchanged);
  }
  CHECK(util::sha256_file_hex(push.push->remote_paths[0]).value_or("") ==
        util::sha256_file_hex(local).value_or("x"));
}

TEST_CASE("remote::run_steps narrows a step's window when a host needs a second connect") {
  auto targets = pool().targets();
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      "steps-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(logger);
  // Host 0's sshd sends no banner for 1.5 s: its first connect (1 s) times out, the retry
  // (2 s) gets through.
  remote::SshOptions o = pool().options();
  o.connect_timeout = std::chrono::milliseconds(1000);
  o.connect_retries = 3;
  o.connect_timeout_growth = 2;
  std::thread resume = pool().pause_for(0, std::chrono::milliseconds(1500));
  auto results =
      remote::run_steps(targets, o, {command_step("a", "echo a", k_hosts, k_hosts)},
                        [](size_t, const std::vector<remote::HostResult>&) { return true; });
  resume.join();
  spdlog::set_default_logger(previous);
  REQUIRE(results);
  for (const auto& r : (*results)[0]) {
    CAPTURE(r.host);
    CAPTURE(r.error);
    CHECK(r.outcome == Outcome::ok);
  }
  CHECK(log.str().find("step 'a': a connect to " + targets[0].name + " needed 2 attempts: " +
                       "connecting 4 hosts at a time instead of 8") != std::string::npos);
}

TEST_SUITE_END();
