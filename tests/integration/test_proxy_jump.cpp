// Jump hosts through the real binary, with real sshd servers in network namespaces this file
// creates (names tpt-jump-*): a "site" namespace holds the bastion's sshd and four workers' sshd
// on loopback addresses (127.0.252.2-5:2222) that exist only inside it; tpuctl runs in a
// "client" namespace joined to the site by a veth pair (10.254.77.1/30 <-> .2), so the bastion
// (10.254.77.2:22) is the one way in. Checked: a direct connection to a worker fails; `pool
// add-hosts --proxy-jump` then `pool ssh` on every worker over exactly one bastion connection
// (counted by `ss` in the site while all four worker sessions are open, and by the bastion's
// auth log); `pool scp`; provisioning a queued resource (the agent push) and `ssh --worker=all`;
// a ProxyJump from an ssh_config (--ssh-config) instead of the inventory, and `ProxyJump none`;
// an unknown bastion host key refused naming the bastion; a bad --proxy-jump refused in one
// line with nothing stored. Needs root (ip netns): without it the test fails saying so.
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "remote/local_sshd.hpp"
#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using tpuctl::test::contains;
using tpuctl::test::TempDir;

namespace {

constexpr const char* k_bastion = "10.254.77.2";
constexpr const char* k_client_addr = "10.254.77.1/30";
constexpr const char* k_site_addr = "10.254.77.2/30";

tpuctl::util::ProcessResult run(const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& env = {}) {
  tpuctl::util::ProcessOptions opt;
  opt.env_set = env;
  opt.env_unset = {"TPUCTL_STATE", "TPUCTL_POOL", "NO_COLOR", "SSH_AUTH_SOCK"};
  opt.timeout = std::chrono::minutes(5);
  auto r = tpuctl::util::run_process(argv, opt);
  if (!r) {
    tpuctl::util::ProcessResult failed;
    failed.exit_code = -1;
    failed.err = r.error().message;
    return failed;
  }
  return *r;
}

std::vector<int> netns_pids(const std::string& ns) {
  std::vector<int> pids;
  auto r = run({"ip", "netns", "pids", ns});
  std::istringstream in(r.out);
  int pid = 0;
  while (in >> pid) {
    if (pid != ::getpid()) {
      pids.push_back(pid);
    }
  }
  return pids;
}

// The two namespaces and the veth pair; the destructor kills every process left in them (each
// one started by this test, by pid) and deletes them, also when the test failed.
struct Namespaces {
  std::string client = "tpt-jump-c" + std::to_string(::getpid());
  std::string site = "tpt-jump-s" + std::to_string(::getpid());
  std::string why; // empty when both are up

  Namespaces() {
    if (::geteuid() != 0) {
      why = "this test needs root to create network namespaces (ip netns); run it as root";
      return;
    }
    const std::string vc = "tjc" + std::to_string(::getpid() % 1000000);
    const std::string vs = "tjs" + std::to_string(::getpid() % 1000000);
    const std::vector<std::vector<std::string>> steps = {
        {"ip", "netns", "add", client},
        {"ip", "netns", "add", site},
        {"ip", "link", "add", vc, "type", "veth", "peer", "name", vs},
        {"ip", "link", "set", vc, "netns", client},
        {"ip", "link", "set", vs, "netns", site},
        {"ip", "-n", client, "addr", "add", k_client_addr, "dev", vc},
        {"ip", "-n", site, "addr", "add", k_site_addr, "dev", vs},
        {"ip", "-n", client, "link", "set", vc, "up"},
        {"ip", "-n", site, "link", "set", vs, "up"},
        {"ip", "-n", client, "link", "set", "lo", "up"},
        {"ip", "-n", site, "link", "set", "lo", "up"},
    };
    for (const auto& step : steps) {
      auto r = run(step);
      if (r.exit_code != 0) {
        why = "cannot set up the network namespaces ('" + tpuctl::util::join(step, " ") +
              "' failed: " + r.err + ")";
        return;
      }
    }
  }

  ~Namespaces() {
    for (const auto& ns : {client, site}) {
      for (int round = 0; round < 2; ++round) {
        for (int pid : netns_pids(ns)) {
          ::kill(pid, round == 0 ? SIGTERM : SIGKILL);
        }
        for (int i = 0; i < 50 && !netns_pids(ns).empty(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }
      run({"ip", "netns", "del", ns}); // the veth pair goes with them
    }
  }
};

struct JumpSite {
  Namespaces ns;
  TempDir dir;
  tpuctl::remote::LocalSshdPool pool;
  std::map<std::string, std::string> env;
  std::string known;          // workers and bastion
  std::string known_workers;  // workers only: the bastion is unknown
  std::string config;         // known_hosts only
  std::string config_jump;    // ProxyJump for the workers
  std::string config_unknown; // the bastion unknown
  std::string hop;            // root@10.254.77.2:22

  JumpSite() {
    REQUIRE_MESSAGE(ns.why.empty(), ns.why);
    tpuctl::remote::LocalSshdOptions o;
    o.root = dir.path() / "site";
    o.session_env = {{"SHLVL", "1"}};
    o.hosts.push_back({"bastion", "127.0.252.1", 2222});
    for (int i = 0; i < 4; ++i) {
      o.hosts.push_back({"w" + std::to_string(i), "127.0.252." + std::to_string(i + 2), 2222});
    }
    auto created = tpuctl::remote::create_local_sshd_pool(o);
    REQUIRE_MESSAGE(created, (created ? "" : created.error().message));
    pool = std::move(*created);
    // The bastion also listens on the site's end of the veth pair: the only address the
    // client namespace reaches.
    std::ofstream(pool.hosts[0].config, std::ios::app) << "ListenAddress " << k_bastion << ":22\n";
    // sshd started inside the site namespace (start_local_sshd runs this wrapper).
    const fs::path wrapper = dir.path() / "sshd-in-site";
    std::ofstream(wrapper) << "#!/bin/sh\nexec ip netns exec " << ns.site << " " << pool.sshd_path
                           << " \"$@\"\n";
    fs::permissions(wrapper, fs::perms::owner_all);
    pool.sshd_path = wrapper.string();
    for (auto& h : pool.hosts) {
      auto s = tpuctl::remote::start_local_sshd(pool, h);
      REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    }
    hop = pool.user + "@" + k_bastion + ":22";
    std::string workers;
    for (size_t i = 1; i < pool.hosts.size(); ++i) {
      workers += pool.hosts[i].known_hosts_line + "\n";
    }
    const std::string& b = pool.hosts[0].known_hosts_line;
    known = (dir.path() / "known_hosts").string();
    known_workers = (dir.path() / "known_hosts_workers").string();
    std::ofstream(known) << workers << k_bastion << b.substr(b.find(' ')) << "\n";
    std::ofstream(known_workers) << workers;
    // libssh finds ~ in the password database, not $HOME: known_hosts comes from a config so
    // the real ~/.ssh is never read or written.
    config = (dir.path() / "ssh_config").string();
    std::ofstream(config) << "Host *\n  UserKnownHostsFile " << known << "\n";
    config_jump = (dir.path() / "ssh_config_jump").string();
    std::ofstream(config_jump) << "Host 127.0.252.*\n  ProxyJump " << hop
                               << "\nHost *\n  UserKnownHostsFile " << known << "\n";
    config_unknown = (dir.path() / "ssh_config_unknown").string();
    std::ofstream(config_unknown) << "Host *\n  UserKnownHostsFile " << known_workers << "\n";
    env = {{"HOME", dir.path().string()},
           {"XDG_STATE_HOME", (dir.path() / "state").string()},
           {"XDG_CONFIG_HOME", (dir.path() / "config").string()}};
  }

  ~JumpSite() {
    for (auto& h : pool.hosts) {
      (void)tpuctl::remote::stop_local_sshd(h);
    }
  }

  // tpuctl, run in the client namespace.
  tpuctl::util::ProcessResult tpuctl(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{"ip", "netns", "exec", ns.client, tpuctl::test::tpuctl_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, env);
  }

  // Adds the four workers to `pool_name`, each with its own workdir (they share this machine's
  // files), with `extra` flags.
  void add_workers(const std::string& pool_name, const std::vector<std::string>& extra) const {
    for (size_t i = 1; i < pool.hosts.size(); ++i) {
      const auto& h = pool.hosts[i];
      std::vector<std::string> args{"--pool",
                                    pool_name,
                                    "pool",
                                    "add-hosts",
                                    h.address + ":2222",
                                    "--identity-file",
                                    pool.client_key.string(),
                                    "--workdir",
                                    (dir.path() / pool_name / h.name).string()};
      args.insert(args.end(), extra.begin(), extra.end());
      auto r = tpuctl(args);
      REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    }
  }

  size_t bastion_logins() const {
    std::string log = tpuctl::test::read_file(pool.hosts[0].log_file);
    size_t n = 0;
    for (size_t at = log.find("Accepted publickey"); at != std::string::npos;
         at = log.find("Accepted publickey", at + 1)) {
      ++n;
    }
    return n;
  }
};

// Each worker waits until all four worker sessions are open (the bastion's forwarded connections
// to port 2222), then prints how many TCP connections the bastion's port 22 holds.
const char* k_count_command =
    "for i in $(seq 300); do "
    "[ \"$(ss -Htn state established '( dport = :2222 )' | wc -l)\" -ge 4 ] && break; "
    "sleep 0.1; done; "
    "echo \"bastion-connections=$(ss -Htn state established '( sport = :22 )' | wc -l)\"";

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("proxy jump: workers reachable only through a bastion are reached in process over one "
          "bastion connection, from the inventory or from ssh_config") {
  JumpSite site;
  REQUIRE(
      site.tpuctl({"pool", "create", "jp", "--generation", "v5e", "--shape", "4x4"}).exit_code ==
      0);
  REQUIRE(site.tpuctl({"pool", "create", "direct", "--generation", "v5e", "--shape", "4x4"})
              .exit_code == 0);
  REQUIRE(
      site.tpuctl({"pool", "create", "cfg", "--generation", "v5e", "--shape", "4x4"}).exit_code ==
      0);

  // Without the bastion the workers are out of reach.
  site.add_workers("direct", {});
  auto direct = site.tpuctl({"--pool", "direct", "pool", "ssh", "--ssh-config", site.config,
                             "--connect-timeout", "3s", "--command", "true"});
  CHECK(direct.exit_code != 0);
  CHECK(contains(direct.err, "127.0.252.2"));

  // Through the bastion, from the inventory.
  site.add_workers("jp", {"--proxy-jump", site.hop});
  auto hosts = json::parse(site.tpuctl({"--pool", "jp", "pool", "hosts", "--format", "json"}).out);
  REQUIRE(hosts.size() == 4);
  CHECK(hosts[0]["proxy_jump"] == site.hop);

  const size_t logins_before = site.bastion_logins();
  auto ssh = site.tpuctl(
      {"--pool", "jp", "pool", "ssh", "--ssh-config", site.config, "--command", k_count_command});
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
  auto scp = site.tpuctl({"--pool", "jp", "pool", "scp", "--ssh-config", site.config, "--hosts",
                          "127.0.252.3", src.string(), dest.string() + "/"});
  CHECK_MESSAGE(scp.exit_code == 0, scp.err);
  CHECK(tpuctl::test::read_file(dest / "payload.txt") == "through the bastion\n");

  // Provisioning (the agent's push and the preflight) and --worker=all through the bastion.
  auto qr = site.tpuctl({"--pool", "jp", "qr", "create", "q1", "--accelerator-type", "v5litepod-16",
                         "--ssh-config", site.config, "--format", "json"});
  REQUIRE_MESSAGE(qr.exit_code == 0, qr.err);
  CHECK(json::parse(qr.out)["state"] == "ACTIVE");
  auto all = site.tpuctl({"--pool", "jp", "ssh", "q1", "--worker=all", "--ssh-config", site.config,
                          "--command", "echo worker-ok"});
  CHECK_MESSAGE(all.exit_code == 0, all.err);
  size_t oks = 0;
  for (size_t at = all.out.find("worker-ok"); at != std::string::npos;
       at = all.out.find("worker-ok", at + 1)) {
    ++oks;
  }
  CHECK(oks == 4);
  auto deleted = site.tpuctl({"--pool", "jp", "qr", "delete", "q1", "--ssh-config", site.config});
  CHECK_MESSAGE(deleted.exit_code == 0, deleted.err);

  // A ProxyJump in the ssh_config instead of the inventory; `--proxy-jump none` ignores it.
  site.add_workers("cfg", {});
  const size_t logins_cfg = site.bastion_logins();
  auto cfg = site.tpuctl({"--pool", "cfg", "pool", "ssh", "--ssh-config", site.config_jump,
                          "--command", k_count_command});
  REQUIRE_MESSAGE(cfg.exit_code == 0, cfg.err);
  for (int i = 2; i <= 5; ++i) {
    CHECK(contains(cfg.out, "[127.0.252." + std::to_string(i) + "] bastion-connections=1"));
  }
  CHECK(site.bastion_logins() == logins_cfg + 1);
  auto none = site.tpuctl({"--pool", "direct", "pool", "remove-hosts", "127.0.252.[2-5]"});
  REQUIRE(none.exit_code == 0);
  site.add_workers("direct", {"--proxy-jump", "none"});
  auto ignored = site.tpuctl({"--pool", "direct", "pool", "ssh", "--ssh-config", site.config_jump,
                              "--connect-timeout", "3s", "--command", "true"});
  CHECK(ignored.exit_code != 0);

  // An unknown bastion host key under strict checking: refused, naming the bastion.
  auto unknown = site.tpuctl({"--pool", "jp", "pool", "ssh", "--ssh-config", site.config_unknown,
                              "--hosts", "127.0.252.2", "--command", "true"});
  CHECK(unknown.exit_code == 5);
  CHECK_MESSAGE(contains(unknown.err, "jump host '" + site.hop + "'"), unknown.err);
  CHECK(contains(unknown.err, std::string("host key for ") + k_bastion));
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
