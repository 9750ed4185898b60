// Accelerator types against the independent catalogue in tests/data/accelerator-types.json
// (copied from the research notes: Google's docs, xpk, TF/PyTorch host-bounds tables), and the
// ways a type can be invalid.
#include <fstream>
#include <set>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "topology/accelerator_type.hpp"

using namespace tpuctl;
using namespace tpuctl::topology;

namespace {

nlohmann::json reference_types() {
  std::ifstream in(tpuctl::test::source_dir() + "/tests/data/accelerator-types.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::string all_messages(const Error& e) {
  std::string s;
  for (const auto& m : e.all_messages()) {
    s += m + "\n";
  }
  return s;
}

// The whole text of the usage error for `text`; fails the test if it parses.
std::string rejection(const std::string& text) {
  auto t = parse_accelerator_type(text);
  CAPTURE(text);
  REQUIRE_FALSE(t.has_value());
  CHECK(t.error().kind == ErrorKind::usage);
  return all_messages(t.error());
}

void check_matches(const AcceleratorType& t, const nlohmann::json& row) {
  CHECK(t.name == row["type"].get<std::string>());
  CHECK(std::string(t.generation->name) == row["generation"].get<std::string>());
  CHECK(t.chips == row["chips"].get<int>());
  CHECK(t.cores == row["cores"].get<int>());
  CHECK(t.hosts == row["hosts"].get<int>());
  CHECK(t.chips_per_host == row["chips_per_host"].get<int>());
  CHECK(t.topology() == row["topology"].get<std::string>());
  for (size_t a = 0; a < 3; ++a) {
    CHECK(t.wrap[a] == row["wrap"][a].get<bool>());
  }
  // Bounds multiply out to the topology and the host count.
  for (size_t a = 0; a < 3; ++a) {
    CHECK(t.host_bounds[a] * t.chips_per_host_bounds[a] == t.dims[a]);
  }
  CHECK(t.host_bounds[0] * t.host_bounds[1] * t.host_bounds[2] == t.hosts);
}

} // namespace

TEST_SUITE_BEGIN("topology");

TEST_CASE("topology::parse_accelerator_type matches every reference type in both forms") {
  auto rows = reference_types();
  REQUIRE(rows.size() >= 60);
  for (const auto& row : rows) {
    std::string name = row["type"].get<std::string>();
    CAPTURE(name);
    auto numeric = parse_accelerator_type(name);
    REQUIRE(numeric.has_value());
    check_matches(*numeric, row);

    std::string prefix = name.substr(0, name.rfind('-'));
    std::string shaped = prefix + "-" + row["topology"].get<std::string>();
    CAPTURE(shaped);
    auto by_topology = parse_accelerator_type(shaped);
    REQUIRE(by_topology.has_value());
    check_matches(*by_topology, row);

    auto pair = accelerator_type_from_topology(prefix, row["topology"].get<std::string>());
    REQUIRE(pair.has_value());
    check_matches(*pair, row);
  }
}

TEST_CASE("topology::catalogue lists exactly the reference types") {
  std::set<std::string> expected;
  for (const auto& row : reference_types()) {
    expected.insert(row["type"].get<std::string>() + " " + row["topology"].get<std::string>());
  }
  std::set<std::string> listed;
  for (const auto& t : catalogue()) {
    listed.insert(t.name + " " + t.topology());
  }
  CHECK(listed == expected);
}

TEST_CASE("topology::parse_accelerator_type picks the most cube-like shape for a bare number") {
  struct Case {
    const char* type;
    const char* topology;
  };
  for (auto c :
       {Case{"v5p-384", "4x4x12"}, Case{"v4-1536", "8x8x12"}, Case{"v4-4096", "8x16x16"},
        Case{"v5p-12288", "16x16x24"}, Case{"tpu7x-18432", "16x24x24"}, Case{"v5p-2048", "8x8x16"},
        Case{"v5p-640", "4x4x20"}, Case{"v5p-1536", "8x8x12"}, Case{"tpu7x-9216", "12x16x24"}}) {
    CAPTURE(c.type);
    auto t = parse_accelerator_type(c.type);
    REQUIRE(t.has_value());
    CHECK(t->topology() == c.topology);
  }
}

TEST_CASE("topology::parse_accelerator_type accepts v5e as the v5litepod prefix") {
  auto t = parse_accelerator_type("v5e-16");
  REQUIRE(t.has_value());
  CHECK(t->name == "v5litepod-16");
  CHECK(std::string(t->generation->name) == "v5e");
  auto pair = accelerator_type_from_topology("v5e", "4x8");
  REQUIRE(pair.has_value());
  CHECK(pair->name == "v5litepod-32");
}

TEST_CASE("topology::parse_accelerator_type names the canonical numeric form") {
  auto t = parse_accelerator_type("v5p-4x4x8");
  REQUIRE(t.has_value());
  CHECK(t->name == "v5p-256");
  CHECK(t->cubes() == 2);
  auto sub = parse_accelerator_type("v5p-2x2x4");
  REQUIRE(sub.has_value());
  CHECK(sub->cubes() == 0);
  // v4 accepts any order of a multi-cube shape; v5p does not.
  auto v4 = parse_accelerator_type("v4-8x4x4");
  REQUIRE(v4.has_value());
  CHECK(v4->name == "v4-256");
  CHECK(v4->topology() == "8x4x4");
  CHECK(v4->host_bounds == Dims{4, 2, 4});
}

TEST_CASE("topology::parse_accelerator_type rejects slices that cannot exist") {
  SUBCASE("a core count that is no slice lists the valid sizes") {
    auto m = rejection("v5p-7");
    CHECK(m.find("'v5p-7'") != std::string::npos);
    CHECK(m.find("8, 16, 32, 64 or a multiple of 128 up to 12288") != std::string::npos);
  }
  SUBCASE("a v5e chip count that is not in the list") {
    auto m = rejection("v5litepod-12");
    CHECK(m.find("'v5litepod-12'") != std::string::npos);
    CHECK(m.find("1, 4, 8, 16, 32, 64, 128 or 256") != std::string::npos);
  }
  SUBCASE("a sub-cube shape that is not one of the four") {
    auto m = rejection("v4-3x3x3");
    CHECK(m.find("'v4-3x3x3'") != std::string::npos);
    CHECK(m.find("every dimension must be a multiple of 4 above one cube; sub-cube shapes are "
                 "2x2x1, 2x2x2, 2x2x4, 2x4x4") != std::string::npos);
  }
  SUBCASE("an unknown generation lists the known ones and suggests the nearest") {
    auto m = rejection("v9-8");
    CHECK(m.find("'v9-8'") != std::string::npos);
    CHECK(m.find("unknown TPU generation 'v9'") != std::string::npos);
    CHECK(m.find("v2, v3, v4, v5e (v5litepod), v5p, v6e, tpu7x") != std::string::npos);
    CHECK(m.find("did you mean '") != std::string::npos);
    // The whole type, ready to paste; case is ignored and other names for a generation known.
    CHECK(rejection("v5lite-16").find("did you mean 'v5litepod-16'?") != std::string::npos);
    CHECK(rejection("v7x-128").find("did you mean 'tpu7x-128'?") != std::string::npos);
    CHECK(rejection("ironwood-256").find("did you mean 'tpu7x-256'?") != std::string::npos);
    CHECK(tpuctl::topology::parse_accelerator_type("V5P-128").value().name == "v5p-128");
    CHECK(tpuctl::topology::find_generation("TPU7X").value()->name == "tpu7x");
  }
  SUBCASE("malformed text") {
    CHECK(rejection("4x").find("'4x'") != std::string::npos);
    CHECK(rejection("v5p-").find("'v5p-'") != std::string::npos);
    CHECK(rejection("v5p-").find("missing") != std::string::npos);
    CHECK(rejection("v5litepod-0x4").find("topology '0x4' is malformed") != std::string::npos);
    CHECK(rejection("v5p-4x").find("topology '4x' is malformed") != std::string::npos);
    CHECK(rejection("v5p-4x4x4x4").find("malformed") != std::string::npos);
    CHECK(rejection("v5p-abc").find("'abc'") != std::string::npos);
    CHECK(rejection("v5p").find("'v5p'") != std::string::npos);
  }
  SUBCASE("too many cubes, in either form") {
    CHECK(rejection("v5p-25600").find("200 cubes") != std::string::npos);
    CHECK(rejection("v5p-16x16x32").find("128 cubes") != std::string::npos);
    CHECK(rejection("v4-16x16x20").find("at most 64") != std::string::npos);
    CHECK(parse_accelerator_type("tpu7x-16x24x24").has_value());
    CHECK(rejection("tpu7x-24x24x24").find("at most 144") != std::string::npos);
  }
  SUBCASE("a 2D topology that is not in the list, with the transposed one suggested") {
    auto m = rejection("v5litepod-4x2");
    CHECK(m.find("must be one of 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16") != std::string::npos);
    CHECK(m.find("did you mean '2x4'?") != std::string::npos);
    CHECK(rejection("v2-4x8").find("'v2-4x8'") != std::string::npos); // only v3 has 4x8
    CHECK(parse_accelerator_type("v3-4x8").has_value());
  }
  SUBCASE("a 3D topology for a 2D generation and the other way round") {
    CHECK(rejection("v5litepod-4x4x1").find("2D") != std::string::npos);
    CHECK(rejection("v6e-2x2x2").find("write the topology as AxB") != std::string::npos);
    CHECK(rejection("v5p-4x4").find("3D") != std::string::npos);
  }
  SUBCASE("v5p and tpu7x shapes must be non-decreasing") {
    CHECK(rejection("v5p-8x4x4").find("write it as 4x4x8") != std::string::npos);
    CHECK(rejection("tpu7x-4x8x4").find("write it as 4x4x8") != std::string::npos);
  }
  SUBCASE("single chips exist only where a machine type has one") {
    CHECK(parse_accelerator_type("tpu7x-1x1x1").has_value());
    CHECK(rejection("v5p-1x1x1").find("sub-cube shapes are 2x2x1") != std::string::npos);
  }
}

TEST_CASE("topology::parse_accelerator_type reports every problem of one type") {
  auto t = parse_accelerator_type("v5p-8x4x6");
  REQUIRE_FALSE(t.has_value());
  auto messages = t.error().all_messages();
  REQUIRE(messages.size() == 2);
  CHECK(messages[0].find("multiple of 4") != std::string::npos);
  CHECK(messages[1].find("write it as 4x6x8") != std::string::npos);
  for (const auto& m : messages) {
    CHECK(m.find("'v5p-8x4x6'") != std::string::npos);
  }
}

TEST_CASE("topology::accelerator_type_from_topology validates gcloud's --type/--topology pair") {
  SUBCASE("valid pairs") {
    auto t = accelerator_type_from_topology("v5p", "4x4x4");
    REQUIRE(t.has_value());
    CHECK(t->name == "v5p-128");
    auto e = accelerator_type_from_topology("v5litepod", "4x4");
    REQUIRE(e.has_value());
    CHECK(e->name == "v5litepod-16");
  }
  SUBCASE("an unknown generation and a malformed topology are both reported") {
    auto t = accelerator_type_from_topology("v9", "4x");
    REQUIRE_FALSE(t.has_value());
    CHECK(t.error().kind == ErrorKind::usage);
    auto messages = t.error().all_messages();
    REQUIRE(messages.size() == 2);
    CHECK(messages[0].find("'v9'") != std::string::npos);
    CHECK(messages[1].find("'4x'") != std::string::npos);
  }
  SUBCASE("a topology the generation does not have") {
    auto t = accelerator_type_from_topology("v4", "3x3x3");
    REQUIRE_FALSE(t.has_value());
    CHECK(t.error().message.find("topology '3x3x3' is not valid for v4") != std::string::npos);
    auto d = accelerator_type_from_topology("v6e", "4x4x4");
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().message.find("2D") != std::string::npos);
  }
}

TEST_CASE("topology::parse_topology") {
  auto t = parse_topology("4x8x16");
  REQUIRE(t.has_value());
  CHECK(t->rank == 3);
  CHECK(t->dims == Dims{4, 8, 16});
  auto two = parse_topology("16x16");
  REQUIRE(two.has_value());
  CHECK(two->rank == 2);
  CHECK(two->dims == Dims{16, 16, 1});
  for (const char* bad :
       {"4x", "x4", "0x4", "4", "4x4x4x4", "-4x4", "4xx4", "", "4x 4", "+4x4", "4x4x2000"}) {
    CAPTURE(bad);
    auto r = parse_topology(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == ErrorKind::usage);
    CHECK(r.error().message.find("'" + std::string(bad) + "'") != std::string::npos);
  }
}

TEST_CASE("topology::find_generation") {
  auto v5e = find_generation("v5e");
  REQUIRE(v5e.has_value());
  auto lite = find_generation("v5litepod");
  REQUIRE(lite.has_value());
  CHECK(*v5e == *lite);
  CHECK((*v5e)->type_prefix == "v5litepod");
  auto missing = find_generation("v7");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().kind == ErrorKind::usage);
  CHECK(missing.error().message.find("'v7'") != std::string::npos);
  CHECK(generations().size() == 7);
}

TEST_CASE("topology::Generation cube budgets agree with the largest reference slices") {
  // The biggest slice of each 3D generation in the reference catalogue uses exactly its budget.
  for (auto [type, cubes] :
       {std::pair{"v4-8192", 64}, std::pair{"v5p-12288", 96}, std::pair{"tpu7x-18432", 144}}) {
    auto t = parse_accelerator_type(type);
    REQUIRE(t.has_value());
    CHECK(t->cubes() == cubes);
    CHECK(t->generation->max_cubes == cubes);
  }
}

TEST_SUITE_END();
