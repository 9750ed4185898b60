// provision::parse_inventory: the pure checking of `tpuctl pool import FILE` (no store). The
// store side (transaction, positions, existing hosts) is covered by tests/integration/
// test_pool_cli.cpp.
#include <doctest/doctest.h>

#include "provision/pool/pools.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

namespace {

// Every message of a rejected file, one per line.
std::string messages(const std::string& text) {
  auto inv = parse_inventory("", text);
  REQUIRE(!inv);
  CHECK(inv.error().kind == ErrorKind::usage);
  std::string all;
  for (const auto& m : inv.error().all_messages()) {
    all += m + "\n";
  }
  return all;
}

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("provision::parse_inventory reads hosts, their fields and the pool") {
  auto inv = parse_inventory("", R"({"pool": {"name": "lab", "generation": "v5e", "shape": "4x4"},
    "hosts": [{"host": "alice@node01:2200", "coords": [1, 0], "labels": {"rack": "r1"}},
              {"host": "node02", "port": 2222, "user": "bob", "workdir": "w"}]})");
  REQUIRE_MESSAGE(inv, inv.error().message);
  CHECK(inv->pool == "lab");
  REQUIRE(inv->new_layout);
  CHECK(inv->new_layout->chips_per_host == 4);
  REQUIRE(inv->specs.size() == 2);
  CHECK(inv->specs[0].user == "alice");
  CHECK(inv->specs[0].port == 2200);
  CHECK(inv->options[0].coords == std::optional<std::string>("1,0"));
  CHECK(inv->options[0].labels.at("rack") == "r1");
  CHECK(inv->options[1].port == 2222);
  CHECK(inv->options[1].user == "bob");
  CHECK(parse_inventory("requested", R"({"pool": {"name": "lab"}, "hosts": []})")->pool ==
        "requested");
}

TEST_CASE("provision::parse_inventory reports an unreadable number as bad JSON "
          "(fuzz/regressions/inventory)") {
  // 1e999 overflows a double: nlohmann throws out_of_range, not parse_error, and that exception
  // escaped `tpuctl pool import` (std::terminate).
  for (const char* text : {R"({"hosts": [{"work":99999E999999.99"hosts": 9999990)",
                           R"({"hosts": [{"host": "n1", "port": 1e999}]})"}) {
    CAPTURE(text);
    const std::string all = messages(text);
    CHECK(mentions(all, "inventory is not valid JSON"));
    CHECK(mentions(all, "nothing was imported"));
  }
}

TEST_CASE("provision::parse_inventory takes numbers only as the whole numbers they are "
          "(fuzz/regressions/inventory)") {
  // get<int>() used to wrap: port 4294967318 became 22, coords 4294967296 became 0, and a
  // chips_per_host that was not an integer was silently replaced by the default 4.
  SUBCASE("port") {
    for (const char* port : {"4294967318", "-1", "0", "65536", "22.5", "\"22\"", "1e3"}) {
      CAPTURE(port);
      const std::string all =
          messages(std::string(R"({"hosts": [{"host": "n1", "port": )") + port + "}]}");
      CHECK(mentions(all, "line 1, hosts[0].port: must be a whole number from 1 to 65535"));
    }
  }
  SUBCASE("coords") {
    for (const char* coords :
         {"[4294967296, 0]", "[0, -1]", "[0.5, 1]", "[0, 18446744073709551615]", "\"0,x\"",
          "\"1,2,3,4\"", "\"-1,0\"", "\"1\"", "{}"}) {
      CAPTURE(coords);
      const std::string all =
          messages(std::string(R"({"hosts": [{"host": "n1", "coords": )") + coords + "}]}");
      CHECK(mentions(all, "hosts[0].coords: '"));
      CHECK(mentions(all, "' must be [x, y], [x, y, z] or \"x,y,z\" (positions from 0)"));
    }
  }
  SUBCASE("chips_per_host and shape") {
    for (const char* cph : {"4294967300", "\"8\"", "4.0", "0"}) {
      CAPTURE(cph);
      const std::string all = messages(std::string(R"({"pool": {"name": "p", "generation": "v5e",
        "chips_per_host": )") + cph + R"(}, "hosts": []})");
      CHECK(mentions(all, "pool.chips_per_host: must be a whole number of chips"));
    }
    // A shape that is not a string threw nlohmann's type_error out of the import.
    const std::string all =
        messages(R"({"pool": {"name": "p", "generation": "v5e", "shape": 8}, "hosts": []})");
    CHECK(mentions(all, "pool.shape: must be a topology string"));
  }
  auto ok = parse_inventory("", R"({"hosts": [{"host": "n1", "port": 65535, "coords": [0, 2]}]})");
  REQUIRE(ok);
  CHECK(ok->options[0].port == 65535);
}

TEST_SUITE_END();
