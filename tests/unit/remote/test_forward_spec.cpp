// ssh's forward specs as -L and -R take them (remote/forwarding.hpp): the three- and four-field
// forms, bracketed IPv6 addresses, `*` and an empty BIND for every interface, port 0 for -R
// only, and one line naming the option and the spec for everything else.
#include <doctest/doctest.h>

#include "remote/forwarding.hpp"

using namespace tpuctl::remote;

TEST_SUITE_BEGIN("unit");

TEST_CASE("remote::parse_forward_spec reads ssh's forms and refuses malformed ones in one line") {
  SUBCASE("PORT:HOST:HOSTPORT: loopback, as ssh binds it by default") {
    auto f = parse_forward_spec(ForwardKind::local, "9001:localhost:9001");
    REQUIRE(f);
    CHECK(f->bind_address.empty());
    CHECK_FALSE(f->any_address);
    CHECK(f->port == 9001);
    CHECK(f->host == "localhost");
    CHECK(f->host_port == 9001);
    CHECK(describe(*f) == "-L 9001:localhost:9001");
  }
  SUBCASE("a bind address, every interface, IPv6 in brackets") {
    auto bound = parse_forward_spec(ForwardKind::local, "127.0.250.9:6006:10.0.0.5:6006");
    REQUIRE(bound);
    CHECK(bound->bind_address == "127.0.250.9");
    CHECK(bound->host == "10.0.0.5");
    for (const char* any : {"*:6006:h:1", ":6006:h:1"}) {
      auto f = parse_forward_spec(ForwardKind::local, any);
      REQUIRE(f);
      CHECK(f->any_address);
      CHECK(f->bind_address.empty());
    }
    auto v6 = parse_forward_spec(ForwardKind::remote, "[::1]:8080:[fe80::1]:80");
    REQUIRE(v6);
    CHECK(v6->bind_address == "::1");
    CHECK(v6->host == "fe80::1");
    CHECK(v6->port == 8080);
    CHECK(v6->host_port == 80);
  }
  SUBCASE("port 0: the worker picks one, for -R only") {
    auto r = parse_forward_spec(ForwardKind::remote, "0:localhost:80");
    REQUIRE(r);
    CHECK(r->port == 0);
    auto l = parse_forward_spec(ForwardKind::local, "0:localhost:80");
    REQUIRE_FALSE(l);
    CHECK(l.error().message.find("'0' is not a port number from 1 to 65535") != std::string::npos);
  }
  SUBCASE("malformed: one usage line naming the option and the spec") {
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"abc", "-L 'abc' is not a forward: it has 1 field"},
        {"70000:x:1", "-L '70000:x:1': PORT '70000' is not a port number from 1 to 65535"},
        {"1:x:0", "HOSTPORT '0' is not a port number from 1 to 65535"},
        {"1:x:http", "HOSTPORT 'http'"},
        {"1::2", "HOST is empty"},
        {"a:b:c:d:e", "it has 5 fields"},
        {"[::1:9001:x:1", "its brackets do not enclose one address"},
        {"9001:::1:80", "an IPv6 address goes in brackets"},
        {"", "it is empty"},
        {"1:a b:2", "HOST 'a b' is not a name"},
    };
    for (const auto& row : bad) {
      const std::string& spec = row.first;
      const std::string& says = row.second;
      CAPTURE(spec);
      auto f = parse_forward_spec(ForwardKind::local, spec);
      REQUIRE_FALSE(f);
      CHECK(f.error().kind == tpuctl::ErrorKind::usage);
      CHECK(f.error().message.find(says) != std::string::npos);
      CHECK(f.error().message.find('\n') == std::string::npos);
    }
  }
}
