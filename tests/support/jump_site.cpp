#include "tests/support/jump_site.hpp"

#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "util/process.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

namespace fs = std::filesystem;

namespace tpuctl::test {

namespace {

util::ProcessResult run(const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env = {}) {
  util::ProcessOptions opt;
  opt.env_set = env;
  opt.env_unset = {"TPUCTL_STATE", "TPUCTL_POOL", "NO_COLOR", "SSH_AUTH_SOCK"};
  opt.timeout = std::chrono::minutes(5);
  auto r = util::run_process(argv, opt);
  if (!r) {
    util::ProcessResult failed;
    failed.exit_code = -1;
    failed.err = r.error().message;
    return failed;
  }
  return *r;
}

std::vector<int> netns_pids(const std::string& ns) {
  std::vector<int> pids;
  std::istringstream in(run({"ip", "netns", "pids", ns}).out);
  int pid = 0;
  while (in >> pid) {
    if (pid != ::getpid()) {
      pids.push_back(pid);
    }
  }
  return pids;
}

} // namespace

std::string JumpSite::count_command(const std::string& dir) {
  const std::string d = util::shell_quote(dir);
  return "mkdir -p " + d + " && mktemp -p " + d + " >/dev/null && for i in $(seq 600); do " +
         "[ \"$(ls " + d + " | wc -l)\" -ge 4 ] && break; sleep 0.05; done; " +
         "echo \"bastion-connections=$(ss -Htn state established '( sport = :22 )' | wc -l)\"";
}

JumpSite::JumpSite()
    : client_ns("tpt-jump-c" + std::to_string(::getpid())),
      site_ns("tpt-jump-s" + std::to_string(::getpid())) {
  REQUIRE_MESSAGE(::geteuid() == 0, "the jump host tests need root to create network namespaces "
                                    "(ip netns): run them as root");
  const std::string vc = "tjc" + std::to_string(::getpid() % 1000000);
  const std::string vs = "tjs" + std::to_string(::getpid() % 1000000);
  m_namespaces.veth = vc;
  const std::vector<std::vector<std::string>> steps = {
      {"ip", "netns", "add", client_ns},
      {"ip", "netns", "add", site_ns},
      {"ip", "link", "add", vc, "type", "veth", "peer", "name", vs},
      {"ip", "link", "set", vc, "netns", client_ns},
      {"ip", "link", "set", vs, "netns", site_ns},
      {"ip", "-n", client_ns, "addr", "add", "10.254.77.1/30", "dev", vc},
      {"ip", "-n", site_ns, "addr", "add", "10.254.77.2/30", "dev", vs},
      {"ip", "-n", client_ns, "link", "set", vc, "up"},
      {"ip", "-n", site_ns, "link", "set", vs, "up"},
      {"ip", "-n", client_ns, "link", "set", "lo", "up"},
      {"ip", "-n", site_ns, "link", "set", "lo", "up"},
  };
  for (const auto& step : steps) {
    if (step[1] == "netns") {
      m_namespaces.names.push_back(step[3]);
    }
    auto r = run(step);
    REQUIRE_MESSAGE(r.exit_code == 0, ("cannot set up the network namespaces: '" +
                                       util::join(step, " ") + "' failed: " + r.err));
  }
  remote::LocalSshdOptions o;
  o.root = dir.path() / "site";
  o.session_env = {{"SHLVL", "1"}};
  o.hosts.push_back({"bastion", "127.0.252.1", 2222});
  for (int i = 0; i < 4; ++i) {
    o.hosts.push_back({"w" + std::to_string(i), "127.0.252." + std::to_string(i + 2), 2222});
  }
  auto created = remote::create_local_sshd_pool(o);
  REQUIRE_MESSAGE(created, (created ? "" : created.error().message));
  pool = std::move(*created);
  // The bastion also listens on the site's end of the veth pair, the only address the client
  // namespace reaches; every sshd starts inside the site (start_local_sshd runs the wrapper).
  std::ofstream(pool.hosts[0].config, std::ios::app) << "ListenAddress " << k_bastion << ":22\n";
  const fs::path wrapper = dir.path() / "sshd-in-site";
  std::ofstream(wrapper) << "#!/bin/sh\nexec ip netns exec " << site_ns << " " << pool.sshd_path
                         << " \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  pool.sshd_path = wrapper.string();
  for (auto& h : pool.hosts) {
    auto s = remote::start_local_sshd(pool, h);
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
  // libssh finds ~ in the password database, not $HOME: known_hosts comes from a config, so
  // the real ~/.ssh is never read or written.
  config = (dir.path() / "ssh_config").string();
  std::ofstream(config) << "Host *\n  UserKnownHostsFile " << known << "\n";
  config_jump = (dir.path() / "ssh_config_jump").string();
  std::ofstream(config_jump) << "Host 127.0.252.*\n  ProxyJump " << hop
                             << "\nHost *\n  UserKnownHostsFile " << known << "\n";
  config_unknown = (dir.path() / "ssh_config_unknown").string();
  std::ofstream(config_unknown) << "Host *\n  UserKnownHostsFile " << known_workers << "\n";
}

JumpSite::~JumpSite() {
  for (auto& h : pool.hosts) {
    (void)remote::stop_local_sshd(h);
  }
}

JumpSite::Namespaces::~Namespaces() {
  for (const auto& ns : names) {
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
  if (!veth.empty()) {
    run({"ip", "link", "del", veth}); // only there when moving it failed
  }
}

bool JumpSite::enter_client() const {
  const std::string path = "/run/netns/" + client_ns;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

size_t JumpSite::bastion_logins() const {
  const std::string log = read_file(pool.hosts[0].log_file);
  size_t n = 0;
  for (size_t at = log.find("Accepted publickey"); at != std::string::npos;
       at = log.find("Accepted publickey", at + 1)) {
    ++n;
  }
  return n;
}

util::ProcessResult JumpSite::run_in_client(std::vector<std::string> argv,
                                            const std::map<std::string, std::string>& env) const {
  argv.insert(argv.begin(), {"ip", "netns", "exec", client_ns});
  return run(argv, env);
}

} // namespace tpuctl::test
