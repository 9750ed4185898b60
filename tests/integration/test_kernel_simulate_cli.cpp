// tpuctl kernel simulate through the real binary: SCALE-Sim's published AlexNet conv1 result as
// GEMM and as conv layer, the json/yaml/table outputs, tpu mode and every usage error.
#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"

using tpuctl::test::check_golden;
using tpuctl::test::run_tpuctl;

TEST_SUITE_BEGIN("integration");

namespace {

// The published SCALE-Sim v2 golden row (kernels.md 3.1): AlexNet conv1 on 32x32 ws.
void check_alexnet(const nlohmann::json& j) {
  CHECK(j["m"] == 3025);
  CHECK(j["n"] == 96);
  CHECK(j["k"] == 363);
  CHECK(j["array"] == "32x32");
  CHECK(j["dataflow"] == "ws");
  CHECK(j["mode"] == "scalesim");
  CHECK(j["folds"] == 36);
  CHECK(j["cycles"] == 112284);
  CHECK(j["scalesim_total_cycles"] == 112283);
  CHECK(j["mapping_efficiency_pct"].get<double>() == 94.53125);
  CHECK(std::abs(j["compute_util_pct"].get<double>() - 90.78000992063492) <= 1e-9);
  CHECK(std::abs(j["overall_util_pct"].get<double>() - 91.68309650614964) <= 1e-9);
  CHECK(j["padding_tax_pct"].get<double>() == 5.46875);
  CHECK(j["wasted_pe_cycles"] == int64_t{1024} * 112284 - int64_t{3025} * 96 * 363);
}

} // namespace

TEST_CASE("kernel simulate: AlexNet conv1 on 32x32 ws gives SCALE-Sim's 112283 and 94.53125%") {
  auto r = run_tpuctl({"kernel", "simulate", "--m", "3025", "--n", "96", "--k", "363", "--array",
                       "32x32", "--dataflow", "ws", "--format", "json"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  auto j = nlohmann::ordered_json::parse(r.out); // keeps the printed order
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) {
    keys.push_back(it.key());
  }
  CHECK(keys == std::vector<std::string>{
                    "m", "n", "k", "array", "dataflow", "mode", "folds", "cycles",
                    "scalesim_total_cycles", "mapping_efficiency_pct", "compute_util_pct",
                    "overall_util_pct", "padding_tax_pct", "wasted_pe_cycles"});
  check_alexnet(nlohmann::json(j));
}

TEST_CASE("kernel simulate: --conv maps AlexNet conv1 to the same GEMM as SCALE-Sim") {
  auto r = run_tpuctl({"kernel", "simulate", "--conv", "224,224,11,11,3,96,4", "--array", "32x32",
                       "--format=json"});
  REQUIRE(r.exit_code == 0);
  check_alexnet(nlohmann::json::parse(r.out));

  auto table =
      run_tpuctl({"kernel", "simulate", "--conv", "224,224,11,11,3,96,4", "--array", "32x32"});
  REQUIRE(table.exit_code == 0);
  CHECK(check_golden("kernel/simulate_alexnet_conv1.txt", table.out) == "");
}

TEST_CASE("kernel simulate: defaults are a 128x128 array, ws, scalesim (ARM issue #51 rows)") {
  auto gemm = run_tpuctl(
      {"kernel", "simulate", "--m", "256", "--n", "256", "--k", "768", "--format", "json"});
  REQUIRE(gemm.exit_code == 0);
  auto j = nlohmann::json::parse(gemm.out);
  CHECK(j["array"] == "128x128");
  CHECK(j["dataflow"] == "ws");
  CHECK(j["mode"] == "scalesim");
  CHECK(j["scalesim_total_cycles"] == 7655);
  CHECK(std::abs(j["overall_util_pct"].get<double>() - 40.130633572828216) <= 1e-9);
  CHECK(std::abs(j["compute_util_pct"].get<double>() - 33.46405228758171) <= 1e-9);

  auto gemv = run_tpuctl(
      {"kernel", "simulate", "--m", "1", "--n", "256", "--k", "768", "--format", "yaml"});
  REQUIRE(gemv.exit_code == 0);
  CHECK(gemv.out.find("scalesim_total_cycles: 4595\n") != std::string::npos);
  CHECK(gemv.out.find("array: 128x128\n") != std::string::npos);
  CHECK(gemv.out.find("mapping_efficiency_pct: 100") != std::string::npos);
}

TEST_CASE("kernel simulate: os dataflow gives the RTL-validated 4x4x4 case (SCALE-Sim prints 9)") {
  auto r = run_tpuctl({"kernel", "simulate", "--m", "4", "--n", "4", "--k", "4", "--array", "4x4",
                       "--dataflow", "os", "--format", "json"});
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["cycles"] == 10);
  CHECK(j["scalesim_total_cycles"] == 9);
  CHECK(std::abs(j["overall_util_pct"].get<double>() - 44.44444444444444) <= 1e-9);
  CHECK(std::abs(j["compute_util_pct"].get<double>() - 40.0) <= 1e-9);
}

TEST_CASE("kernel simulate: tpu mode hides later preloads and says where the cycles went") {
  // Worked by hand in tests/unit/kernels/test_systolic_model.cpp: 30 cycles against 40.
  auto r = run_tpuctl({"kernel", "simulate", "--m", "10", "--n", "4", "--k", "8", "--array", "4x4",
                       "--mode", "tpu", "--format", "json"});
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["mode"] == "tpu");
  CHECK(j["cycles"] == 30);
  CHECK(j["scalesim_total_cycles"] == 39);

  auto table = run_tpuctl(
      {"kernel", "simulate", "--m", "10", "--n", "4", "--k", "8", "--array", "4x4", "--mode=tpu"});
  REQUIRE(table.exit_code == 0);
  CHECK(table.out.find("preload 4 + skew 3 + stream 20 + drain 3 = 30") != std::string::npos);
  CHECK(table.out.find("later preloads hidden behind streaming") != std::string::npos);
}

TEST_CASE("kernel simulate: usage errors are exit 2 with every problem on its own line") {
  SUBCASE("--conv together with --m/--n/--k") {
    auto r = run_tpuctl({"kernel", "simulate", "--conv", "224,224,11,11,3,96,4", "--m", "4"});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "tpuctl: error: --conv '224,224,11,11,3,96,4' sets M, N and K itself: give "
                   "either --conv or --m/--n/--k, not both\n");
  }
  SUBCASE("missing sizes are all listed") {
    auto r = run_tpuctl({"kernel", "simulate", "--n", "8"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("tpuctl: error: --m is missing") == 0);
    CHECK(r.err.find("tpuctl: error: --k is missing") != std::string::npos);
    CHECK(r.err.find("--n is missing") == std::string::npos);
  }
  SUBCASE("bad values of every flag at once") {
    auto r = run_tpuctl({"kernel", "simulate", "--m", "0", "--n", "x", "--k", "3", "--array", "32x",
                         "--dataflow", "rs", "--mode", "rtl"});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "tpuctl: error: --n: 'x' is not a whole number\n"
                   "tpuctl: error: --array: '32x' is not RxC (e.g. 128x128)\n"
                   "tpuctl: error: --dataflow: 'rs' is not a dataflow (use ws, os or is)\n"
                   "tpuctl: error: --mode: 'rtl' is not a mode (use scalesim or tpu)\n"
                   "tpuctl: error: --m: '0' is not a valid size: M, N and K must be at least 1\n");
  }
  SUBCASE("a conv layer whose filter does not fit") {
    auto r = run_tpuctl({"kernel", "simulate", "--conv", "5,5,7,3,1,1,1"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("filter height '7' is larger than the input height '5'") != std::string::npos);
  }
  SUBCASE("tpu mode with the os dataflow") {
    auto r = run_tpuctl({"kernel", "simulate", "--m", "4", "--n", "4", "--k", "4", "--dataflow",
                         "os", "--mode", "tpu"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--mode: 'tpu'") != std::string::npos);
  }
}

TEST_CASE("kernel simulate: --help matches its golden file") {
  auto r = run_tpuctl({"kernel", "simulate", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(check_golden("help/kernel_simulate.txt", r.out) == "");
}

TEST_SUITE_END();
