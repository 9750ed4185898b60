// The GEMM's support code: the thread pool (every index claimed exactly once, nesting, the
// counter handshake) and the peak probe (positive, cached per process). Speeds are not asserted.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "kernels/gemm.hpp"
#include "kernels/parallel_for.hpp"
#include "kernels/peak_probe.hpp"

using namespace tpuctl::kernels;

TEST_SUITE_BEGIN("kernels");

TEST_CASE("kernels::parallel_for runs every index exactly once for any thread count") {
  for (int threads : {1, 2, 4}) {
    for (int count : {0, 1, 7, 100}) {
      CAPTURE(threads);
      CAPTURE(count);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
      parallel_for(count, threads, [&](int i) { hits[static_cast<size_t>(i)].fetch_add(1); });
      for (const auto& h : hits) {
        CHECK(h.load() == 1);
      }
    }
  }
}

TEST_CASE("kernels::parallel_for nested inside a parallel body runs, on the caller") {
  std::atomic<int> inner{0};
  parallel_for(4, 2, [&](int) { parallel_for(5, 2, [&](int) { inner.fetch_add(1); }); });
  CHECK(inner.load() == 20);
}

TEST_CASE("kernels::run_shared runs at most the asked number of copies, the caller among them") {
  std::atomic<int> copies{0};
  std::atomic<bool> caller_ran{false};
  auto caller = std::this_thread::get_id();
  run_shared(3, [&] {
    copies.fetch_add(1);
    if (std::this_thread::get_id() == caller) {
      caller_ran = true;
    }
  });
  CHECK(copies.load() >= 1);
  CHECK(copies.load() <= 3);
  CHECK(caller_ran.load());
}

TEST_CASE("kernels::wait_for returns once another thread has counted up to the target") {
  std::atomic<int> counter{0};
  wait_for(counter, 0); // already reached
  std::thread producer([&] {
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      count_up(counter);
    }
  });
  wait_for(counter, 3);
  CHECK(counter.load() == 3);
  producer.join();
}

TEST_CASE("kernels::measure_peak_gops gives a positive rate for both probes and thread counts") {
  for (PeakKind kind : {PeakKind::fp32_fma, PeakKind::int8_exact}) {
    for (int threads : {1, 2}) {
      CAPTURE(to_string(kind));
      CAPTURE(threads);
      double gops = measure_peak_gops(kind, threads, 0.005);
      CHECK(std::isfinite(gops));
      CHECK(gops > 0);
    }
  }
}

namespace {

// The CPU flags /proc/cpuinfo lists for the first processor (empty when it cannot be read).
std::set<std::string> cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::set<std::string> out;
      for (std::string w; words >> w;) {
        out.insert(w);
      }
      return out;
    }
  }
  return {};
}

} // namespace

TEST_CASE("kernels::host_units names the AVX-512 units /proc/cpuinfo lists, and only those run") {
  const auto flags = cpu_flags();
  REQUIRE_FALSE(flags.empty());
  const std::vector<std::pair<PeakKind, std::string>> avx512{
      {PeakKind::fp32_fma_avx512, "avx512f"},
      {PeakKind::bf16_dot_avx512, "avx512_bf16"},
      {PeakKind::int8_vnni_avx512, "avx512_vnni"}};
  const auto units = host_units();
  for (const auto& [kind, flag] : avx512) {
    CAPTURE(to_string(kind));
    const bool listed = flags.count(flag) > 0 && flags.count("avx512f") > 0;
    CHECK(host_has(kind) == listed);
    CHECK((std::find(units.begin(), units.end(), kind) != units.end()) == listed);
    const double gops = measure_peak_gops(kind, 1, 0.005);
    if (listed) {
      CHECK(gops > 0);
    } else {
      MESSAGE("this CPU has no " << flag << ": the " << to_string(kind)
                                 << " probe could not run here");
      CHECK(gops == 0);
    }
  }
  // The base units are always there (through the portable loops without AVX2 + FMA).
  CHECK(units.at(0) == PeakKind::fp32_fma);
  CHECK(units.at(1) == PeakKind::int8_exact);
}

TEST_CASE("kernels: an AVX-512 bf16 dot or VNNI chain does at least the work of an FMA chain") {
  // Per instruction vdpbf16ps does twice vfmadd231ps's flops and vpdpbusd four times its ops, on
  // the same pipes: their measured rates can only be lower than the FMA's if the probe is wrong.
  if (!host_has(PeakKind::fp32_fma_avx512)) {
    MESSAGE("no AVX-512F here: nothing to compare");
    return;
  }
  const double fma = measure_peak_gops(PeakKind::fp32_fma_avx512, 1, 0.03);
  REQUIRE(fma > 0);
  for (PeakKind kind : {PeakKind::bf16_dot_avx512, PeakKind::int8_vnni_avx512}) {
    if (host_has(kind)) {
      CAPTURE(to_string(kind));
      CHECK(measure_peak_gops(kind, 1, 0.03) > 0.9 * fma);
    }
  }
}

TEST_CASE("kernels::host_peak_gops measures once per process and kind, then answers the same") {
  double first = host_peak_gops(PeakKind::int8_exact, 1);
  CHECK(first > 0);
  CHECK(host_peak_gops(PeakKind::int8_exact, 1) == first);
}

TEST_CASE("kernels::selected_isa honours force_portable") {
  GemmOptions portable;
  portable.force_portable = true;
  CHECK(selected_isa(portable) == GemmIsa::portable);
  CHECK(std::string(to_string(selected_isa(portable))) == "portable");
}

TEST_SUITE_END();
