// Host and user certificates in the fan-out engine (remote::run_fanout), against real sshd on
// 127.0.251.12-15 (this file's part of the block 127.0.251.x; test_ssh_certificates.cpp runs
// the same through the binary on .2-.5) with certificates from the real ssh-keygen -s: with
// known_hosts holding only a @cert-authority line, the host with a valid certificate is reached
// under strict checking and the others (another principal, expired, another CA) are refused as
// unknown naming the failed check; `@revoked` refuses a key a plain line accepts; accept-new
// falls back to the plain key (recording it) when the certificate is not valid; a CA line
// without a host pattern fails the run before any host is contacted; a user certificate
// (KEY-cert.pub, or CertificateFile in the ssh_config) logs in where the plain key is not
// authorized.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>

#include "remote/fanout.hpp"
#include "remote/local_sshd.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/ssh_keys.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using remote::Outcome;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Stops the pool's sshd servers by pid whatever the test did.
struct PoolGuard {
  remote::LocalSshdPool& pool;
  ~PoolGuard() { (void)remote::stop_local_sshd_pool(pool); }
};

// SIGHUP (sshd re-executes itself, rereading its configuration), then waits until the host
// serves the certificate now in its key's -cert.pub.
void reload(const remote::LocalSshdHost& h) {
  REQUIRE(h.pid > 0);
  REQUIRE(::kill(h.pid, SIGHUP) == 0);
  const std::string cert = test::key_fields(h.host_key.string() + "-cert.pub");
  const bool serving = test::wait_until(
      [&] {
        util::ProcessOptions o;
        o.timeout = std::chrono::seconds(20);
        auto r = util::run_process(
            {"ssh-keyscan", "-c", "-t", "ed25519", "-p", std::to_string(h.port), h.address}, o);
        return r && test::contains(r->out, cert);
      },
      std::chrono::seconds(60));
  REQUIRE_MESSAGE(serving, (std::string("sshd at ") + h.address + " serves no new certificate"));
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("remote::run_fanout trusts hosts through @cert-authority, refuses bad certificates and "
          "@revoked keys, and offers user certificates") {
  test::TempDir tmp;
  remote::LocalSshdOptions lo;
  lo.root = tmp.path() / "pool";
  lo.session_env = {{"SHLVL", "1"}};
  for (int i = 0; i < 4; ++i) {
    lo.hosts.push_back({std::string("c") + std::to_string(i),
                        std::string("127.0.251.") + std::to_string(12 + i), 2222});
  }
  auto created = remote::create_local_sshd_pool(lo);
  REQUIRE_MESSAGE(created, created.error().message);
  remote::LocalSshdPool pool = std::move(*created);
  PoolGuard guard{pool};
  auto started = remote::start_local_sshd_pool(pool);
  REQUIRE_MESSAGE(started, started.error().message);

  const fs::path ca = tmp.path() / "ca";
  const fs::path other_ca = tmp.path() / "other_ca";
  const fs::path user_ca = tmp.path() / "user_ca";
  tpuctl::test::ssh_keygen({"-t", "ed25519", "-N", "", "-C", "", "-f", ca.string()});
  tpuctl::test::ssh_keygen(
      {"-t", "ecdsa", "-b", "256", "-N", "", "-C", "", "-f", other_ca.string()});
  tpuctl::test::ssh_keygen({"-t", "ed25519", "-N", "", "-C", "", "-f", user_ca.string()});
  const std::vector<std::vector<std::string>> signing{
      {"-s", ca.string(), "-n", pool.hosts[0].address},
      {"-s", ca.string(), "-n", "127.0.251.99"},
      {"-s", ca.string(), "-n", pool.hosts[2].address, "-V", "20200101:20200102"},
      {"-s", other_ca.string(), "-n", pool.hosts[3].address}};
  for (size_t i = 0; i < 4; ++i) {
    auto args = signing[i];
    args.insert(args.end(), {"-h", "-I", std::string("c") + std::to_string(i),
                             pool.hosts[i].host_key.string() + ".pub"});
    tpuctl::test::ssh_keygen(args);
    std::ofstream(pool.hosts[i].config, std::ios::app)
        << "HostCertificate " << pool.hosts[i].host_key.string() << "-cert.pub\n"
        << "TrustedUserCAKeys " << user_ca.string() << ".pub\n";
    reload(pool.hosts[i]);
  }
  remote::SshOptions opts;
  opts.process_config = false;
  opts.use_agent = false;
  opts.connect_timeout = std::chrono::seconds(10);
  opts.host_key_policy = remote::HostKeyPolicy::yes;
  const auto jobs = remote::make_jobs(pool.targets(), "echo in");
  const std::string plain_known = test::read_file(pool.known_hosts);

  const std::string ca_line =
      std::string("@cert-authority [127.0.251.*]:2222 ") + test::key_fields(ca.string() + ".pub") + "\n";
  write(pool.known_hosts, ca_line);
  auto r = remote::run_fanout(jobs, opts);
  REQUIRE(r);
  CHECK_MESSAGE((*r)[0].outcome == Outcome::ok, (*r)[0].error);
  CHECK((*r)[0].out == "in\n");
  CHECK((*r)[1].outcome == Outcome::host_key_unknown);
  CHECK_MESSAGE(test::contains((*r)[1].error, "is for 127.0.251.99, not for '127.0.251.13'"),
                (*r)[1].error);
  CHECK((*r)[2].outcome == Outcome::host_key_unknown);
  CHECK_MESSAGE(test::contains((*r)[2].error, "has expired"), (*r)[2].error);
  CHECK((*r)[3].outcome == Outcome::host_key_unknown);
  CHECK_MESSAGE(test::contains((*r)[3].error, "is signed by a CA (ecdsa-sha2-nistp256"),
                (*r)[3].error);
  CHECK(test::read_file(pool.known_hosts) == ca_line);

  // accept-new: a host whose certificate is not valid falls back to the plain key policy.
  opts.host_key_policy = remote::HostKeyPolicy::accept_new;
  auto fallback = remote::run_fanout({jobs[1]}, opts);
  REQUIRE(fallback);
  CHECK_MESSAGE((*fallback)[0].outcome == Outcome::ok, (*fallback)[0].error);
  CHECK(test::contains(test::read_file(pool.known_hosts), "[127.0.251.13]:2222 ssh-ed25519"));
  opts.host_key_policy = remote::HostKeyPolicy::yes;

  // @revoked, even with a plain line that accepts the key.
  const std::string revoked =
      std::string("@revoked * ") + test::key_fields(pool.hosts[0].host_key.string() + ".pub") + "\n";
  write(pool.known_hosts, plain_known + revoked);
  auto rev = remote::run_fanout({jobs[0], jobs[2]}, opts);
  REQUIRE(rev);
  CHECK((*rev)[0].outcome == Outcome::host_key_changed);
  CHECK_MESSAGE(test::contains((*rev)[0].error, "is @revoked in"), (*rev)[0].error);
  CHECK_MESSAGE((*rev)[1].outcome == Outcome::ok, (*rev)[1].error); // plain line, not revoked

  // A CA line without a pattern: the run fails before any host is contacted.
  write(pool.known_hosts,
        plain_known + "@cert-authority " + test::key_fields(ca.string() + ".pub") + "\n");
  auto bad = remote::run_fanout(jobs, opts);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().kind == ErrorKind::usage);
  CHECK(test::contains(bad.error().message, "@cert-authority line has no host pattern"));

  // A user certificate where the plain key is not authorized.
  write(pool.known_hosts, plain_known);
  write(pool.root / "authorized_keys", "");
  auto denied = remote::run_fanout({jobs[0]}, opts);
  REQUIRE(denied);
  CHECK((*denied)[0].outcome == Outcome::auth);
  tpuctl::test::ssh_keygen(
      {"-s", user_ca.string(), "-I", "u", "-n", pool.user, pool.client_key.string() + ".pub"});
  auto in = remote::run_fanout(jobs, opts);
  REQUIRE(in);
  for (const auto& h : *in) {
    CHECK_MESSAGE(h.outcome == Outcome::ok, h.error);
  }

  // The same certificate elsewhere, named by CertificateFile in the ssh_config.
  const fs::path elsewhere = tmp.path() / "u-cert.pub";
  fs::rename(pool.client_key.string() + "-cert.pub", elsewhere);
  auto moved = remote::run_fanout({jobs[0]}, opts);
  REQUIRE(moved);
  CHECK((*moved)[0].outcome == Outcome::auth);
  const fs::path config = tmp.path() / "ssh_config";
  write(config, std::string("Host 127.0.251.1?\n  CertificateFile ") + elsewhere.string() + "\n");
  opts.process_config = true;
  opts.config_file = config.string();
  auto from_config = remote::run_fanout(jobs, opts);
  REQUIRE(from_config);
  for (const auto& h : *from_config) {
    CHECK_MESSAGE(h.outcome == Outcome::ok, h.error);
  }
}
