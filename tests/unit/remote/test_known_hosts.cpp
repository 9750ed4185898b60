// known_hosts marker lines (@cert-authority, @revoked) and OpenSSH host pattern matching, on
// files written as a user writes them and hashed by the real ssh-keygen -H.
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "remote/known_hosts.hpp"
#include "remote/ssh_wire.hpp"
#include "tests/support/helpers.hpp"
#include "util/process.hpp"

using namespace tpuctl;
using remote::KnownHostsMarker;
namespace fs = std::filesystem;

namespace {

// "ssh-ed25519 BASE64" of a new key pair `name` in `dir`.
std::string new_public_key(const fs::path& dir, const std::string& name) {
  const fs::path key = dir / name;
  auto made = util::run_process(
      {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", key.string()});
  REQUIRE(made);
  REQUIRE_MESSAGE(made->exit_code == 0, made->err);
  std::string text = test::read_file(key.string() + ".pub");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

std::string blob_of(const std::string& pub) {
  return remote::wire::base64_decode(pub.substr(pub.find(' ') + 1)).value_or("");
}

} // namespace

TEST_SUITE_BEGIN("remote");

TEST_CASE("remote::host_patterns_match: wildcards, negation, [host]:port, case") {
  using remote::host_patterns_match;
  CHECK(host_patterns_match("*.pod.example.com", "w3.pod.example.com"));
  CHECK(host_patterns_match("*.POD.example.com", "w3.pod.EXAMPLE.com"));
  CHECK_FALSE(host_patterns_match("*.pod.example.com", "pod.example.com"));
  CHECK(host_patterns_match("w?.pod", "w7.pod"));
  CHECK_FALSE(host_patterns_match("w?.pod", "w17.pod"));
  CHECK(host_patterns_match("a,b,*.pod", "x.pod"));
  CHECK_FALSE(host_patterns_match("*.pod,!bad.pod", "bad.pod"));
  CHECK(host_patterns_match("*.pod,!bad.pod", "good.pod"));
  CHECK_FALSE(host_patterns_match("!bad.pod", "good.pod")); // a negation alone matches nothing
  CHECK(host_patterns_match("[127.0.251.*]:2222", "[127.0.251.2]:2222"));
  CHECK_FALSE(host_patterns_match("[127.0.251.*]:2222", "[127.0.251.2]:22"));
  CHECK_FALSE(host_patterns_match("127.0.251.*", "[127.0.251.2]:2222"));
  CHECK(remote::known_hosts_name("h", 22) == "h");
  CHECK(remote::known_hosts_name("h", 2222) == "[h]:2222");
}

TEST_CASE("remote::parse_known_hosts reads @cert-authority and @revoked lines, and hashed names "
          "written by ssh-keygen -H") {
  test::TempDir tmp;
  const std::string ca = new_public_key(tmp.path(), "ca");
  const std::string host = new_public_key(tmp.path(), "host");
  const std::string other = new_public_key(tmp.path(), "other");
  const fs::path file = tmp.path() / "known_hosts";
  std::ofstream(file) << "# fleet\n\n"
                      << "@cert-authority *.pod,!evil.pod " << ca << " fleet CA\n"
                      << "@revoked * " << other << "\n"
                      << "[10.0.0.5]:2222 " << host << "\n"
                      << "old.pod " << host << "\n";
  // ssh-keygen -H hashes the plain names (markers are kept as they are).
  auto hashed = util::run_process({"ssh-keygen", "-q", "-H", "-f", file.string()});
  REQUIRE(hashed);
  REQUIRE_MESSAGE(hashed->exit_code == 0, hashed->err);
  const std::string text = test::read_file(file);
  CHECK_FALSE(test::contains(text, "old.pod"));

  auto known = remote::parse_known_hosts(file.string(), text);
  REQUIRE_MESSAGE(known, known.error().message);
  CHECK(known->has_markers());
  auto cas = known->matching("w1.pod", KnownHostsMarker::cert_authority);
  REQUIRE(cas.size() == 1);
  CHECK(cas[0]->key == blob_of(ca));
  CHECK(cas[0]->key_type == "ssh-ed25519");
  CHECK(known->matching("evil.pod", KnownHostsMarker::cert_authority).empty());
  CHECK(known->matching("w1.other", KnownHostsMarker::cert_authority).empty());
  // Hashed plain names still match the name they hash, and only it.
  CHECK(known->matching("old.pod", KnownHostsMarker::none).size() == 1);
  CHECK(known->matching("[10.0.0.5]:2222", KnownHostsMarker::none).size() == 1);
  CHECK(known->matching("10.0.0.5", KnownHostsMarker::none).empty());
  // @revoked: that key, for any host; not another key.
  const remote::KnownHostsEntry* r = known->revoked("w1.pod", blob_of(other));
  REQUIRE(r != nullptr);
  CHECK(r->line == 4);
  CHECK(known->revoked("w1.pod", blob_of(host)) == nullptr);
}

TEST_CASE("remote::parse_known_hosts: a marker line without a host pattern, without a key or with "
          "an unknown marker is one error naming the file and line") {
  test::TempDir tmp;
  const std::string ca = new_public_key(tmp.path(), "ca");
  auto no_pattern = remote::parse_known_hosts(
      "/x/known_hosts", std::string("h1 ") + ca + "\n@cert-authority " + ca + " fleet CA\n");
  REQUIRE_FALSE(no_pattern);
  CHECK(no_pattern.error().kind == ErrorKind::usage);
  CHECK(no_pattern.error().message ==
        "known_hosts file '/x/known_hosts' line 2: @cert-authority line has no host pattern "
        "(write '@cert-authority HOST-PATTERNS KEY-TYPE BASE64-KEY', e.g. '@cert-authority "
        "*.example.com ssh-ed25519 AAAA...')");

  auto no_key = remote::parse_known_hosts("kh", "@revoked *.pod\n");
  REQUIRE_FALSE(no_key);
  CHECK(test::contains(no_key.error().message, "kh' line 1: @revoked line has no key"));

  auto bad_key = remote::parse_known_hosts("kh", "@revoked * ssh-ed25519 notbase64!\n");
  REQUIRE_FALSE(bad_key);
  CHECK(test::contains(bad_key.error().message, "the key is not base64 of a 'ssh-ed25519' key"));

  auto unknown = remote::parse_known_hosts("kh", std::string("\n@trusted * ") + ca + "\n");
  REQUIRE_FALSE(unknown);
  CHECK(test::contains(unknown.error().message, "kh' line 2: unknown marker '@trusted'"));

  // A plain line libssh reads or skips is not tpuctl's to refuse.
  auto plain = remote::parse_known_hosts("kh", "garbage\n");
  REQUIRE(plain);
  CHECK(plain->entries.empty());
  CHECK_FALSE(plain->has_markers());
}
