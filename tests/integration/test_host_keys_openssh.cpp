// OpenSSH decides whom to trust: over a table of known_hosts files and ssh_configs, the real
// `ssh` (BatchMode, StrictHostKeyChecking=yes, the same identity and config) and `tpuctl pool
// ssh --ssh-config` must both connect or both refuse, to the same real sshd (this file's block
// 127.0.130.x, port 2222), and where ssh reports the line that let the host in ("Found key in
// FILE:LINE"), tpuctl's debug log names the same file and line. Cases: plain and hashed lines
// (`ssh-keygen -H`), `[host]:port` and the bare host off port 22 ("checking without port
// identifier"), a changed key, @revoked, wildcards and negations, HostKeyAlias, several files in
// UserKnownHostsFile and GlobalKnownHostsFile, `none`, HOME differing from the password
// database, CheckHostIP, Host and Match blocks with HostName, User, Port, IdentityFile and
// IdentitiesOnly, ProxyJump and ProxyCommand through the second server, a user certificate named
// by CertificateFile (and the same key without it), and host certificates (@cert-authority with
// a wildcard, under the bare host, negated). Port 22 itself: a second case runs a server on
// 127.0.0.1:22 in a network namespace the test makes (root, as CI), where the lookup name is the
// bare host for both.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <unistd.h>

#include <doctest/doctest.h>

#include "remote/local_sshd.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/ssh_keys.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
namespace fs = std::filesystem;

namespace {

struct PoolGuard {
  remote::LocalSshdPool& pool;
  ~PoolGuard() { (void)remote::stop_local_sshd_pool(pool); }
};

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// "FILE:LINE" from ssh -v's "Found key in FILE:LINE" (or "Found CA key in ..."), "" if none.
std::string ssh_found(const std::string& err) {
  for (const auto& line : util::split(err, '\n')) {
    for (const std::string mark : {"Found key in ", "Found CA key in "}) {
      if (const size_t at = line.find(mark); at != std::string::npos) {
        std::string rest = line.substr(at + mark.size());
        while (!rest.empty() && (rest.back() == '\r' || rest.back() == ' ')) {
          rest.pop_back();
        }
        return rest;
      }
    }
  }
  return "";
}

// "FILE:LINE" from tpuctl's debug line "... found under 'NAME' in FILE line N", "" if none.
std::string tpuctl_found(const std::string& err) {
  for (const auto& line : util::split(err, '\n')) {
    const size_t under = line.find("found under '");
    if (under == std::string::npos) {
      continue;
    }
    const size_t in = line.find("' in ", under);
    const size_t at = line.find(" line ", in);
    if (in == std::string::npos || at == std::string::npos) {
      continue;
    }
    std::string number = line.substr(at + 6);
    number = number.substr(0, number.find_first_not_of("0123456789"));
    return line.substr(in + 5, at - in - 5) + ":" + number;
  }
  return "";
}

struct Case {
  std::string name;
  std::string host;       // what both are asked to reach
  std::string config;     // ssh_config lines before the common ones
  std::string known;      // the user known_hosts file (UserKnownHostsFile's first)
  std::string known2;     // a second user file
  std::string global;     // the global file
  bool connects = false;  // what OpenSSH 9.2 does (checked, not assumed)
  std::map<std::string, std::string> env; // for both
};

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("host keys: ssh and tpuctl make the same decision from the same known_hosts, "
          "ssh_config, certificates and servers, and name the same line") {
  test::TempDir tmp;
  remote::LocalSshdOptions lo;
  lo.root = tmp.path() / "pool";
  lo.session_env = {{"SHLVL", "1"}};
  lo.hosts = {{"a", "127.0.130.2", 2222}, {"b", "127.0.130.3", 2222}};
  auto created = remote::create_local_sshd_pool(lo);
  REQUIRE_MESSAGE(created, created.error().message);
  remote::LocalSshdPool pool = std::move(*created);
  PoolGuard guard{pool};
  // Host a also serves a certificate from `ca` for its address; b serves none.
  const fs::path ca = tmp.path() / "ca";
  test::ssh_keygen({"-t", "ed25519", "-N", "", "-C", "", "-f", ca.string()});
  test::ssh_keygen({"-s", ca.string(), "-h", "-I", "a", "-n", pool.hosts[0].address,
                    pool.hosts[0].host_key.string() + ".pub"});
  std::ofstream(pool.hosts[0].config, std::ios::app)
      << "HostCertificate " << pool.hosts[0].host_key.string() << "-cert.pub\n";
  // Both servers admit users whose certificate `user_ca` signed; `user` is a key no server has
  // in authorized_keys, with that certificate under a name ssh does not look for by itself.
  const fs::path user_ca = tmp.path() / "user_ca", user_key = tmp.path() / "user";
  test::ssh_keygen({"-t", "ed25519", "-N", "", "-C", "", "-f", user_ca.string()});
  test::ssh_keygen({"-t", "ed25519", "-N", "", "-C", "", "-f", user_key.string()});
  test::ssh_keygen({"-s", user_ca.string(), "-I", "u", "-n", pool.user, user_key.string() + ".pub"});
  const fs::path user_cert = tmp.path() / "user-certificate.pub";
  fs::rename(user_key.string() + "-cert.pub", user_cert);
  for (const auto& h : pool.hosts) {
    std::ofstream(h.config, std::ios::app) << "TrustedUserCAKeys " << user_ca.string() << ".pub\n";
  }
  auto started = remote::start_local_sshd_pool(pool);
  REQUIRE_MESSAGE(started, started.error().message);

  const std::string a = pool.hosts[0].address, b = pool.hosts[1].address;
  const std::string key_a = test::key_fields(pool.hosts[0].host_key.string() + ".pub");
  const std::string key_b = test::key_fields(pool.hosts[1].host_key.string() + ".pub");
  const fs::path other = tmp.path() / "other";
  test::ssh_keygen({"-t", "ed25519", "-N", "", "-C", "", "-f", other.string()});
  const std::string key_other = test::key_fields(other.string() + ".pub");
  const std::string ca_key = test::key_fields(ca.string() + ".pub");
  const fs::path kh = tmp.path() / "kh", kh2 = tmp.path() / "kh2", gkh = tmp.path() / "gkh";
  const fs::path hashed = tmp.path() / "hashed";
  // ssh-keygen -H hashes a file of plain lines in place: the real tool's hashing.
  auto hash = [&](const std::string& lines) {
    write(hashed, lines);
    test::ssh_keygen({"-H", "-f", hashed.string()});
    std::error_code ec;
    fs::remove(hashed.string() + ".old", ec);
    return test::read_file(hashed);
  };
  const std::string pa = "[" + a + "]:2222";

  // tpuctl's pool: one host record per name the cases reach, no port, user or key in them.
  const fs::path home = tmp.path() / "home";
  fs::create_directories(home);
  const std::map<std::string, std::string> tenv{{"HOME", home.string()},
                                                {"XDG_STATE_HOME", (home / "state").string()},
                                                {"XDG_CONFIG_HOME", (home / "config").string()}};
  auto t = [&](std::vector<std::string> args, std::map<std::string, std::string> extra = {}) {
    auto env = tenv;
    for (auto& [k, v] : extra) {
      env[k] = v;
    }
    return test::run_tpuctl(args, env);
  };
  REQUIRE(t({"pool", "create", "d", "--generation", "v5e", "--shape", "4x2"}).exit_code == 0);
  for (const std::string& h : std::vector<std::string>{a, "w1"}) {
    auto added = t({"--pool", "d", "pool", "add-hosts", h});
    REQUIRE_MESSAGE(added.exit_code == 0, added.err);
  }

  const std::string common = "Host *\n  Port 2222\n  User " + pool.user +
                             "\n  IdentitiesOnly yes\n  BatchMode yes\n  StrictHostKeyChecking yes\n";
  const fs::path cfg = tmp.path() / "ssh_config";
  const std::string files = "  UserKnownHostsFile " + kh.string() + " " + kh2.string() +
                            "\n  GlobalKnownHostsFile " + gkh.string() + "\n";
  const std::vector<Case> cases{
      {"[host]:port line", a, "Host *\n" + files, pa + " " + key_a + "\n", "", "", true, {}},
      {"the bare host, off port 22", a, "Host *\n" + files, a + " " + key_a + "\n", "", "", true,
       {}},
      {"a hashed [host]:port line", a, "Host *\n" + files, hash(pa + " " + key_a + "\n"), "", "",
       true, {}},
      {"a hashed bare host", a, "Host *\n" + files, hash(a + " " + key_a + "\n"), "", "", true,
       {}},
      {"nothing known", a, "Host *\n" + files, b + " " + key_b + "\n", "", "", false, {}},
      {"a changed key", a, "Host *\n" + files, pa + " " + key_other + "\n", "", "", false, {}},
      {"a changed key under the bare host only", a, "Host *\n" + files,
       a + " " + key_other + "\n", "", "", false, {}},
      {"a changed key beside the right one", a, "Host *\n" + files,
       pa + " " + key_other + "\n" + pa + " " + key_a + "\n", "", "", true, {}},
      {"@revoked beside a plain line", a, "Host *\n" + files,
       pa + " " + key_a + "\n@revoked " + pa + " " + key_a + "\n", "", "", false, {}},
      {"a wildcard", a, "Host *\n" + files, "[127.0.130.*]:2222 " + key_a + "\n", "", "", true,
       {}},
      {"a negated pattern", a, "Host *\n" + files,
       "[127.0.130.*]:2222,!" + pa + " " + key_a + "\n", "", "", false, {}},
      {"the second UserKnownHostsFile", a, "Host *\n" + files, "", pa + " " + key_a + "\n", "",
       true, {}},
      {"GlobalKnownHostsFile", a, "Host *\n" + files, "", "", pa + " " + key_a + "\n", true, {}},
      {"UserKnownHostsFile none, the global file", a,
       "Host *\n  UserKnownHostsFile none\n  GlobalKnownHostsFile " + gkh.string() + "\n", "", "",
       pa + " " + key_a + "\n", true, {}},
      {"HostKeyAlias", a, "Host *\n  HostKeyAlias Pod-A\n" + files, "pod-a " + key_a + "\n", "",
       "", true, {}},
      {"HostKeyAlias hides [host]:port", a, "Host *\n  HostKeyAlias pod-a\n" + files,
       pa + " " + key_a + "\n", "", "", false, {}},
      {"Host and HostName", "w1", "Host w1\n  HostName " + a + "\nHost *\n" + files,
       pa + " " + key_a + "\n", "", "", true, {}},
      {"Match host after HostName", "w1",
       "Host w1\n  HostName " + a + "\nMatch host " + a + "\n  UserKnownHostsFile " +
           kh2.string() + "\nHost *\n" + files,
       pa + " " + key_a + "\n", "", "", false, {}},
      {"CheckHostIP on loopback", a, "Host *\n  CheckHostIP yes\n" + files,
       pa + " " + key_a + "\n", "", "", true, {}},
      {"~ is the password database's home, not HOME", a,
       "Host *\n  UserKnownHostsFile ~/.ssh/tpuctl-test-absent-kh\n  GlobalKnownHostsFile none\n",
       "", "", "", false, {{"HOME", (tmp.path() / "fakehome").string()}}},
      {"ProxyJump through the other server", a,
       "Host " + a + "\n  ProxyJump " + b + "\nHost *\n" + files,
       pa + " " + key_a + "\n[" + b + "]:2222 " + key_b + "\n", "", "", true, {}},
      {"ProxyJump: the bastion unknown", a,
       "Host " + a + "\n  ProxyJump " + b + "\nHost *\n" + files, pa + " " + key_a + "\n", "",
       "", false, {}},
      {"@cert-authority with a wildcard", a, "Host *\n" + files,
       "@cert-authority [127.0.130.*]:2222 " + ca_key + "\n", "", "", true, {}},
      {"@cert-authority under the bare host", a, "Host *\n" + files,
       "@cert-authority 127.0.130.* " + ca_key + "\n", "", "", true, {}},
      {"@cert-authority negated for the host", a, "Host *\n" + files,
       "@cert-authority [127.0.130.*]:2222,!" + pa + " " + ca_key + "\n", "", "", false, {}},
      {"@cert-authority in the global file", a, "Host *\n" + files, "", "",
       "@cert-authority [127.0.130.*]:2222 " + ca_key + "\n", true, {}},
      // libssh runs a ProxyCommand itself (tpuctl makes only ProxyJump's hop in-process).
      {"ProxyCommand through the other server", a,
       "Host " + a + "\n  ProxyCommand ssh -F " + cfg.string() + " -W %h:%p " + b +
           "\nHost *\n" + files,
       pa + " " + key_a + "\n[" + b + "]:2222 " + key_b + "\n", "", "", true, {}},
      {"ProxyCommand: the target's key unknown", a,
       "Host " + a + "\n  ProxyCommand ssh -F " + cfg.string() + " -W %h:%p " + b +
           "\nHost *\n" + files,
       "[" + b + "]:2222 " + key_b + "\n", "", "", false, {}},
      {"CertificateFile: a user certificate the servers trust", a,
       "Host *\n  CertificateFile " + user_cert.string() + "\n" + files, pa + " " + key_a + "\n",
       "", "", true, {}},
      {"no CertificateFile: a key the servers do not know", a, "Host *\n" + files,
       pa + " " + key_a + "\n", "", "", false, {}},
  };
  // The IdentityFile of both: the pool's key, but the user key for the certificate cases.
  auto identity = [&](const Case& c) {
    return c.name.find("CertificateFile") != std::string::npos ? user_key.string()
                                                               : pool.client_key.string();
  };
  fs::create_directories(tmp.path() / "fakehome" / ".ssh");
  write(tmp.path() / "fakehome" / ".ssh" / "tpuctl-test-absent-kh", pa + " " + key_a + "\n");
  int agreed = 0;
  for (const Case& c : cases) {
    CAPTURE(c.name);
    write(cfg, c.config + common + "  IdentityFile " +
                   identity(c) + "\n");
    write(kh, c.known);
    write(kh2, c.known2);
    write(gkh, c.global);
    util::ProcessOptions o;
    o.timeout = std::chrono::seconds(60);
    o.env_set = c.env;
    auto ssh = util::run_process({"ssh", "-F", cfg.string(), "-o", "BatchMode=yes", "-o",
                                  "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=20", "-v",
                                  c.host, "true"},
                                 o);
    REQUIRE(ssh);
    auto tp = t({"--pool", "d", "--verbosity", "debug", "pool", "ssh", "--hosts", c.host,
                 "--ssh-config", cfg.string(), "--connect-timeout", "20s", "--command", "true"},
                c.env);
    const bool ssh_in = ssh->exit_code == 0;
    const bool tpuctl_in = tp.exit_code == 0;
    CHECK_MESSAGE(ssh_in == c.connects, "ssh: " << ssh->err);
    CHECK_MESSAGE(tpuctl_in == ssh_in, "tpuctl: " << tp.err);
    if (!tpuctl_in) {
      CHECK_MESSAGE(tp.exit_code == 5, tp.err); // refused for its host key, nothing else
    }
    // The line that let it in: the same file and line (a jump's and a certificate's CA lines
    // are reported by ssh for the bastion and the CA, so only plain keys are compared).
    const std::string where = ssh_found(ssh->err);
    if (ssh_in && c.name.find("Proxy") == std::string::npos &&
        c.name.find("ert") == std::string::npos) {
      CHECK(!where.empty());
      CHECK(tpuctl_found(tp.err) == where);
    }
    agreed += tpuctl_in == ssh_in ? 1 : 0;
  }
  CHECK(agreed == static_cast<int>(cases.size()));
}

TEST_CASE("host keys on port 22 (sshd in a network namespace of the test's own): the bare host "
          "is the name both look up, and a [host]:22 line is not it") {
  REQUIRE_MESSAGE(::geteuid() == 0, "this test makes a network namespace (ip netns): run it as "
                                    "root, as CI does");
  test::TempDir tmp;
  const std::string ns = "tpt-kh22-" + std::to_string(::getpid());
  auto ip = [](std::vector<std::string> argv) {
    argv.insert(argv.begin(), "ip");
    auto r = util::run_process(argv);
    REQUIRE(r);
    return *r;
  };
  REQUIRE(ip({"netns", "add", ns}).exit_code == 0);
  // Owns the servers: stopped by pid, then the namespace deleted, however the test ends.
  struct Namespace {
    std::string name;
    std::optional<remote::LocalSshdPool> pool;
    ~Namespace() {
      if (pool) {
        (void)remote::stop_local_sshd_pool(*pool);
      }
      (void)util::run_process({"ip", "netns", "del", name});
    }
  } guard{ns, std::nullopt};
  REQUIRE(ip({"netns", "exec", ns, "ip", "link", "set", "lo", "up"}).exit_code == 0);
  remote::LocalSshdOptions lo;
  lo.root = tmp.path() / "pool";
  lo.session_env = {{"SHLVL", "1"}};
  lo.hosts = {{"c", "127.0.0.1", 22}};
  auto created = remote::create_local_sshd_pool(lo);
  REQUIRE_MESSAGE(created, created.error().message);
  guard.pool = std::move(*created);
  remote::LocalSshdPool& pool = *guard.pool;
  const fs::path wrapper = tmp.path() / "sshd-in-namespace";
  write(wrapper, "#!/bin/sh\nexec ip netns exec " + ns + " " + pool.sshd_path + " \"$@\"\n");
  fs::permissions(wrapper, fs::perms::owner_all);
  pool.sshd_path = wrapper.string();
  auto started = remote::start_local_sshd_pool(pool);
  REQUIRE_MESSAGE(started, started.error().message);

  const std::string key = test::key_fields(pool.hosts[0].host_key.string() + ".pub");
  const fs::path kh = tmp.path() / "kh", cfg = tmp.path() / "ssh_config";
  write(cfg, "Host *\n  User " + pool.user + "\n  IdentityFile " + pool.client_key.string() +
                 "\n  IdentitiesOnly yes\n  UserKnownHostsFile " + kh.string() +
                 "\n  GlobalKnownHostsFile none\n");
  const fs::path home = tmp.path() / "home";
  fs::create_directories(home);
  util::ProcessOptions o;
  o.timeout = std::chrono::seconds(60);
  o.env_set = {{"HOME", home.string()},
               {"XDG_STATE_HOME", (home / "state").string()},
               {"XDG_CONFIG_HOME", (home / "config").string()}};
  auto in_ns = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
    auto r = util::run_process(argv, o);
    REQUIRE(r);
    return *r;
  };
  REQUIRE(in_ns({test::tpuctl_binary(), "pool", "create", "d", "--generation", "v5e"}).exit_code ==
          0);
  REQUIRE(in_ns({test::tpuctl_binary(), "--pool", "d", "pool", "add-hosts", "127.0.0.1"})
              .exit_code == 0);
  const fs::path hashed = tmp.path() / "hashed";
  write(hashed, "127.0.0.1 " + key + "\n");
  test::ssh_keygen({"-H", "-f", hashed.string()});
  const std::vector<std::pair<std::string, std::string>> cases{
      {"the bare host", "127.0.0.1 " + key + "\n"},
      {"a hashed bare host", test::read_file(hashed)},
      {"[host]:22", "[127.0.0.1]:22 " + key + "\n"},
      {"[host]:2222 only", "[127.0.0.1]:2222 " + key + "\n"},
      {"a changed key under the bare host", "127.0.0.1 " + test::key_fields(pool.client_key.string() + ".pub") + "\n"},
  };
  int agreed = 0, connected = 0;
  for (const auto& [name, known] : cases) {
    CAPTURE(name);
    write(kh, known);
    auto ssh = in_ns({"ssh", "-F", cfg.string(), "-o", "BatchMode=yes", "-o",
                      "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=20", "-v", "127.0.0.1",
                      "true"});
    auto tp = in_ns({test::tpuctl_binary(), "--pool", "d", "--verbosity", "debug", "pool", "ssh",
                     "--hosts", "127.0.0.1", "--ssh-config", cfg.string(), "--command", "true"});
    const bool ssh_in = ssh.exit_code == 0, tpuctl_in = tp.exit_code == 0;
    CHECK_MESSAGE(tpuctl_in == ssh_in, "ssh: " << ssh.err << "\ntpuctl: " << tp.err);
    if (ssh_in) {
      CHECK(tpuctl_found(tp.err) == ssh_found(ssh.err));
    } else {
      CHECK_MESSAGE(tp.exit_code == 5, tp.err);
    }
    agreed += tpuctl_in == ssh_in ? 1 : 0;
    connected += ssh_in ? 1 : 0;
  }
  CHECK(agreed == static_cast<int>(cases.size()));
  CHECK(connected == 2); // what OpenSSH 9.2 does: the bare host lines only
}
