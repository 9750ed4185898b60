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
