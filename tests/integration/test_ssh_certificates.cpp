// Host and user certificates through the real binary, with real sshd on 127.0.251.x (owned by
// this file) and certificates signed by the real ssh-keygen -s. Four hosts serve a host
// certificate each (HostCertificate): one valid, one for another principal, one expired, one
// signed by another CA. With known_hosts holding only `@cert-authority [127.0.251.*]:2222 CA`,
// `pool ssh` reaches the valid host under strict checking and refuses each other one naming
// what is wrong; `@revoked` refuses a key even where a plain line accepts it; a CA line without
// a host pattern is one error line naming the file and line, before any host is contacted; and
// a user certificate beside the identity file, or named by CertificateFile in the ssh_config,
// logs in where the plain key is not authorized (TrustedUserCAKeys).
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"
#include "tests/support/qr_env.hpp"
#include "tests/support/ssh_keys.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using tpuctl::test::contains;
using tpuctl::test::QrEnv;
using tpuctl::test::read_file;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

namespace {

// "TYPE BASE64" of a .pub file.
std::string key_fields(const fs::path& pub) {
  std::istringstream in(read_file(pub));
  std::string type, b64;
  in >> type >> b64;
  return type + " " + b64;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

size_t lines_with(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (const auto& line : tpuctl::util::split(text, '\n')) {
    n += contains(line, part) ? 1 : 0;
  }
  return n;
}

struct Host {
  std::string address;
  fs::path dir;
};

// The pool's hosts by address (from each sshd_config's ListenAddress).
std::vector<Host> pool_hosts(const QrEnv& env) {
  std::vector<Host> out;
  for (const auto& e : fs::directory_iterator(env.pool_dir() / "hosts")) {
    std::istringstream in(read_file(e.path() / "sshd_config"));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("ListenAddress ", 0) == 0) {
        std::string a = line.substr(14);
        out.push_back({a.substr(0, a.find(':')), e.path()});
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Host& a, const Host& b) { return a.address < b.address; });
  return out;
}

// Makes a host's sshd reread its configuration (SIGHUP: it re-executes itself) and waits until
// it serves the certificate now in its key's -cert.pub.
void reload(const Host& h) {
  const std::string pid(tpuctl::util::trim(read_file(h.dir / "sshd.pid")));
  REQUIRE(!pid.empty());
  REQUIRE(::kill(std::stoi(pid), SIGHUP) == 0);
  const std::string cert = key_fields(h.dir / "ssh_host_ed25519_key-cert.pub");
  const bool serving = tpuctl::test::wait_until(
      [&] {
        tpuctl::util::ProcessOptions o;
        o.timeout = std::chrono::seconds(20);
        auto r = tpuctl::util::run_process(
            {"ssh-keyscan", "-c", "-t", "ed25519", "-p", "2222", h.address}, o);
        return r && contains(r->out, cert);
      },
      std::chrono::seconds(60));
  REQUIRE_MESSAGE(serving,
                  (std::string("sshd at ") + h.address + " does not serve its new certificate"));
}

} // namespace

TEST_CASE("certificates: hosts trusted through @cert-authority (wrong principal, expired, other "
          "CA refused), @revoked, a CA line without a pattern, and a user certificate logging in "
          "where the plain key is not authorized") {
  QrEnv env(4, "127.0.251.2");
  const fs::path dir = env.dir.path();
  const auto hosts = pool_hosts(env);
  REQUIRE(hosts.size() == 4);
  const fs::path known = env.pool_dir() / "known_hosts";
  const std::string plain_known = read_file(known);

  const fs::path ca = dir / "host_ca";
  const fs::path other_ca = dir / "other_ca";
  const fs::path user_ca = dir / "user_ca";
  tpuctl::test::ssh_keygen({"-t", "ed25519", "-N", "", "-C", "fleet", "-f", ca.string()});
  tpuctl::test::ssh_keygen(
      {"-t", "ecdsa", "-b", "256", "-N", "", "-C", "other", "-f", other_ca.string()});
  tpuctl::test::ssh_keygen({"-t", "ed25519", "-N", "", "-C", "users", "-f", user_ca.string()});

  // hosts[0] valid; [1] for another principal; [2] expired; [3] signed by another CA.
  const std::vector<std::vector<std::string>> signing{
      {"-s", ca.string(), "-n", hosts[0].address, "-V", "-5m:+1h"},
      {"-s", ca.string(), "-n", "127.0.251.99", "-V", "-5m:+1h"},
      {"-s", ca.string(), "-n", hosts[2].address, "-V", "20200101:20200102"},
      {"-s", other_ca.string(), "-n", hosts[3].address}};
  for (size_t i = 0; i < hosts.size(); ++i) {
    const fs::path key = hosts[i].dir / "ssh_host_ed25519_key";
    auto args = signing[i];
    args.insert(args.end(),
                {"-h", "-I", std::string("host") + std::to_string(i), key.string() + ".pub"});
    tpuctl::test::ssh_keygen(args);
    std::ofstream(hosts[i].dir / "sshd_config", std::ios::app)
        << "HostCertificate " << key.string() << "-cert.pub\n"
        << "TrustedUserCAKeys " << user_ca.string() << ".pub\n";
    reload(hosts[i]);
  }
  const std::vector<std::string> probe{"pool", "ssh", "--command", "echo reached"};

  // A host with a plain known_hosts line keeps working as before.
  auto plain = env.run(probe);
  CHECK_MESSAGE(plain.exit_code == 0, plain.err);
  CHECK(lines_with(plain.out, "reached") == 4);

  // Only the CA: the valid certificate is accepted under strict checking, the others refused.
  const std::string ca_line = std::string("@cert-authority [127.0.251.*]:2222 ") +
                              key_fields(ca.string() + ".pub") + " fleet\n";
  write(known, ca_line);
  auto one = env.run({"pool", "ssh", "--hosts", hosts[0].address, "--strict-host-key-checking",
                      "yes", "--command", "echo reached"});
  CHECK_MESSAGE(one.exit_code == 0, one.err);
  CHECK(lines_with(one.out, "reached") == 1);
  CHECK(read_file(known) == ca_line); // nothing recorded

  auto all = env.run(probe);
  CHECK(all.exit_code == 5);
  CHECK(lines_with(all.out, "reached") == 1);
  const std::string name1 = std::string("[") + hosts[1].address + "]:2222";
  const std::string name2 = std::string("[") + hosts[2].address + "]:2222";
  const std::string name3 = std::string("[") + hosts[3].address + "]:2222";
  CHECK_MESSAGE(lines_with(all.err, std::string("the host certificate of ") + name1 +
                                        " (key id 'host1') is for 127.0.251.99, not for '" +
                                        hosts[1].address + "'") == 1,
                all.err);
  CHECK(lines_with(all.err, std::string("the host certificate of ") + name2 +
                                " (key id 'host2') has expired: valid from 2020-01-01") == 1);
  CHECK(lines_with(all.err, std::string("the host certificate of ") + name3 +
                                " (key id 'host3') is signed by a CA (ecdsa-sha2-nistp256 "
                                "SHA256:") == 1);
  CHECK(lines_with(all.err, std::string("that no @cert-authority line for ") + name3 + " in " +
                                known.string() + " names") == 1);
  CHECK(read_file(known) == ca_line);

  // @revoked refuses the key, through the CA and even where a plain line accepts it.
  const std::string revoked =
      std::string("@revoked * ") + key_fields(hosts[0].dir / "ssh_host_ed25519_key.pub") + "\n";
  const std::string name0 = std::string("[") + hosts[0].address + "]:2222";
  for (const std::string& text : {ca_line + revoked, plain_known + revoked}) {
    write(known, text);
    auto r = env.run({"pool", "ssh", "--hosts", hosts[0].address, "--command", "echo reached"});
    CHECK(r.exit_code == 5);
    CHECK_FALSE(contains(r.out, "reached"));
    CHECK_MESSAGE(lines_with(r.err, std::string("host key for ") + name0) == 1, r.err);
    CHECK(contains(r.err, std::string("is @revoked in ") + known.string() + " line "));
  }

  // A CA line without a host pattern: one line naming the file and line; nothing contacted.
  const std::string no_pattern =
      plain_known + "@cert-authority " + key_fields(ca.string() + ".pub") + "\n";
  write(known, no_pattern);
  const fs::path ran = dir / "ran";
  auto bad = env.run({"pool", "ssh", "--command", std::string("touch '") + ran.string() + "'"});
  CHECK(bad.exit_code == 2);
  CHECK(lines_with(bad.err, "tpuctl: error:") == 1);
  const size_t line = tpuctl::util::split(plain_known, '\n').size();
  CHECK_MESSAGE(contains(bad.err, std::string("known_hosts file '") + known.string() + "' line " +
                                      std::to_string(line) +
                                      ": @cert-authority line has no host pattern"),
                bad.err);
  CHECK_FALSE(fs::exists(ran));
  CHECK(read_file(known) == no_pattern);

  // A user certificate: the plain key is no longer authorized, its certificate is.
  write(known, plain_known);
  write(env.pool_dir() / "authorized_keys", "");
  const fs::path client = env.pool_dir() / "client_ed25519";
  auto denied = env.run(probe);
  CHECK(denied.exit_code == 5);
  CHECK(contains(denied.err, "permission denied (publickey)"));
  const std::string user(tpuctl::util::trim(tpuctl::util::run_process({"id", "-un"})->out));
  tpuctl::test::ssh_keygen({"-s", user_ca.string(), "-I", "alice", "-n", user, "-V", "-5m:+1h",
                            client.string() + ".pub"});
  REQUIRE(fs::exists(client.string() + "-cert.pub"));
  auto with_cert = env.run(probe);
  CHECK_MESSAGE(with_cert.exit_code == 0, with_cert.err);
  CHECK(lines_with(with_cert.out, "reached") == 4);

  // The same certificate named by CertificateFile in the ssh_config (libssh 0.10 ignores it).
  const fs::path elsewhere = dir / "alice-cert.pub";
  fs::rename(client.string() + "-cert.pub", elsewhere);
  auto moved = env.run(probe);
  CHECK(moved.exit_code == 5);
  const fs::path config = dir / "ssh_config";
  write(config, std::string("Host 127.0.251.*\n  CertificateFile ") + elsewhere.string() + "\n");
  auto args = probe;
  args.insert(args.end(), {"--ssh-config", config.string()});
  auto from_config = env.run(args);
  CHECK_MESSAGE(from_config.exit_code == 0, from_config.err);
  CHECK(lines_with(from_config.out, "reached") == 4);
}
