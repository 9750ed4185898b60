// Jump host lists as users write them (--proxy-jump, ssh_config ProxyJump), and the ProxyJump
// read back from the ProxyCommand libssh 0.10 writes for one (no network here).
#include <doctest/doctest.h>

#include "remote/jump_spec.hpp"
#include "tests/support/helpers.hpp"

using namespace tpuctl;
using tpuctl::test::contains;

TEST_SUITE_BEGIN("remote");

TEST_CASE("remote::parse_jump_spec reads [user@]host[:port] hops in order, and none") {
  auto hops = remote::parse_jump_spec("ops@bastion.example:2222,10.0.0.1,[fd00::1]:22");
  REQUIRE(hops);
  REQUIRE(hops->size() == 3);
  CHECK((*hops)[0].user == "ops");
  CHECK((*hops)[0].host == "bastion.example");
  CHECK((*hops)[0].port == 2222);
  CHECK((*hops)[1].user.empty());
  CHECK((*hops)[1].port == 0);
  CHECK((*hops)[2].host == "fd00::1");
  CHECK((*hops)[2].port == 22);
  CHECK(remote::to_string(*hops) == "ops@bastion.example:2222,10.0.0.1,[fd00::1]:22");
  auto none = remote::parse_jump_spec("None");
  REQUIRE(none);
  CHECK(none->empty());
  CHECK(remote::to_string(*none) == "none");
}

TEST_CASE("remote::parse_jump_spec refuses a bad hop in one line naming the value") {
  for (const char* bad : {"a@b:notaport", "b:0", "b:70000", "b1,,b2", "x;y@b", "b:", "[::1",
                          "-oProxyCommand=x", ""}) {
    auto r = remote::parse_jump_spec(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().kind == ErrorKind::usage);
    CHECK(r.error().message.find('\n') == std::string::npos);
    CHECK(contains(r.error().message, "--proxy-jump: "));
  }
  auto r = remote::parse_jump_spec("a@b:notaport");
  REQUIRE_FALSE(r);
  CHECK(contains(r.error().message, "'a@b:notaport'"));
  CHECK(contains(r.error().message, "the port 'notaport' is not a number from 1 to 65535"));
}

TEST_CASE("remote::jump_from_proxy_command reads back libssh 0.10's ProxyJump rewrite only") {
  CHECK(remote::jump_from_proxy_command("ssh -W '[%h]:%p' bastion") == "bastion");
  CHECK(remote::jump_from_proxy_command("ssh -l ops -p 2222 -J b2,b3 -W '[%h]:%p' b1") ==
        "ops@b1:2222,b2,b3");
  CHECK(remote::jump_from_proxy_command("ssh -p 22 -W '[%h]:%p' fd00::1") == "[fd00::1]:22");
  CHECK_FALSE(remote::jump_from_proxy_command("nc %h %p"));
  CHECK_FALSE(remote::jump_from_proxy_command("ssh -W %h:%p bastion"));
  CHECK_FALSE(remote::jump_from_proxy_command(""));
  CHECK_FALSE(remote::jump_from_proxy_command("none"));
}
