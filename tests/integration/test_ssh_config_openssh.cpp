// OpenSSH decides what an ssh_config means: for a table of configs and hosts, tpuctl's resolver
// (remote/ssh_config.hpp) must give what `ssh -G` (Debian's openssh-client, the real ssh) prints
// for every option tpuctl decides itself: the known_hosts files in order (with ~, %-tokens and
// ${VAR} expanded), HostName, Port, User, HostKeyAlias, HashKnownHosts, CheckHostIP,
// IdentitiesOnly, IdentityFile and CertificateFile lists, ProxyJump and ProxyCommand. Cases
// cover Host blocks with negations and wildcards, first-value-wins, Match host / originalhost /
// user / localuser / exec / all / final, Include with globs, `Keyword=value`, quotes and
// comments, `none`, and `-p`/`-l` given on the command line (the inventory's port and user).
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <doctest/doctest.h>

#include "remote/ssh_config.hpp"
#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
namespace fs = std::filesystem;

namespace {

// `ssh -G`'s answer, keyword -> values (one per line it printed, in order).
std::map<std::string, std::vector<std::string>> ssh_g(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"ssh", "-G"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = util::run_process(argv, {});
  REQUIRE(r);
  REQUIRE_MESSAGE(r->exit_code == 0, r->err);
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream in(r->out);
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.find(' ');
    if (sp != std::string::npos) {
      out[line.substr(0, sp)].push_back(line.substr(sp + 1));
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) {
    s += (s.empty() ? "" : " ") + x;
  }
  return s.empty() ? "none" : s;
}

std::string one(const std::map<std::string, std::vector<std::string>>& g, const std::string& k) {
  auto it = g.find(k);
  return it == g.end() || it->second.empty() ? "" : it->second[0];
}

struct Case {
  std::string name;
  std::string config;
  std::string host;
  uint16_t port = 0;
  std::string user;
};

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("ssh_config: tpuctl's resolver gives what ssh -G gives, for every option tpuctl decides") {
  test::TempDir tmp;
  const std::string d = tmp.path().string();
  fs::create_directories(tmp.path() / "inc");
  std::ofstream(tmp.path() / "inc" / "a.conf") << "Host inc-*\n  HostKeyAlias FromInclude\n"
                                                 "  Port 2301\n";
  std::ofstream(tmp.path() / "inc" / "b.conf") << "Host *\n  UserKnownHostsFile " << d
                                                 << "/from-b\n";
  std::ofstream(tmp.path() / "exists") << "";
  ::setenv("TPUCTL_TEST_KH_DIR", (d + "/env").c_str(), 1);

  const std::vector<Case> cases{
      {"two user files, ~ and tokens", "Host *\n  UserKnownHostsFile ~/kh1 " + d +
                                           "/kh-%h-%p-%r-%u %d/kh3 " + d + "/%n-%k\n",
       "Node1.Example", 2222, "alice"},
      {"defaults", "", "plain", 0, ""},
      {"global files and none", "Host a*\n  GlobalKnownHostsFile " + d + "/g1 " + d +
                                    "/g2\nHost *\n  UserKnownHostsFile none\n",
       "alpha", 0, ""},
      {"negated Host pattern", "Host *.pod !bad.pod\n  Port 2001\n  User podder\nHost *\n  "
                               "Port 2002\n",
       "bad.pod", 0, ""},
      {"first value wins", "Host w*\n  Port 2101\n  HostName real-%h.example\nHost *\n  Port "
                           "2102\n  HostName other\n  User second\n",
       "w7", 0, ""},
      {"-p and -l win over the config", "Host *\n  Port 2201\n  User cfg\n", "h", 2299, "cli"},
      {"HostKeyAlias is lowercased, and names %k", "Host *\n  HostKeyAlias Pod-Alias\n  "
                                                    "UserKnownHostsFile " + d + "/k-%k\n",
       "h2", 2200, ""},
      {"Match host sees the HostName", "Host short\n  HostName long.example\nMatch host "
                                       "long.example\n  Port 2401\n",
       "short", 0, ""},
      {"Match originalhost", "Host x\n  HostName y\nMatch originalhost x\n  User orig\n", "x",
       0, ""},
      {"Match user and localuser", "Match user bob\n  Port 2501\nMatch localuser root,"
                                   + std::string(::getenv("USER") ? ::getenv("USER") : "root") +
                                   "\n  IdentitiesOnly yes\n",
       "h", 0, "bob"},
      {"Match exec", "Match exec \"test -e " + d + "/exists\"\n  CheckHostIP yes\nMatch exec "
                     "\"test -e " + d + "/missing\"\n  HashKnownHosts yes\n",
       "h", 0, ""},
      {"Match all and negation", "Match !host nothere\n  Port 2601\nMatch all\n  User all\n",
       "h", 0, ""},
      {"Match final", "Host f\n  HostName final.example\nMatch final host final.example\n  "
                      "User fin\n",
       "f", 0, ""},
      {"Include with a glob, inside a Host block", "Host inc-*\n  Include " + d +
                                                       "/inc/*.conf\nHost *\n  Port 2302\n",
       "inc-1", 0, ""},
      {"Include not applied outside its block", "Host nomatch\n  Include " + d +
                                                    "/inc/*.conf\nHost *\n  Port 2303\n",
       "inc-2", 0, ""},
      {"Keyword=value, quotes, comments", "# leading comment\nHost=*\n  Port = 2701 # port\n  "
                                          "UserKnownHostsFile \"" + d + "/with space\" " + d +
                                          "/second\n  User=\"q\"\n",
       "h", 0, ""},
      {"identity and certificate files accumulate", "Host *\n  IdentityFile ~/.ssh/one\n  "
                                                    "IdentityFile " + d + "/two\n  "
                                                    "CertificateFile ~/.ssh/one-cert.pub\n  "
                                                    "CertificateFile " + d + "/%h-cert.pub\n",
       "h", 0, ""},
      {"ProxyJump before ProxyCommand", "Host *\n  ProxyJump j1,j2\n  ProxyCommand nc %h %p\n",
       "h", 0, ""},
      {"ProxyCommand before ProxyJump", "Host *\n  ProxyCommand nc %h %p\n  ProxyJump j1\n", "h",
       0, ""},
      {"an environment variable in a path", "Host *\n  UserKnownHostsFile "
                                            "${TPUCTL_TEST_KH_DIR}/kh\n",
       "h", 0, ""},
      {"case-insensitive keywords and yes/no", "HOST *\n  checkhostip YES\n  hashKnownHosts "
                                               "yes\n  IDENTITIESONLY no\n",
       "h", 0, ""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const fs::path cfg = tmp.path() / "config";
    std::ofstream(cfg) << c.config;
    std::vector<std::string> args{"-F", cfg.string()};
    if (c.port) {
      args.insert(args.end(), {"-p", std::to_string(c.port)});
    }
    if (!c.user.empty()) {
      args.insert(args.end(), {"-l", c.user});
    }
    args.push_back(c.host);
    const auto g = ssh_g(args);
    remote::SshConfigQuery q;
    q.host = c.host;
    q.port = c.port;
    q.user = c.user;
    q.config_file = cfg.string();
    auto r = remote::resolve_ssh_config(q);
    REQUIRE_MESSAGE(r, r.error().message);
    CHECK(r->hostname == one(g, "hostname"));
    CHECK(std::to_string(r->port) == one(g, "port"));
    CHECK(r->user == one(g, "user"));
    CHECK(joined(r->user_known_hosts) == one(g, "userknownhostsfile"));
    CHECK(joined(r->global_known_hosts) == one(g, "globalknownhostsfile"));
    CHECK(r->host_key_alias == one(g, "hostkeyalias"));
    CHECK((r->hash_known_hosts ? "yes" : "no") == one(g, "hashknownhosts"));
    CHECK((r->check_host_ip ? "yes" : "no") == one(g, "checkhostip"));
    CHECK((r->identities_only ? "yes" : "no") == one(g, "identitiesonly"));
    CHECK(r->proxy_jump == one(g, "proxyjump"));
    CHECK(r->proxy_command == one(g, "proxycommand"));
    if (!r->identity_files.empty()) {
      CHECK(r->identity_files == g.at("identityfile"));
    }
    if (g.count("certificatefile")) {
      CHECK(r->certificate_files == g.at("certificatefile"));
    } else {
      CHECK(r->certificate_files.empty());
    }
  }
  ::unsetenv("TPUCTL_TEST_KH_DIR");
}

TEST_CASE("ssh_config: ~ is the password database's home, as ssh's, whatever HOME says") {
  test::TempDir tmp;
  const char* old = std::getenv("HOME");
  const std::string saved = old ? old : "";
  ::setenv("HOME", tmp.path().c_str(), 1);
  const fs::path cfg = tmp.path() / "config";
  std::ofstream(cfg) << "Host *\n  UserKnownHostsFile ~/.ssh/kh\n";
  const auto g = ssh_g({"-F", cfg.string(), "h"});
  remote::SshConfigQuery q;
  q.host = "h";
  q.config_file = cfg.string();
  auto r = remote::resolve_ssh_config(q);
  ::setenv("HOME", saved.c_str(), 1);
  REQUIRE(r);
  CHECK(joined(r->user_known_hosts) == one(g, "userknownhostsfile"));
  CHECK(r->user_known_hosts[0].rfind(tmp.path().string(), 0) != 0);
  CHECK(remote::expand_user_path("~/x") == remote::user_home() + "/x");
}

TEST_CASE("ssh_config: what tpuctl cannot read as ssh does is refused in one line naming it") {
  test::TempDir tmp;
  const fs::path cfg = tmp.path() / "config";
  auto refused = [&](const std::string& text) {
    std::ofstream(cfg) << text;
    remote::SshConfigQuery q;
    q.host = "h";
    q.config_file = cfg.string();
    auto r = remote::resolve_ssh_config(q);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find('\n') == std::string::npos);
    return r.error().message;
  };
  CHECK(test::contains(refused("Host *\n  Port 99999\n"), "bad Port '99999'"));
  CHECK(test::contains(refused("Host *\n  Port 99999\n"), cfg.string() + "' line 2"));
  CHECK(test::contains(refused("Match host\n"), "needs an argument"));
  CHECK(test::contains(refused("Match all host x\n"), "'all' cannot be combined"));
  CHECK(test::contains(refused("Host *\n  UserKnownHostsFile none /x\n"), "'none' appears"));
  CHECK(test::contains(refused("Host *\n  UserKnownHostsFile /x/%C\n"), "%C"));
  remote::SshConfigQuery missing;
  missing.host = "h";
  missing.config_file = (tmp.path() / "nope").string();
  auto r = remote::resolve_ssh_config(missing);
  REQUIRE_FALSE(r);
  CHECK(test::contains(r.error().message, "cannot read the ssh config"));
}
