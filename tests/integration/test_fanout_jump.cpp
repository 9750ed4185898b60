// Jump hosts in remote/ (jump_hub.hpp) with real sshd servers behind a bastion in network
// namespaces (tests/support/jump_site.hpp: the workers are reachable only from the bastion).
// The fan-out runs on a thread that entered the client namespace (its worker and hub threads
// follow it). Checked: four workers over one bastion session (one login in the bastion's log,
// one TCP connection to its port 22 while all four worker sessions are open); 20 MB from each
// of two workers through the pump, and 8 MB of stdin to them, whole; two hops (the second bastion
// reached through the first); a ProxyJump in ssh_config instead of SshTarget::proxy_jump, and
// `none` overriding it; an unknown bastion host key refused for every worker with one line naming
// the bastion; and no hub thread left once the run is over.
#include <dirent.h>
#include <thread>

#include <doctest/doctest.h>

#include "remote/fanout.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/jump_site.hpp"

using namespace tpuctl;
using tpuctl::test::contains;
using tpuctl::test::JumpSite;

namespace {

// Threads of this process now.
size_t thread_count() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) {
      n += e->d_name[0] != '.';
    }
    ::closedir(d);
  }
  return n;
}

std::vector<remote::SshTarget> workers(const JumpSite& site, const std::string& jump,
                                       size_t first = 1) {
  std::vector<remote::SshTarget> out;
  for (size_t i = first; i < site.pool.hosts.size(); ++i) {
    remote::SshTarget t;
    t.name = site.pool.hosts[i].name;
    t.address = site.pool.hosts[i].address;
    t.port = site.pool.hosts[i].port;
    t.identity_file = site.pool.client_key.string();
    t.proxy_jump = jump;
    out.push_back(t);
  }
  return out;
}

remote::SshOptions options(const std::string& config) {
  remote::SshOptions o;
  o.config_file = config;
  o.use_agent = false;
  o.connect_timeout = std::chrono::seconds(10);
  return o;
}

// run_fanout from inside the client namespace.
std::vector<remote::HostResult> fan_out(const JumpSite& site,
                                        const std::vector<remote::SshTarget>& targets,
                                        const std::string& command, const remote::SshOptions& o) {
  Expected<std::vector<remote::HostResult>> results = Error{ErrorKind::failure, "not run"};
  bool entered = false;
  std::thread t([&] {
    entered = site.enter_client();
    if (entered) {
      results = remote::run_fanout(remote::make_jobs(targets, command), o);
    }
  });
  t.join();
  REQUIRE_MESSAGE(entered, "cannot enter the client network namespace");
  REQUIRE_MESSAGE(results, (results ? "" : results.error().message));
  return *results;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("remote jump hosts: workers reachable only through a bastion share one bastion session") {
  JumpSite site;
  const size_t threads_before = thread_count();

  // Without the jump the workers are out of reach.
  auto direct = fan_out(site, workers(site, ""), "true", options(site.config));
  for (const auto& r : direct) {
    CHECK(r.outcome == remote::Outcome::refused);
  }

  const size_t logins = site.bastion_logins();
  auto through = fan_out(site, workers(site, site.hop),
                         JumpSite::count_command((site.dir.path() / "barrier").string()),
                         options(site.config));
  REQUIRE(through.size() == 4);
  for (const auto& r : through) {
    CHECK_MESSAGE(r.succeeded(), (r.host + ": " + r.error));
    CHECK(r.out == "bastion-connections=1\n");
  }
  CHECK(site.bastion_logins() == logins + 1);
  CHECK(thread_count() == threads_before); // the hub's thread ended with the run

  // Bulk output through the pump arrives whole.
  auto big = fan_out(site, workers(site, site.hop, 3), "head -c 20000000 /dev/zero | tr '\\0' a",
                     options(site.config));
  REQUIRE(big.size() == 2);
  for (const auto& r : big) {
    CHECK_MESSAGE(r.succeeded(), (r.host + ": " + r.error));
    CHECK(r.out.size() == 20000000);
    CHECK(r.out.find_first_not_of('a') == std::string::npos);
  }

  // And the other way: 8 MB of stdin to each of two workers (push_file's direction).
  auto upload = options(site.config);
  upload.stdin_data = tpuctl::remote::InputBytes::of(std::string(8000000, 'b'));
  auto up = fan_out(site, workers(site, site.hop, 3), "tr -d b | wc -c; echo read", upload);
  REQUIRE(up.size() == 2);
  for (const auto& r : up) {
    CHECK_MESSAGE(r.succeeded(), (r.host + ": " + r.error));
    CHECK(r.out == "0\nread\n");
  }
  auto counted = fan_out(site, workers(site, site.hop, 4), "wc -c", upload);
  REQUIRE(counted.size() == 1);
  CHECK(counted[0].out == "8000000\n");

  // Two hops: the bastion, then worker w0 as a second bastion for the others.
  const std::string w0_hop = site.pool.user + "@127.0.252.2:2222";
  const size_t w0_logins = test::read_file(site.pool.hosts[1].log_file).size();
  auto two = fan_out(site, workers(site, site.hop + "," + w0_hop, 2), "echo two-hops",
                     options(site.config));
  REQUIRE(two.size() == 3);
  for (const auto& r : two) {
    CHECK_MESSAGE(r.succeeded(), (r.host + ": " + r.error));
    CHECK(r.out == "two-hops\n");
  }
  const std::string w0_log = test::read_file(site.pool.hosts[1].log_file).substr(w0_logins);
  CHECK(std::count(w0_log.begin(), w0_log.end(), '\n') > 0);
  size_t w0_accepted = 0;
  for (size_t at = w0_log.find("Accepted publickey"); at != std::string::npos;
       at = w0_log.find("Accepted publickey", at + 1)) {
    ++w0_accepted;
  }
  CHECK(w0_accepted == 1); // one session to the second bastion for three workers

  // ssh_config's ProxyJump instead of the target's; `none` overrides it.
  const size_t cfg_logins = site.bastion_logins();
  auto cfg = fan_out(site, workers(site, ""), "echo via-config", options(site.config_jump));
  for (const auto& r : cfg) {
    CHECK_MESSAGE(r.succeeded(), (r.host + ": " + r.error));
    CHECK(r.out == "via-config\n");
  }
  CHECK(site.bastion_logins() == cfg_logins + 1);
  auto none = fan_out(site, workers(site, "none"), "true", options(site.config_jump));
  for (const auto& r : none) {
    CHECK(r.outcome == remote::Outcome::refused);
  }

  // An unknown bastion host key under strict checking: every worker refused, naming it.
  auto unknown = fan_out(site, workers(site, site.hop), "true", options(site.config_unknown));
  for (const auto& r : unknown) {
    CHECK(r.outcome == remote::Outcome::host_key_unknown);
    CHECK_MESSAGE(
        contains(r.error, "jump host '" + site.hop + "': host key for " + JumpSite::k_bastion),
        r.error);
    CHECK(r.error.find('\n') == std::string::npos);
  }
  CHECK(thread_count() == threads_before);
}
