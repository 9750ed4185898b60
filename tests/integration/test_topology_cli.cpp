// `tpuctl topology` through the real binary: describe, list and mesh in every output format,
// usage errors (exit 2, `tpuctl: error:` naming the value) and golden help and table output.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"

using tpuctl::test::check_golden;
using tpuctl::test::run_tpuctl;

namespace {

nlohmann::json json_of(const std::vector<std::string>& args) {
  auto r = run_tpuctl(args);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  return nlohmann::json::parse(r.out);
}

// Runs a command that must fail with a usage error; returns its stderr.
std::string usage_failure(const std::vector<std::string>& args) {
  auto r = run_tpuctl(args);
  CAPTURE(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("tpuctl: error: ", 0) == 0);
  return r.err;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("topology describe: v5p-128, v4-32 and v5litepod-16 in json") {
  auto v5p = json_of({"topology", "describe", "v5p-128", "--format", "json"});
  CHECK(v5p["type"] == "v5p-128");
  CHECK(v5p["generation"] == "v5p");
  CHECK(v5p["chips"] == 64);
  CHECK(v5p["cores"] == 128);
  CHECK(v5p["hosts"] == 16);
  CHECK(v5p["chips_per_host"] == 4);
  CHECK(v5p["topology"] == "4x4x4");
  CHECK(v5p["wrap"] == nlohmann::json::array({true, true, true}));
  CHECK(v5p["host_bounds"] == "2,2,4");
  CHECK(v5p["chips_per_host_bounds"] == "2,2,1");
  CHECK(v5p["diameter"] == 6);
  CHECK(v5p["mean_hops"].get<double>() == doctest::Approx(3.0));
  CHECK(v5p["bisection_links"] == 32);
  CHECK(v5p["bisection_gbytes_per_s"].get<double>() > 0);
  CHECK(v5p["peak_bf16_tflops"].get<double>() == doctest::Approx(64 * 459));
  CHECK(v5p["hbm_gib"].get<double>() == doctest::Approx(64 * 95));
  std::vector<std::string> keys;
  for (auto it = v5p.begin(); it != v5p.end(); ++it) {
    keys.push_back(it.key());
  }
  CHECK(keys == std::vector<std::string>{"bisection_gbytes_per_s", "bisection_links", "chips",
                                         "chips_per_host", "chips_per_host_bounds", "cores",
                                         "diameter", "generation", "hbm_gib", "host_bounds",
                                         "hosts", "mean_hops", "peak_bf16_tflops", "topology",
                                         "type", "wrap"});

  auto v4 = json_of({"topology", "describe", "v4-32", "--format", "json"});
  CHECK(v4["chips"] == 16);
  CHECK(v4["topology"] == "2x2x4");
  CHECK(v4["wrap"] == nlohmann::json::array({false, false, false}));
  CHECK(v4["host_bounds"] == "1,1,4");

  auto v5e = json_of({"topology", "describe", "v5litepod-16", "--format", "json"});
  CHECK(v5e["chips"] == 16);
  CHECK(v5e["hosts"] == 4);
  CHECK(v5e["topology"] == "4x4");
  CHECK(v5e["generation"] == "v5e");
}

TEST_CASE("topology describe: --type GEN --topology T is the same slice as TYPE") {
  auto a =
      json_of({"topology", "describe", "--type", "v5p", "--topology", "4x4x4", "--format=json"});
  auto b = json_of({"topology", "describe", "v5p-4x4x4", "--format=json"});
  auto c = json_of({"topology", "describe", "v5p-128", "--format=json"});
  CHECK(a == c);
  CHECK(b == c);
  auto lite = json_of(
      {"topology", "describe", "--type", "v5litepod", "--topology", "4x4", "--format=json"});
  CHECK(lite["type"] == "v5litepod-16");
}

TEST_CASE("topology describe: invalid types are exit 2 naming the value") {
  for (const char* bad : {"v5p-7", "v5litepod-12", "v4-3x3x3", "v9-8", "v5p-", "v5p-0x4"}) {
    CAPTURE(bad);
    auto err = usage_failure({"topology", "describe", bad});
    CHECK(err.find("'" + std::string(bad) + "'") != std::string::npos);
  }
  CHECK(usage_failure({"topology", "describe", "v9-8"}).find("did you mean") != std::string::npos);
  auto both = usage_failure({"topology", "describe", "v5p-128", "--topology", "4x4x4"});
  CHECK(both.find("not both") != std::string::npos);
  auto none = usage_failure({"topology", "describe"});
  CHECK(none.find("no accelerator type") != std::string::npos);
  auto lone = usage_failure({"topology", "describe", "--topology", "4x4x4"});
  CHECK(lone.find("needs --type") != std::string::npos);
}

TEST_CASE("topology describe: every problem of a --type/--topology pair is its own line") {
  auto err = usage_failure({"topology", "describe", "--type", "v9", "--topology", "4x"});
  CHECK(err.find("tpuctl: error: unknown TPU generation 'v9'") != std::string::npos);
  CHECK(err.find("\ntpuctl: error: topology '4x' is malformed") != std::string::npos);
}

TEST_CASE("topology list: json, yaml, table and --generation") {
  auto all = json_of({"topology", "list", "--format", "json"});
  REQUIRE(all.is_array());
  CHECK(all.size() == 67);
  CHECK(all[0]["type"] == "v2-8");
  CHECK(all[0].contains("bisection_links"));

  auto v5p = json_of({"topology", "list", "--generation", "v5p", "--format", "json"});
  REQUIRE(v5p.size() == 13);
  for (const auto& row : v5p) {
    CHECK(row["generation"] == "v5p");
  }
  CHECK(v5p.back()["type"] == "v5p-12288");
  CHECK(v5p.back()["topology"] == "16x16x24");

  auto v5e = json_of({"topology", "list", "--generation", "v5e", "--format", "json"});
  CHECK(v5e.size() == 8);

  auto yaml = run_tpuctl({"topology", "list", "--generation", "v6e", "--format", "yaml"});
  REQUIRE(yaml.exit_code == 0);
  CHECK(yaml.out.rfind("- type: v6e-1\n", 0) == 0);
  CHECK(yaml.out.find("  wrap: [true, true, false]\n") != std::string::npos);

  auto table = run_tpuctl({"topology", "list", "--generation", "v4"});
  REQUIRE(table.exit_code == 0);
  CHECK(table.out.rfind("TYPE ", 0) == 0);
  CHECK(table.out.find("v4-1536") != std::string::npos);
  CHECK(table.out.find("8x8x12") != std::string::npos);

  auto bad = usage_failure({"topology", "list", "--generation", "v9"});
  CHECK(bad.find("'v9'") != std::string::npos);
}

TEST_CASE("topology mesh: json and yaml") {
  auto m = json_of({"topology", "mesh", "v5p-512", "--shape", "4,64", "--axes", "data,model",
                    "--format", "json"});
  CHECK(m["type"] == "v5p-512");
  CHECK(m["shape"] == nlohmann::json::array({4, 64}));
  REQUIRE(m["axes"].size() == 2);
  CHECK(m["axes"][0]["name"] == "data");
  CHECK(m["axes"][1]["name"] == "model");
  CHECK(m["axes"][1]["size"] == 64);
  CHECK(m["axes"][1]["physical_axes"] == nlohmann::json::array({"y", "z"}));
  CHECK(m["axes"][0]["physical_axes"] == nlohmann::json::array({"x"}));
  CHECK(m["axes"][0]["split"] == false);
  CHECK(m["axes"][0]["dcn"] == 1);
  REQUIRE(m["devices"].size() == 4);
  REQUIRE(m["devices"][0].size() == 64);
  std::vector<int> seen(256, 0);
  for (const auto& row : m["devices"]) {
    for (const auto& d : row) {
      seen[d.get<size_t>()]++;
    }
  }
  CHECK(std::count(seen.begin(), seen.end(), 1) == 256);

  auto hybrid = json_of(
      {"topology", "mesh", "v5p-32", "--shape", "2,8", "--num-slices", "2", "--format", "json"});
  CHECK(hybrid["shape"] == nlohmann::json::array({4, 8}));
  CHECK(hybrid["axes"][0]["dcn"] == 2);
  CHECK(hybrid["axes"][0]["name"] == "axis0");
  CHECK(hybrid["devices"][2][0] == hybrid["devices"][0][0].get<int>() + 16);

  auto yaml = run_tpuctl({"topology", "mesh", "v6e-16", "--shape", "4,4", "--format=yaml"});
  REQUIRE(yaml.exit_code == 0);
  CHECK(yaml.out.find("type: v6e-16\n") != std::string::npos);
  CHECK(yaml.out.find("shape: [4, 4]\n") != std::string::npos);
  CHECK(yaml.out.find("devices: [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]") !=
        std::string::npos);
}

TEST_CASE("topology mesh: a shape with the wrong device count is exit 2 naming both numbers") {
  auto err = usage_failure({"topology", "mesh", "v5p-128", "--shape", "4,64"});
  CHECK(err.find("'4,64' has 256 devices") != std::string::npos);
  CHECK(err.find("has 64") != std::string::npos);
  usage_failure({"topology", "mesh", "v5p-128", "--shape", "4,x"});
  usage_failure({"topology", "mesh", "v5p-128"});
  auto names = usage_failure({"topology", "mesh", "v5p-128", "--shape", "16,4", "--axes", "a"});
  CHECK(names.find("one name per axis") != std::string::npos);
}

TEST_CASE("topology: golden --help of the group and its commands") {
  for (const char* cmd : {"list", "describe", "mesh"}) {
    CAPTURE(cmd);
    auto r = run_tpuctl({"topology", cmd, "--help"});
    CHECK(r.exit_code == 0);
    CHECK(check_golden(std::string("help/topology_") + cmd + ".txt", r.out) == "");
  }
  auto group = run_tpuctl({"topology", "--help"});
  CHECK(check_golden("help/topology.txt", group.out) == "");
}

TEST_CASE("topology: golden table output of describe and mesh") {
  auto d = run_tpuctl({"topology", "describe", "v5p-128"});
  REQUIRE(d.exit_code == 0);
  CHECK(check_golden("topology/describe_v5p_128.txt", d.out) == "");
  auto m = run_tpuctl({"topology", "mesh", "v6e-16", "--shape", "4,4"});
  REQUIRE(m.exit_code == 0);
  CHECK(check_golden("topology/mesh_v6e_16.txt", m.out) == "");
  auto split = run_tpuctl({"topology", "mesh", "v5p-128", "--shape", "2,8,4", "--axes",
                           "data,fsdp,model", "--num-slices", "2"});
  REQUIRE(split.exit_code == 0);
  CHECK(check_golden("topology/mesh_v5p_128_split_2_slices.txt", split.out) == "");
}

TEST_SUITE_END();
