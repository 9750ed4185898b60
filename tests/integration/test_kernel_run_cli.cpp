// tpuctl kernel run / kernel bench through the real binary: the padding-hostile 257 x 129 x 1025
// problem checked against the reference for every dtype and every kernel family the host has
// (--isa), the json fields (the peak is the unit's the run used), usage errors (exit 2, also
// for a family the host lacks), the mismatch path (exit 1, forced with the CLI's debug
// corruption switch) and golden help.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"

using tpuctl::test::check_golden;
using tpuctl::test::run_tpuctl;

TEST_SUITE_BEGIN("integration");

TEST_CASE("kernel run --check passes on 257 x 129 x 1025 for int8, bf16 and fp32") {
  for (const char* dtype : {"int8", "bf16", "fp32"}) {
    CAPTURE(dtype);
    auto r = run_tpuctl({"kernel", "run", "--m", "257", "--n", "129", "--k", "1025", "--dtype",
                         dtype, "--check", "--format", "json"});
    CHECK(r.err == "");
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["m"] == 257);
    CHECK(j["n"] == 129);
    CHECK(j["k"] == 1025);
    CHECK(j["dtype"] == dtype);
    CHECK(j["threads"] == 1);
    CHECK(j["reps"] == 5);
    CHECK(j["checked"] == true);
    CHECK(j["seconds_median"].get<double>() > 0);
    double gops = j["gops_median"].get<double>();
    double peak = j["peak_gops"].get<double>();
    CHECK(gops > 0);
    CHECK(peak > 0);
    // The reported rate is the op count over the median time, and the percentage follows.
    CHECK(gops == doctest::Approx(2.0 * 257 * 129 * 1025 / j["seconds_median"].get<double>() / 1e9)
                      .epsilon(0.01));
    CHECK(j["pct_of_peak"].get<double>() == doctest::Approx(100 * gops / peak).epsilon(0.01));
    REQUIRE(j["max_abs_error"].is_number());
    if (std::string(dtype) == "int8") {
      CHECK(j["max_abs_error"].get<double>() == 0.0);
    } else {
      CHECK(j["max_abs_error"].get<double>() < 1e-3);
    }
    // The peak is the one of the unit the kernel ran on: listed in `units`, same measurement.
    bool found = false;
    for (const auto& u : j["units"]) {
      if (u["probe"] == j["peak_probe"]) {
        found = true;
        CHECK(u["peak_gops"].get<double>() == doctest::Approx(peak).epsilon(0.001));
      }
    }
    CHECK_MESSAGE(found, j.dump());
  }
}

namespace {

// The families `kernel run` could run here: the isa of every unit it lists, plus portable.
std::set<std::string> listed_families() {
  auto r = run_tpuctl({"kernel", "run", "--m", "8", "--n", "8", "--k", "8", "--format", "json"});
  REQUIRE(r.exit_code == 0);
  std::set<std::string> out{"portable"};
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& u : j["units"]) {
    out.insert(u["isa"].get<std::string>());
  }
  return out;
}

} // namespace

TEST_CASE("kernel run --isa runs each family the host has and names the unit it divided by") {
  const std::set<std::string> families = listed_families();
  // The probe whose peak bounds each (dtype, family): what the kernel's inner loop runs.
  const std::map<std::pair<std::string, std::string>, std::string> probe{
      {{"fp32", "portable"}, "fp32_fma"},
      {{"int8", "portable"}, "int8_exact"},
      {{"fp32", "avx2"}, "fp32_fma"},
      {{"int8", "avx2"}, "int8_exact"},
      {{"fp32", "avx512"}, "fp32_fma_avx512"},
      {{"bf16", "avx512"}, "fp32_fma_avx512"},
      {{"bf16", "avx512-bf16"}, "bf16_dot_avx512"},
      {{"int8", "avx512-vnni"}, "int8_vnni_avx512"},
      {{"bf16", "amx"}, "bf16_amx"},
      {{"int8", "amx"}, "int8_amx"}};
  for (const auto& [key, want] : probe) {
    const auto& [dtype, isa] = key;
    if (families.count(isa) == 0) {
      MESSAGE("this host has no " << isa << ": kernel run --isa " << isa << " could not run here");
      continue;
    }
    CAPTURE(dtype);
    CAPTURE(isa);
    auto r = run_tpuctl({"kernel", "run", "--m", "70", "--n", "33", "--k", "129", "--dtype", dtype,
                         "--isa", isa, "--reps", "1", "--check", "--format", "json"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["isa"] == isa);
    CHECK(j["peak_probe"] == want);
    CHECK(j["checked"] == true);
  }
}

TEST_CASE("kernel run --isa refuses a family the host lacks with exit 2, naming what it has") {
  const std::set<std::string> families = listed_families();
  for (const char* isa : {"avx2", "avx512", "avx512-bf16", "avx512-vnni", "amx"}) {
    if (families.count(isa) != 0) {
      continue;
    }
    CAPTURE(std::string(isa));
    auto r = run_tpuctl({"kernel", "run", "--m", "8", "--n", "8", "--k", "8", "--isa", isa});
    CHECK(r.exit_code == 2);
    CHECK(r.out == "");
    CHECK(r.err.rfind(std::string("tpuctl: error: --isa: isa '") + isa +
                          "' is not available on this host: it has portable",
                      0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1); // one line
  }
  auto bad = run_tpuctl({"kernel", "run", "--m", "8", "--n", "8", "--k", "8", "--isa", "sse"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "tpuctl: error: --isa: isa 'sse' is not a kernel family (use auto, portable, "
                   "avx2, avx512, avx512-bf16, avx512-vnni or amx)\n");
}

TEST_CASE("kernel run uses the threads and reps it is given and reports them in yaml and table") {
  auto y = run_tpuctl({"kernel", "run", "--m", "64", "--n", "80", "--k", "96", "--dtype", "bf16",
                       "--threads", "2", "--reps", "3", "--format", "yaml"});
  REQUIRE(y.exit_code == 0);
  CHECK(y.out.find("threads: 2\n") != std::string::npos);
  CHECK(y.out.find("reps: 3\n") != std::string::npos);
  CHECK(y.out.find("checked: false\n") != std::string::npos);
  CHECK(y.out.find("max_abs_error: null\n") != std::string::npos);
  auto t = run_tpuctl({"kernel", "run", "--m", "8", "--n", "8", "--k", "8"});
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("dtype:") != std::string::npos);
  CHECK(t.out.find("int8") != std::string::npos); // the default dtype
  CHECK(t.out.find("gops_median:") != std::string::npos);
}

TEST_CASE("kernel run lists the host's matrix units with a measured peak for each") {
  auto r = run_tpuctl({"kernel", "run", "--m", "32", "--n", "32", "--k", "32", "--format", "json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto j = nlohmann::json::parse(r.out);
  std::set<std::string> probes;
  for (const auto& u : j["units"]) {
    CAPTURE(u.dump());
    CHECK(u["peak_gops"].get<double>() > 0);
    probes.insert(u["probe"].get<std::string>());
  }
  CHECK(probes.count("fp32_fma") == 1);
  CHECK(probes.count("int8_exact") == 1);
  // The AVX-512 units appear exactly where the CPU lists them.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string flags;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) == 0) {
      flags = line + " ";
      break;
    }
  }
  const bool f = flags.find(" avx512f ") != std::string::npos;
  CHECK(probes.count("fp32_fma_avx512") == (f ? 1u : 0u));
  CHECK(probes.count("bf16_dot_avx512") ==
        (f && flags.find(" avx512_bf16 ") != std::string::npos ? 1u : 0u));
  CHECK(probes.count("int8_vnni_avx512") ==
        (f && flags.find(" avx512_vnni ") != std::string::npos ? 1u : 0u));
  // AMX also needs the kernel's tile-data permission: listed only where the probe could run.
  if (flags.find(" amx_int8 ") == std::string::npos) {
    CHECK(probes.count("int8_amx") == 0);
    CHECK(probes.count("bf16_amx") == 0);
  }
}

TEST_CASE("kernel run with no sizes times the 1024 x 1024 x 1024 target square") {
  auto r = run_tpuctl({"kernel", "run", "--isa", "auto", "--k", "512", "--format", "json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["m"] == 1024);
  CHECK(j["n"] == 1024);
  CHECK(j["k"] == 512); // a size given still wins
  CHECK(j["dtype"] == "int8");
  CHECK(j["gops_median"].get<double>() > 0);
}

TEST_CASE("kernel run rejects a bad dtype and zero sizes with exit 2, every problem reported") {
  auto r = run_tpuctl({"kernel", "run", "--m", "0", "--n", "4", "--k", "-1", "--dtype", "int4"});
  CHECK(r.exit_code == 2);
  CHECK(r.out == "");
  CHECK(r.err == "tpuctl: error: --dtype: 'int4' is not a GEMM dtype (use int8, bf16 or fp32)\n"
                 "tpuctl: error: --m: '0' is out of range (use 1 to 1048576)\n"
                 "tpuctl: error: --k: '-1' is out of range (use 1 to 1048576)\n");
  auto threads =
      run_tpuctl({"kernel", "run", "--m", "4", "--n", "4", "--k", "4", "--threads", "0"});
  CHECK(threads.exit_code == 2);
  CHECK(threads.err.find("--threads: '0' is out of range") != std::string::npos);
  auto huge = run_tpuctl({"kernel", "run", "--m", "1000000", "--n", "1000000", "--k", "8"});
  CHECK(huge.exit_code == 2);
  CHECK(huge.err.find("needs more than 8 GiB of operands") != std::string::npos);
}

TEST_CASE("kernel run --check exits 1 with a clear message when the result is wrong") {
  std::map<std::string, std::string> env{{"TPUCTL_DEBUG_CORRUPT_RESULT", "1"}};
  for (const char* dtype : {"int8", "bf16", "fp32"}) {
    CAPTURE(dtype);
    auto r = run_tpuctl(
        {"kernel", "run", "--m", "33", "--n", "17", "--k", "70", "--dtype", dtype, "--check"}, env);
    CHECK(r.exit_code == 1);
    CHECK(r.out == "");
    CHECK(r.err.find("tpuctl: error: kernel run: the " + std::string(dtype) +
                     " result fails the reference check in 1 of 561 elements (first at row 16, "
                     "column 8") == 0);
  }
  // Without --check nothing is verified, so the switch has nothing to break.
  auto unchecked =
      run_tpuctl({"kernel", "run", "--m", "33", "--n", "17", "--k", "70", "--format", "json"}, env);
  CHECK(unchecked.exit_code == 0);
}

TEST_CASE("kernel bench prints one row per dtype and size") {
  auto r = run_tpuctl({"kernel", "bench", "--sizes", "24,40", "--reps", "1", "--format", "json"});
  REQUIRE(r.exit_code == 0);
  auto rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 6);
  CHECK(rows[0]["dtype"] == "fp32");
  CHECK(rows[1]["n"] == 40);
  CHECK(rows[5]["dtype"] == "int8");
  for (const auto& row : rows) {
    CHECK(row["gops_median"].get<double>() > 0);
  }
  auto t = run_tpuctl({"kernel", "bench", "--sizes", "16", "--dtypes", "int8", "--reps", "1"});
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.rfind("DTYPE  M   N   K   THREADS  GOPS_MEDIAN", 0) == 0);
  CHECK(t.out.find("\nint8   16  16  16  1") != std::string::npos);
  auto bad = run_tpuctl({"kernel", "bench", "--sizes", "16,x", "--dtypes", "fp64"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("'fp64' is not a GEMM dtype") != std::string::npos);
  CHECK(bad.err.find("--sizes") != std::string::npos);
}

TEST_CASE("kernel run and kernel bench --help match their golden files") {
  auto run = run_tpuctl({"kernel", "run", "--help"});
  CHECK(run.exit_code == 0);
  CHECK(check_golden("help/kernel_run.txt", run.out) == "");
  auto bench = run_tpuctl({"kernel", "bench", "--help"});
  CHECK(bench.exit_code == 0);
  CHECK(check_golden("help/kernel_bench.txt", bench.out) == "");
}

TEST_SUITE_END();
