// Host-key policy and authentication against real sshd servers: unknown keys refused under
// `yes`, recorded under `accept-new` and let in unrecorded under `no`, a changed key refused under
// every policy (exit 5) naming the known_hosts line, a user's `StrictHostKeyChecking no` not
// weakening tpuctl's policy, and an unauthorized key refused as an authentication failure.
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "cli/fanout_output.hpp"
#include "remote/fanout.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using remote::Outcome;

namespace {

constexpr int k_block = 202;
constexpr size_t k_hosts = 6;

test::LocalPoolFixture& pool() {
  static test::LocalPoolFixture fixture(k_hosts, k_block);
  return fixture;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<remote::SshTarget> with_known_hosts(const std::filesystem::path& file) {
  auto targets = pool().targets();
  for (auto& t : targets) {
    t.known_hosts_file = file.string();
  }
  return targets;
}

// "[addr]:port type key" of each line, whatever comment follows.
std::vector<std::string> entries(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& line : util::split(text, '\n')) {
    std::istringstream in(line);
    std::string host, type, key;
    if (in >> host >> type >> key) {
      out.push_back(host + " " + type + " " + key);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("remote::run_fanout refuses unknown host keys under yes and records them under "
          "accept-new") {
  test::TempDir tmp;
  auto known = tmp.path() / "known_hosts";
  std::ofstream(known) << "";
  auto opts = pool().options();
  auto jobs = remote::make_jobs(with_known_hosts(known), "echo in");

  opts.host_key_policy = remote::HostKeyPolicy::yes;
  auto refused = remote::run_fanout(jobs, opts);
  REQUIRE(refused);
  for (const auto& r : *refused) {
    CAPTURE(r.host);
    CHECK(r.outcome == Outcome::host_key_unknown);
    CHECK(r.out.empty()); // nothing ran
    CHECK(r.error.find("is not in " + known.string()) != std::string::npos);
    CHECK(r.error.find("SHA256:") != std::string::npos);
    CHECK(r.error.find("accept-new") != std::string::npos);
  }
  CHECK(cli::broadcast_exit_status(*refused) == 5);
  CHECK(read_text(known).empty()); // `yes` never writes

  opts.host_key_policy = remote::HostKeyPolicy::accept_new;
  auto accepted = remote::run_fanout(jobs, opts);
  REQUIRE(accepted);
  for (const auto& r : *accepted) {
    CAPTURE(r.host);
    CAPTURE(r.error);
    CHECK(r.outcome == Outcome::ok);
    CHECK(r.out == "in\n");
  }
  // Written concurrently by 6 workers, yet one whole line per host: exactly the host keys the
  // pool generated.
  std::vector<std::string> expected;
  for (const auto& h : pool().pool().hosts) {
    expected.push_back(h.known_hosts_line);
  }
  std::sort(expected.begin(), expected.end());
  CHECK(entries(read_text(known)) == expected);

  // Now known: `yes` lets them in.
  opts.host_key_policy = remote::HostKeyPolicy::yes;
  auto again = remote::run_fanout(jobs, opts);
  REQUIRE(again);
  CHECK(cli::broadcast_exit_status(*again) == 0);
}

TEST_CASE("remote::run_fanout accept-new creates a missing known_hosts file") {
  test::TempDir tmp;
  auto known = tmp.path() / "new_known_hosts";
  auto opts = pool().options();
  opts.host_key_policy = remote::HostKeyPolicy::accept_new;
  auto targets = with_known_hosts(known);
  targets.resize(2);
  auto results = remote::run_fanout(remote::make_jobs(targets, "true"), opts);
  REQUIRE(results);
  CHECK(cli::broadcast_exit_status(*results) == 0);
  CHECK(entries(read_text(known)).size() == 2);
}

TEST_CASE(
    "remote::run_fanout refuses a changed host key with exit 5, naming the known_hosts line") {
  test::TempDir tmp;
  auto known = tmp.path() / "known_hosts";
  const auto& hosts = pool().pool().hosts;
  // Line 1: a comment; line 2: host w0 with the key of w1 (a "reinstalled" or spoofed host).
  std::string w1_key = hosts[1].known_hosts_line.substr(hosts[1].known_hosts_line.find(' '));
  std::string w0_pattern = hosts[0].known_hosts_line.substr(0, hosts[0].known_hosts_line.find(' '));
  std::string text = "# managed by a test\n" + w0_pattern + w1_key + "\n";
  for (size_t i = 1; i < hosts.size(); ++i) {
    text += hosts[i].known_hosts_line + "\n";
  }
  std::ofstream(known) << text;
  auto opts = pool().options();
  auto jobs = remote::make_jobs(with_known_hosts(known), "echo in");
  for (auto policy :
       {remote::HostKeyPolicy::yes, remote::HostKeyPolicy::accept_new, remote::HostKeyPolicy::no}) {
    opts.host_key_policy = policy;
    auto results = remote::run_fanout(jobs, opts);
    REQUIRE(results);
    const auto& r = *results;
    CHECK(r[0].outcome == Outcome::host_key_changed);
    CHECK(r[0].out.empty());
    CHECK(r[0].error.find("host key for " + w0_pattern + " changed") != std::string::npos);
    CHECK(r[0].error.find("see " + known.string() + " line 2") != std::string::npos);
    for (size_t i = 1; i < r.size(); ++i) {
      CHECK(r[i].outcome == Outcome::ok);
    }
    CHECK(cli::broadcast_exit_status(r) == 5);
  }
  CHECK(read_text(known) == text); // accept-new never replaces a key
}

TEST_CASE("remote::run_fanout under no connects to unknown hosts without recording them") {
  test::TempDir tmp;
  auto known = tmp.path() / "known_hosts";
  std::ofstream(known) << "";
  auto opts = pool().options();
  opts.host_key_policy = remote::HostKeyPolicy::no;
  auto results = remote::run_fanout(remote::make_jobs(with_known_hosts(known), "echo in"), opts);
  REQUIRE(results);
  for (const auto& r : *results) {
    CAPTURE(r.host);
    CHECK(r.outcome == Outcome::ok);
    CHECK(r.out == "in\n");
  }
  CHECK(read_text(known).empty());
}

TEST_CASE("remote::run_fanout applies ~/.ssh/config first, then its own settings and policy") {
  test::TempDir tmp;
  auto known = tmp.path() / "known_hosts"; // empty: every host is unknown
  std::ofstream(known) << "";
  const auto& h0 = pool().pool().hosts[0];
  auto config = tmp.path() / "ssh_config";
  std::ofstream(config) << "Host alias-w0\n"
                        << "  Hostname " << h0.address << "\n"
                        << "  Port " << h0.port << "\n"
                        << "  StrictHostKeyChecking no\n"
                        << "  UserKnownHostsFile /dev/null\n";
  remote::SshTarget t = pool().targets()[0];
  t.address = "alias-w0";
  t.port = 0; // from the config
  t.known_hosts_file = known.string();
  auto opts = pool().options();
  opts.process_config = true;
  opts.config_file = config.string();
  auto results = remote::run_fanout(remote::make_jobs({t}, "echo via-config"), opts);
  REQUIRE(results);
  const auto& r = results->front();
  // The alias was resolved through the config (else: cannot resolve 'alias-w0'), and its
  // "StrictHostKeyChecking no" did not make the unknown key acceptable.
  CHECK(r.outcome == Outcome::host_key_unknown);
  CHECK(r.error.find("[" + h0.address + "]:" + std::to_string(h0.port)) != std::string::npos);

  // With the key known, the same alias works.
  std::ofstream(known) << h0.known_hosts_line << "\n";
  auto ok_results = remote::run_fanout(remote::make_jobs({t}, "echo via-config"), opts);
  REQUIRE(ok_results);
  CHECK(ok_results->front().outcome == Outcome::ok);
  CHECK(ok_results->front().out == "via-config\n");
}

TEST_CASE("remote::run_fanout reports a key the hosts do not accept as an authentication failure") {
  test::TempDir tmp;
  auto key = tmp.path() / "stranger";
  auto gen = util::run_process({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key.string()});
  REQUIRE(gen);
  REQUIRE(gen->exit_code == 0);
  auto targets = pool().targets();
  targets.resize(2);
  for (auto& t : targets) {
    t.identity_file = key.string();
  }
  auto results = remote::run_fanout(remote::make_jobs(targets, "echo in"), pool().options());
  REQUIRE(results);
  for (const auto& r : *results) {
    CHECK(r.outcome == Outcome::auth);
    CHECK(r.error.find("permission denied (publickey)") != std::string::npos);
    CHECK(r.error.find(key.string()) != std::string::npos);
  }
  CHECK(cli::broadcast_exit_status(*results) == 5);

  // An identity file that does not exist stops the run before any connection.
  targets[0].identity_file = (tmp.path() / "missing").string();
  auto missing = remote::run_fanout(remote::make_jobs(targets, "echo in"), pool().options());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().kind == ErrorKind::auth);
  CHECK(missing.error().message.find("missing' cannot be read") != std::string::npos);
}

TEST_CASE("remote::run_fanout authenticates through ssh-agent when no identity file is given") {
  test::TempDir tmp;
  const std::string sock = (tmp.path() / "agent.sock").string();
  pid_t agent = -1;
  std::vector<std::string> args = {"ssh-agent", "-D", "-a", sock};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  REQUIRE(posix_spawnp(&agent, "ssh-agent", &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  struct AgentGuard {
    pid_t pid;
    ~AgentGuard() {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  } guard{agent};
  for (int i = 0; i < 200 && !std::filesystem::exists(sock); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  util::ProcessOptions with_sock;
  with_sock.env_set = {{"SSH_AUTH_SOCK", sock}};
  // The socket file appears at bind(), before the agent listens: ssh-add exits 2 ("could not
  // open a connection") until then, so retry that case for up to 2 s.
  auto add = util::run_process({"ssh-add", "-q", pool().pool().client_key.string()}, with_sock);
  for (int i = 0; i < 100 && add && add->exit_code == 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    add = util::run_process({"ssh-add", "-q", pool().pool().client_key.string()}, with_sock);
  }
  REQUIRE(add);
  REQUIRE_MESSAGE(add->exit_code == 0, add->err);

  auto targets = pool().targets();
  targets.resize(3);
  for (auto& t : targets) {
    t.identity_file.clear(); // the key is only in the agent
  }
  const char* old = std::getenv("SSH_AUTH_SOCK");
  std::string saved = old ? old : "";
  ::setenv("SSH_AUTH_SOCK", sock.c_str(), 1);
  auto opts = pool().options();
  opts.use_agent = true;
  auto via_agent = remote::run_fanout(remote::make_jobs(targets, "echo agent"), opts);
  opts.use_agent = false;
  auto without = remote::run_fanout(remote::make_jobs(targets, "echo agent"), opts);
  if (old) {
    ::setenv("SSH_AUTH_SOCK", saved.c_str(), 1);
  } else {
    ::unsetenv("SSH_AUTH_SOCK");
  }
  REQUIRE(via_agent);
  for (const auto& r : *via_agent) {
    CAPTURE(r.error);
    CHECK(r.outcome == Outcome::ok);
    CHECK(r.out == "agent\n");
  }
  REQUIRE(without);
  for (const auto& r : *without) {
    CHECK(r.outcome == Outcome::auth);
  }
}
