// Host certificates made by the real ssh-keygen -s, checked as OpenSSH checks them: accepted
// for a name among their principals under a CA of a matching @cert-authority line; refused for
// another name, out of their validity window, signed by another CA, tampered with, @revoked
// (the key or the CA), a user certificate, or with critical options. CAs of each supported
// type: ed25519, ecdsa nistp256 and nistp384, rsa (rsa-sha2-512).
#include <ctime>
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "remote/host_cert.hpp"
#include "remote/ssh_crypto.hpp"
#include "remote/ssh_wire.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/ssh_keys.hpp"
#include "util/process.hpp"

using namespace tpuctl;
namespace fs = std::filesystem;

namespace {

// A key pair `name` of `type` ("ed25519", "ecdsa", "rsa") with `bits` when given.
fs::path new_key(const fs::path& dir, const std::string& name, const std::string& type,
                 const std::string& bits = "") {
  const fs::path key = dir / name;
  std::vector<std::string> args{"-t", type, "-N", "", "-C", "", "-f", key.string()};
  if (!bits.empty()) {
    args.insert(args.end(), {"-b", bits});
  }
  tpuctl::test::ssh_keygen(args);
  return key;
}

std::string fields(const fs::path& pub) {
  std::string text = test::read_file(pub);
  std::istringstream in(text);
  std::string type, b64;
  in >> type >> b64;
  return type + " " + b64;
}

std::string blob(const fs::path& pub) {
  std::string f = fields(pub);
  return remote::wire::base64_decode(f.substr(f.find(' ') + 1)).value_or("");
}

// Signs `key`.pub with `ca`; returns the parsed certificate.
remote::SshCertificate sign(const fs::path& ca, const fs::path& key,
                            const std::vector<std::string>& extra) {
  std::vector<std::string> args{"-s", ca.string(), "-I", "test-id"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(key.string() + ".pub");
  tpuctl::test::ssh_keygen(args);
  auto cert = remote::parse_certificate(blob(key.string() + "-cert.pub"));
  REQUIRE_MESSAGE(cert, cert.error().message);
  return *cert;
}

remote::KnownHosts known(const std::string& text) {
  auto k = remote::parse_known_hosts("kh", text);
  REQUIRE_MESSAGE(k, k.error().message);
  return *k;
}

const int64_t k_now = static_cast<int64_t>(std::time(nullptr));

} // namespace

TEST_SUITE_BEGIN("remote");

TEST_CASE("remote::check_host_certificate accepts a host certificate from ssh-keygen -s for its "
          "principal, with CAs of every supported type") {
  test::TempDir tmp;
  const fs::path host = new_key(tmp.path(), "host", "ed25519");
  struct Ca {
    const char* type;
    const char* bits;
  };
  for (const Ca& c :
       {Ca{"ed25519", ""}, Ca{"ecdsa", "256"}, Ca{"ecdsa", "384"}, Ca{"rsa", "2048"}}) {
    CAPTURE(c.type);
    CAPTURE(c.bits);
    const fs::path ca = new_key(tmp.path(), std::string("ca-") + c.type + c.bits, c.type, c.bits);
    auto cert = sign(ca, host, {"-h", "-n", "w1.pod,10.0.0.1", "-V", "-5m:+1h"});
    CHECK(cert.type == "ssh-ed25519-cert-v01@openssh.com");
    CHECK(cert.cert_type == 2);
    CHECK(cert.key_id == "test-id");
    CHECK(cert.principals == std::vector<std::string>{"w1.pod", "10.0.0.1"});
    CHECK(cert.public_key == blob(host.string() + ".pub"));
    CHECK(cert.signature_key == blob(ca.string() + ".pub"));
    auto kh = known(std::string("@cert-authority *.pod,[10.0.0.1]:2222 ") +
                    fields(ca.string() + ".pub") + "\n");
    auto ok = remote::check_host_certificate(cert, kh, "w1.pod", "w1.pod", k_now);
    CHECK_MESSAGE(ok, ok.error().message);
    auto by_ip = remote::check_host_certificate(cert, kh, "10.0.0.1", "[10.0.0.1]:2222", k_now);
    CHECK_MESSAGE(by_ip, by_ip.error().message);
  }
  // An ecdsa host key certified by an ed25519 CA: a CA of one type signs keys of another.
  const fs::path ec_host = new_key(tmp.path(), "ec-host", "ecdsa", "256");
  const fs::path ca = new_key(tmp.path(), "ca", "ed25519");
  auto cert = sign(ca, ec_host, {"-h", "-n", "w1.pod"});
  CHECK(cert.type == "ecdsa-sha2-nistp256-cert-v01@openssh.com");
  CHECK(cert.public_key == blob(ec_host.string() + ".pub"));
  CHECK(remote::plain_key_type(cert.type) == "ecdsa-sha2-nistp256");
  auto kh = known(std::string("@cert-authority * ") + fields(ca.string() + ".pub") + "\n");
  CHECK(remote::check_host_certificate(cert, kh, "w1.pod", "w1.pod", k_now));
}

TEST_CASE("remote::check_host_certificate refuses the wrong principal, an expired or future "
          "certificate, another CA, a tampered one, @revoked keys and CAs, user certificates and "
          "critical options") {
  test::TempDir tmp;
  const fs::path host = new_key(tmp.path(), "host", "ed25519");
  const fs::path ca = new_key(tmp.path(), "ca", "ed25519");
  const fs::path other_ca = new_key(tmp.path(), "other-ca", "ecdsa", "256");
  const std::string ca_line =
      std::string("@cert-authority *.pod ") + fields(ca.string() + ".pub") + "\n";
  auto kh = known(ca_line);
  auto message = [&](const remote::SshCertificate& c, const remote::KnownHosts& k,
                     const std::string& name) {
    auto st = remote::check_host_certificate(c, k, name, name, k_now);
    REQUIRE_FALSE(st);
    CHECK(st.error().kind == ErrorKind::auth);
    return st.error().message;
  };

  auto good = sign(ca, host, {"-h", "-n", "w1.pod", "-V", "-5m:+1h"});
  CHECK(remote::check_host_certificate(good, kh, "w1.pod", "w1.pod", k_now));
  CHECK(test::contains(message(good, kh, "w2.pod"), "is for w1.pod, not for 'w2.pod'"));
  // The CA line's patterns must match the name too.
  CHECK(test::contains(message(good, kh, "w1.other"), "no @cert-authority line for w1.other"));

  auto expired = sign(ca, host, {"-h", "-n", "w1.pod", "-V", "20200101:20200102"});
  CHECK(test::contains(message(expired, kh, "w1.pod"), "has expired: valid from 2020-01-01"));
  auto future = sign(ca, host, {"-h", "-n", "w1.pod", "-V", "+1d:+2d"});
  CHECK(test::contains(message(future, kh, "w1.pod"), "is not valid yet"));

  auto other = sign(other_ca, host, {"-h", "-n", "w1.pod"});
  CHECK(test::contains(message(other, kh, "w1.pod"),
                       "is signed by a CA (ecdsa-sha2-nistp256 SHA256:"));

  auto tampered = good;
  tampered.signed_data[tampered.signed_data.size() - 40] ^= 1;
  CHECK(test::contains(message(tampered, kh, "w1.pod"), "the signature does not verify"));

  auto revoked_key = known(ca_line + "@revoked * " + fields(host.string() + ".pub") + "\n");
  CHECK(test::contains(message(good, revoked_key, "w1.pod"), "is @revoked in kh line 2"));
  auto revoked_ca = known(ca_line + "@revoked *.pod " + fields(ca.string() + ".pub") + "\n");
  CHECK(test::contains(message(good, revoked_ca, "w1.pod"), "that is @revoked in kh line 2"));

  auto user = sign(ca, host, {"-n", "w1.pod"});
  CHECK(user.cert_type == 1);
  CHECK(test::contains(message(user, kh, "w1.pod"), "is a user certificate"));

  auto no_principals = sign(ca, host, {"-h"});
  CHECK(test::contains(message(no_principals, kh, "w1.pod"), "lists no principals"));

  auto critical = good; // outside the signed bytes: only the check of the field is tested
  critical.critical_options.push_back({"force-command", "true"});
  CHECK(test::contains(message(critical, kh, "w1.pod"), "has critical options (force-command)"));
}

TEST_CASE("remote::parse_certificate refuses what is not a certificate or is cut short") {
  test::TempDir tmp;
  const fs::path host = new_key(tmp.path(), "host", "ed25519");
  auto plain = remote::parse_certificate(blob(host.string() + ".pub"));
  REQUIRE_FALSE(plain);
  CHECK(test::contains(plain.error().message, "not an OpenSSH certificate"));
  const fs::path ca = new_key(tmp.path(), "ca", "ed25519");
  auto cert = sign(ca, host, {"-h", "-n", "w1.pod"});
  const std::string whole = blob(host.string() + "-cert.pub");
  auto cut = remote::parse_certificate(whole.substr(0, whole.size() - 10));
  REQUIRE_FALSE(cut);
  CHECK(test::contains(cut.error().message, "is malformed"));
  // The signature check itself refuses SHA-1 RSA signatures, as OpenSSH's defaults do.
  const std::string sig = remote::wire::string_field("ssh-rsa") + remote::wire::string_field("x");
  auto sha1 = remote::crypto::verify(blob(ca.string() + ".pub"), sig, "data");
  REQUIRE_FALSE(sha1);
  CHECK(test::contains(sha1.error().message, "signature algorithm 'ssh-rsa'"));
}
