// Jump hosts through the real binary, with real sshd servers in network namespaces this file
// creates (names tpt-jump-*): a "site" namespace holds the bastion's sshd and four workers' sshd
// on loopback addresses (127.0.252.2-5:2222) that exist only inside it; tpuctl runs in a
// "client" namespace joined to the site by a veth pair (10.254.77.1/30 <-> .2), so the bastion
// (10.254.77.2:22) is the one way in. Checked: a direct connection to a worker fails; `pool
// add-hosts --proxy-jump` then `pool ssh` on every worker over exactly one bastion connection
// (counted by `ss` in the site while all four worker sessions are open, and by the bastion's
// auth log); `pool scp`; provisioning a queued resource (the agent push) and `ssh --worker=all`;
// an interactive shell and a `-N -L` tunnel on one worker;
// a ProxyJump from an ssh_config (--ssh-config) instead of the inventory, and `ProxyJump none`;
// an unknown bastion host key refused naming the bastion; a bad --proxy-jump refused in one
// line with nothing stored. Needs root (ip netns): without it the test fails saying so.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/jump_site.hpp"
#include "util/process.hpp"
#include "util/shell_quote.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using tpuctl::test::contains;
using tpuctl::test::JumpSite;
using tpuctl::test::TempDir;

namespace {

std::map<std::string, std::string> scratch_env(const fs::path& home) {
  return {{"HOME", home.string()},
          {"XDG_STATE_HOME", (home / "state").string()},
          {"XDG_CONFIG_HOME", (home / "config").string()}};
}

// tpuctl run in the site's client namespace, with a scratch HOME and store.
struct Cli {
  const JumpSite& site;
  tpuctl::util::ProcessResult operator()(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{tpuctl::test::tpuctl_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    return site.run_in_client(argv, scratch_env(site.dir.path()));
  }

  // Adds the four workers to `pool_name`, each with its own workdir (they share this machine's
  // files), with `extra` flags.
  void add_workers(const std::string& pool_name, const std::vector<std::string>& extra) const {
    for (size_t i = 1; i < site.pool.hosts.size(); ++i) {
      const auto& h = site.pool.hosts[i];
      std::vector<std::string> args{"--pool",
                                    pool_name,
                                    "pool",
                                    "add-hosts",
                                    h.address + ":2222",
                                    "--identity-file",
                                    site.pool.client_key.string(),
                                    "--workdir",
                                    (site.dir.path() / pool_name / h.name).string()};
      args.insert(args.end(), extra.begin(), extra.end());
      auto r = (*this)(args);
      REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    }
  }
};

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("proxy jump: workers reachable only through a bastion are reached in process over one "
          "bastion connection, from the inventory or from ssh_config") {
  JumpSite site;
  const Cli cli{site};
  REQUIRE(cli({"pool", "create", "jp", "--generation", "v5e", "--shape", "4x4"}).exit_code == 0);
  REQUIRE(cli({"pool", "create", "direct", "--generation", "v5e", "--shape", "4x4"}).exit_code ==
          0);
  REQUIRE(cli({"pool", "create", "cfg", "--generation", "v5e", "--shape", "4x4"}).exit_code == 0);

  // Without the bastion the workers are out of reach.
  cli.add_workers("direct", {});
  auto direct = cli({"--pool", "direct", "pool", "ssh", "--ssh-config", site.config,
                     "--connect-timeout", "3s", "--command", "true"});
  CHECK(direct.exit_code != 0);
  CHECK(contains(direct.err, "127.0.252.2"));

  // Through the bastion, from the inventory.
  cli.add_workers("jp", {"--proxy-jump", site.hop});
  auto hosts = json::parse(cli({"--pool", "jp", "pool", "hosts", "--format", "json"}).out);
  REQUIRE(hosts.size() == 4);
  CHECK(hosts[0]["proxy_jump"] == site.hop);

  const size_t logins_before = site.bastion_logins();
  auto ssh = cli({"--pool", "jp", "pool", "ssh", "--ssh-config", site.config, "--command",
                  JumpSite::count_command((site.dir.path() / "barrier-jp").string())});
  REQUIRE_MESSAGE(ssh.exit_code == 0, ssh.err);
  for (int i = 2; i <= 5; ++i) {
    CHECK(contains(ssh.out, "[127.0.252." + std::to_string(i) + "] bastion-connections=1"));
  }
  CHECK(site.bastion_logins() == logins_before + 1); // one session for four workers

  // scp through the bastion.
  const fs::path src = site.dir.path() / "payload.txt";
  std::ofstream(src) << "through the bastion\n";
  const fs::path dest = site.dir.path() / "copied";
  fs::create_directories(dest);
  auto scp = cli({"--pool", "jp", "pool", "scp", "--ssh-config", site.config, "--hosts",
                  "127.0.252.3", src.string(), dest.string() + "/"});
  CHECK_MESSAGE(scp.exit_code == 0, scp.err);
  CHECK(tpuctl::test::read_file(dest / "payload.txt") == "through the bastion\n");

  // Provisioning (the agent's push and the preflight) and --worker=all through the bastion.
  auto qr = cli({"--pool", "jp", "qr", "create", "q1", "--accelerator-type", "v5litepod-16",
                 "--ssh-config", site.config, "--format", "json"});
  REQUIRE_MESSAGE(qr.exit_code == 0, qr.err);
  CHECK(json::parse(qr.out)["state"] == "ACTIVE");
  auto all = cli({"--pool", "jp", "ssh", "q1", "--worker=all", "--ssh-config", site.config,
                  "--command", "echo worker-ok"});
  CHECK_MESSAGE(all.exit_code == 0, all.err);
  size_t oks = 0;
  for (size_t at = all.out.find("worker-ok"); at != std::string::npos;
       at = all.out.find("worker-ok", at + 1)) {
    ++oks;
  }
  CHECK(oks == 4);

  // An interactive shell (no command; stdin a pipe, as a script drives one) and a -L tunnel, both
  // through the bastion. The shell must evaluate what it reads; the tunnel, from worker 0 to
  // worker 1's sshd, must bring that server's banner back to this side, then stop on SIGINT
  // with exit 0 (`set -m`: a background job of a script would otherwise ignore SIGINT).
  const std::string ssh_w0 = tpuctl::util::shell_quote(tpuctl::test::tpuctl_binary()) +
                             " --pool jp ssh q1 --worker 0 --ssh-config " +
                             tpuctl::util::shell_quote(site.config);
  auto shell =
      site.run_in_client({"bash", "-c", "printf 'echo shell-$((6*7))\\nexit\\n' | " + ssh_w0},
                         scratch_env(site.dir.path()));
  CHECK_MESSAGE(contains(shell.out, "shell-42"), shell.out << shell.err);
  auto tunnel = site.run_in_client(
      {"bash", "-c",
       "set -m; " + ssh_w0 +
           " -- -N -L 16006:127.0.252.3:2222 & pid=$!; for i in $(seq 400); do "
           "banner=$( (exec 3<>/dev/tcp/127.0.0.1/16006 && head -c 7 <&3) 2>/dev/null ) && "
           "[ -n \"$banner\" ] && break; sleep 0.05; done; echo \"banner=$banner\"; "
           "kill -INT $pid; wait $pid; echo \"exit=$?\""},
      scratch_env(site.dir.path()));
  CHECK_MESSAGE(contains(tunnel.out, "banner=SSH-2.0"), tunnel.out << tunnel.err);
  CHECK_MESSAGE(contains(tunnel.out, "exit=0"), tunnel.out << tunnel.err);

  auto deleted =
      cli({"--pool", "jp", "qr", "delete", "q1", "--force", "--ssh-config", site.config});
  CHECK_MESSAGE(deleted.exit_code == 0, deleted.err);

  // A ProxyJump in the ssh_config instead of the inventory; `--proxy-jump none` ignores it.
  cli.add_workers("cfg", {});
  const size_t logins_cfg = site.bastion_logins();
  auto cfg = cli({"--pool", "cfg", "pool", "ssh", "--ssh-config", site.config_jump, "--command",
                  JumpSite::count_command((site.dir.path() / "barrier-cfg").string())});
  REQUIRE_MESSAGE(cfg.exit_code == 0, cfg.err);
  for (int i = 2; i <= 5; ++i) {
    CHECK(contains(cfg.out, "[127.0.252." + std::to_string(i) + "] bastion-connections=1"));
  }
  CHECK(site.bastion_logins() == logins_cfg + 1);
  auto none = cli({"--pool", "direct", "pool", "remove-hosts", "127.0.252.[2-5]"});
  REQUIRE(none.exit_code == 0);
  cli.add_workers("direct", {"--proxy-jump", "none"});
  auto ignored = cli({"--pool", "direct", "pool", "ssh", "--ssh-config", site.config_jump,
                      "--connect-timeout", "3s", "--command", "true"});
  CHECK(ignored.exit_code != 0);

  // An unknown bastion host key under strict checking: refused, naming the bastion.
  auto unknown = cli({"--pool", "jp", "pool", "ssh", "--ssh-config", site.config_unknown, "--hosts",
                      "127.0.252.2", "--command", "true"});
  CHECK(unknown.exit_code == 5);
  CHECK_MESSAGE(contains(unknown.err, "jump host '" + site.hop + "'"), unknown.err);
  CHECK(contains(unknown.err, std::string("host key for ") + JumpSite::k_bastion));
}

TEST_CASE("proxy jump: a bad --proxy-jump is one line and exit 2, and nothing is stored") {
  TempDir dir;
  std::map<std::string, std::string> env{{"HOME", dir.path().string()},
                                         {"XDG_STATE_HOME", (dir.path() / "state").string()},
                                         {"XDG_CONFIG_HOME", (dir.path() / "config").string()}};
  REQUIRE(tpuctl::test::run_tpuctl({"pool", "create", "p", "--generation", "v5e"}, env).exit_code ==
          0);
  for (const char* bad : {"a@b:notaport", "bastion:0", "b1,,b2", "x;rm -rf /@b"}) {
    auto r =
        tpuctl::test::run_tpuctl({"pool", "add-hosts", "127.0.252.9", "--proxy-jump", bad}, env);
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    CHECK(contains(r.err, "--proxy-jump"));
  }
  auto bad = tpuctl::test::run_tpuctl(
      {"pool", "add-hosts", "127.0.252.9", "--proxy-jump", "a@b:notaport"}, env);
  CHECK(contains(bad.err, "'a@b:notaport'"));
  CHECK(contains(bad.err, "notaport"));
  auto hosts = tpuctl::test::run_tpuctl({"pool", "hosts", "--format", "json"}, env);
  CHECK(json::parse(hosts.out).empty());
}
