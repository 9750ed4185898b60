#include <doctest/doctest.h>

#include "util/hostlist.hpp"

using namespace tpuctl;
using namespace tpuctl::util;

TEST_SUITE_BEGIN("util");

TEST_CASE("util::expand_hostlist expands ranges with padding and cartesian groups") {
  CHECK(*expand_hostlist("node[01-03]") == std::vector<std::string>{"node01", "node02", "node03"});
  CHECK(*expand_hostlist("10.0.0.[1-3]") ==
        std::vector<std::string>{"10.0.0.1", "10.0.0.2", "10.0.0.3"});
  CHECK(*expand_hostlist("n[1,3,5-6]") == std::vector<std::string>{"n1", "n3", "n5", "n6"});
  CHECK(*expand_hostlist("r[1-2]n[1-2]") ==
        std::vector<std::string>{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(*expand_hostlist("plain") == std::vector<std::string>{"plain"});
  CHECK(expand_hostlist("node[01-16]")->size() == 16);
  CHECK(expand_hostlist("node[01-16]")->back() == "node16");
}

TEST_CASE("util::expand_hostlist rejects malformed ranges, naming them") {
  for (const char* bad :
       {"node[3-1]", "node[1-", "node]1[", "node[a-b]", "node[]", "n[1-99999999]"}) {
    CAPTURE(bad);
    auto r = expand_hostlist(bad);
    REQUIRE(!r);
    CHECK(r.error().kind == ErrorKind::usage);
    CHECK(r.error().message.find(std::string("'") + bad + "'") != std::string::npos);
  }
  CHECK(expand_hostlist("node[3-1]").error().message.find("start <= end") != std::string::npos);
}

TEST_CASE("util::expand_hostlist counts the limit over a whole group (fuzz_hostlist)") {
  // Each item under the limit, together far over it: refused before expanding them all.
  std::string pattern = "n[";
  for (int i = 0; i < 100; ++i) {
    pattern += "1-60000,";
  }
  pattern += "1]";
  auto r = expand_hostlist(pattern);
  REQUIRE(!r);
  CHECK(r.error().message.find("expands to more than 65536 hosts") != std::string::npos);
  CHECK(expand_hostlist("n[1-40000,40001-70000]").error().message.find("more than 65536") !=
        std::string::npos);
  CHECK(expand_hostlist("n[1-30000,40001-75536]")->size() == 65536);
}

TEST_CASE("util::expand_host_specs parses user, port and IPv6") {
  auto r = expand_host_specs({"alice@node[1-2]:2222", "10.0.0.5", "[::1]:2200", "bob@[::1]"});
  REQUIRE(r);
  REQUIRE(r->size() == 5);
  CHECK((*r)[0].user == "alice");
  CHECK((*r)[0].host == "node1");
  CHECK((*r)[0].port == 2222);
  CHECK((*r)[2].host == "10.0.0.5");
  CHECK((*r)[2].port == 0);
  CHECK((*r)[3].host == "::1");
  CHECK((*r)[3].port == 2200);
  CHECK(to_string((*r)[3]) == "[::1]:2200");
  CHECK(to_string((*r)[0]) == "alice@node1:2222");
}

TEST_CASE("util::expand_host_specs reads a bare IPv6 address as a host without a port "
          "(fuzz/regressions/hostlist)") {
  // It used to split at the last colon: "fe80::1" became host "fe80:" on port 1, so the
  // to_string of the bracketed spec "[fe80::1]" did not parse back to the same host.
  auto r = expand_host_specs({"fe80::1", "alice@::1", "2001:db8::7:22", "fe80::"});
  REQUIRE(r);
  REQUIRE(r->size() == 4);
  CHECK((*r)[0].host == "fe80::1");
  CHECK((*r)[0].port == 0);
  CHECK((*r)[1].user == "alice");
  CHECK((*r)[1].host == "::1");
  CHECK((*r)[2].host == "2001:db8::7:22"); // a port needs brackets: [2001:db8::7]:22
  CHECK((*r)[2].port == 0);
  CHECK((*r)[3].host == "fe80::");
  CHECK(!expand_host_specs({"[::1]:"})); // a bracketed address's ':' still wants a port
  for (const char* spec : {"[fe80::1]", "[::1]:22", "bob@[::1]", "h:22", "u@h"}) {
    CAPTURE(spec);
    auto first = expand_host_specs({spec});
    REQUIRE(first);
    auto again = expand_host_specs({to_string((*first)[0])});
    REQUIRE(again);
    CHECK((*again)[0].host == (*first)[0].host);
    CHECK((*again)[0].port == (*first)[0].port);
    CHECK((*again)[0].user == (*first)[0].user);
  }
  CHECK(!expand_host_specs({"fe80::zz"})); // still checked as an IPv6 address
  // One colon is no IPv6 address: "[f:1]" was the host "f:1", written back as "f:1", which
  // reads as host f on port 1.
  CHECK(!expand_host_specs({"[f:1]"}));
  CHECK(!validate_hostname("f:1"));
  CHECK(validate_hostname("::"));
}

TEST_CASE("util::expand_host_specs rejects hostile names and reports every problem") {
  auto r = expand_host_specs({"node;rm -rf /", "$(reboot)", "-oProxyCommand=x", "ok1", "host:99999",
                              "`id`@h", "a\nb", "ok1"});
  REQUIRE(!r);
  auto lines = r.error().all_messages();
  CHECK(lines.size() == 7);
  CHECK(lines[0].find("'node;rm -rf /'") != std::string::npos);
  CHECK(lines[1].find("'$(reboot)'") != std::string::npos);
  CHECK(lines[2].find("must not start with '-'") != std::string::npos);
  CHECK(lines[3].find("65535") != std::string::npos);
  CHECK(lines[4].find("user '`id`'") != std::string::npos);
  CHECK(lines[6].find("listed twice") != std::string::npos);
}

TEST_CASE("util::fold_hostlist folds runs back into ranges") {
  CHECK(fold_hostlist({"node01", "node02", "node03", "node05", "x"}) == "node[01-03,05],x");
  CHECK(fold_hostlist({"127.0.0.2", "127.0.0.3", "127.0.0.9"}) == "127.0.0.[2-3,9]");
  CHECK(fold_hostlist({"solo"}) == "solo");
  CHECK(fold_hostlist({"n1"}) == "n1");
}

TEST_SUITE_END();
