// The GEMM's support code: the thread pool (every index claimed exactly once, nesting, the
// counter handshake, a worker moving off the caller's CPU and back), the peak probe (positive,
// cached per process, one per unit the CPU has) and the choice of kernel family (CPUID against
// /proc/cpuinfo, the --isa cap, the refusal of a family the host lacks). Speeds are not asserted.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <dirent.h>
#include <fstream>
#include <pthread.h>
#include <sched.h>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <doctest/doctest.h>

#include "kernels/cpu_features.hpp"
#include "kernels/gemm.hpp"
#include "kernels/parallel_for.hpp"
#include "kernels/peak_probe.hpp"
#include "tests/unit/kernels/test_gemm_helpers.hpp"

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

namespace {

// The CPUs a thread of this process may run on, as /proc/self/task/TID/status lists them.
std::vector<std::string> allowed_lists_of_threads() {
  std::vector<std::string> out;
  DIR* dir = opendir("/proc/self/task");
  REQUIRE(dir != nullptr);
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') {
      continue;
    }
    std::ifstream status(std::string("/proc/self/task/") + e->d_name + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        out.push_back(line.substr(line.find_first_not_of(" \t", 18)));
      }
    }
  }
  closedir(dir);
  return out;
}

// The ids of this process's threads other than the calling one.
std::vector<pid_t> other_threads() {
  std::vector<pid_t> out;
  DIR* dir = opendir("/proc/self/task");
  REQUIRE(dir != nullptr);
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.' && std::atoi(e->d_name) != static_cast<int>(gettid())) {
      out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    }
  }
  closedir(dir);
  return out;
}

} // namespace

TEST_CASE("kernels::run_shared: a worker that joins on the caller's CPU runs the job on another "
          "and gets its CPUs back") {
  cpu_set_t process;
  REQUIRE(pthread_getaffinity_np(pthread_self(), sizeof process, &process) == 0);
  if (CPU_COUNT(&process) < 2) {
    MESSAGE("this process may use only one CPU: nothing to move to, not checked");
    return;
  }
  run_shared(2, [] {}); // the pool's worker exists before the caller is pinned (it inherits)
  const std::vector<std::string> before = allowed_lists_of_threads();
  const int home = sched_getcpu();
  cpu_set_t pinned;
  CPU_ZERO(&pinned);
  CPU_SET(home, &pinned);
  REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof pinned, &pinned) == 0);
  // Where each worker copy starts its job: a worker that joined on `home` has moved by then. (Not
  // checked later in the copy: a worker that joined elsewhere may be moved to `home` by the
  // scheduler, to balance against the other test the suite runs at the same time.)
  std::atomic<int> on_home{0}, worker_copies{0}, indexes{0};
  const auto caller = std::this_thread::get_id();
  const std::vector<pid_t> others = other_threads();
  for (int job = 0; job < 200; ++job) {
    // Every other thread of the process (the pool's worker among them) is put on `home` and
    // allowed everything again: the worker then joins the job on the caller's CPU, as Linux's
    // wake-affine placement often leaves it.
    for (pid_t tid : others) {
      sched_setaffinity(tid, sizeof pinned, &pinned);
      sched_setaffinity(tid, sizeof process, &process);
    }
    std::atomic<int> next{0};
    std::atomic<long> sum{0};
    run_shared(2, [&] {
      if (std::this_thread::get_id() != caller) {
        worker_copies.fetch_add(1);
        on_home.fetch_add(sched_getcpu() == home);
      }
      for (int i = next.fetch_add(1); i < 64; i = next.fetch_add(1)) {
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
        while (std::chrono::steady_clock::now() < until) {
        }
        sum.fetch_add(i);
        indexes.fetch_add(1);
      }
    });
    CHECK(sum.load() == 64 * 63 / 2);
  }
  REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof process, &process) == 0);
  CHECK(indexes.load() == 200 * 64);
  MESSAGE("worker copies: ", worker_copies.load(), " of 200 jobs");
  CHECK(on_home.load() == 0);                  // no copy started beside the pinned caller
  CHECK(allowed_lists_of_threads() == before); // and every thread has its CPUs back
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
      CAPTURE(std::string(to_string(kind)));
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

namespace {

bool listed(const std::set<std::string>& flags, std::initializer_list<const char*> names) {
  return std::all_of(names.begin(), names.end(), [&](const char* f) { return flags.count(f) > 0; });
}

// True when cpu_features() left `family` out although the CPU announces it (it faulted when
// tried, kernels/cpu_features.hpp); says why.
bool refused(const char* family) {
  for (const auto& [name, reason] : cpu_features().refused) {
    if (name == family) {
      MESSAGE("the CPU announces " << family << " but it is not used: " << reason);
      return true;
    }
  }
  return false;
}

bool amx_listed(const std::set<std::string>& flags) {
  return listed(flags, {"amx_tile", "amx_int8", "amx_bf16", "avx512_bf16", "avx512_vnni"});
}

} // namespace

TEST_CASE("kernels::detail::fault_signal names the signal a faulting loop dies of, in a child") {
  // ud2 (GCC's and Clang's __builtin_trap on x86-64) raises SIGILL, as an instruction the CPU
  // does not run would; this test runner's own SIGILL handler must not see it.
  CHECK(detail::fault_signal([](long) { __builtin_trap(); }) == SIGILL);
  CHECK(detail::fault_signal([](long) { std::raise(SIGSEGV); }) == SIGSEGV);
  CHECK(detail::fault_signal([](long) {}) == 0);
  // The parent is untouched: it goes on running this test.
  CHECK(cpu_features().avx2_fma == (cpu_flags().count("avx2") > 0 && cpu_flags().count("fma") > 0));
}

TEST_CASE("kernels::cpu_features leaves out, with its reason, every unit it refused") {
  for (const auto& [family, reason] : cpu_features().refused) {
    CAPTURE(family);
    CHECK_FALSE(reason.empty());
    const auto isas = host_isas();
    CHECK(std::none_of(isas.begin(), isas.end(),
                       [&](GemmIsa isa) { return std::string(to_string(isa)) == family; }));
  }
  if (!amx_status().usable && amx_status().reason.find("no AMX-TILE") == std::string::npos) {
    CHECK(std::any_of(cpu_features().refused.begin(), cpu_features().refused.end(),
                      [](const auto& r) { return r.first == "amx"; }));
  }
}

TEST_CASE("kernels::host_units names the units /proc/cpuinfo lists, and only those run") {
  const auto flags = cpu_flags();
  REQUIRE_FALSE(flags.empty());
  const bool avx512 =
      listed(flags, {"avx512f", "avx512bw", "avx512vl", "avx512dq"}) && !refused("avx512");
  // AMX also needs Linux's tile-data permission, which a VM or an old kernel may refuse.
  const bool amx = avx512 && amx_listed(flags) && amx_status().usable;
  if (avx512 && amx_listed(flags) && !amx) {
    MESSAGE("the CPU lists AMX but this process may not use it: " << amx_status().reason);
  }
  const std::vector<std::pair<PeakKind, bool>> extra{
      {PeakKind::fp32_fma_avx512, avx512},
      {PeakKind::bf16_dot_avx512,
       avx512 && flags.count("avx512_bf16") > 0 && !refused("avx512-bf16")},
      {PeakKind::int8_vnni_avx512,
       avx512 && flags.count("avx512_vnni") > 0 && !refused("avx512-vnni")},
      {PeakKind::int8_amx, amx},
      {PeakKind::bf16_amx, amx}};
  const auto units = host_units();
  for (const auto& [kind, has] : extra) {
    CAPTURE(std::string(to_string(kind)));
    const bool listed = has;
    CHECK(host_has(kind) == listed);
    CHECK((std::find(units.begin(), units.end(), kind) != units.end()) == listed);
    const double gops = measure_peak_gops(kind, 1, 0.005);
    if (listed) {
      CHECK(gops > 0);
    } else {
      MESSAGE("this host has no " << std::string(unit_isa(kind)) << " unit: the "
                                  << std::string(to_string(kind)) << " probe could not run here");
      CHECK(gops == 0);
    }
  }
  // The base units are always there (through the portable loops without AVX2 + FMA).
  CHECK(units.at(0) == PeakKind::fp32_fma);
  CHECK(units.at(1) == PeakKind::int8_exact);
}

TEST_CASE("kernels: the AVX-512 bf16 dot and VNNI probes count no more work than their "
          "instructions do, against the FMA chain measured beside them") {
  // Per instruction vdpbf16ps does at most twice vfmadd231ps's flops and vpdpbusd four times its
  // ops. How fast each runs is the core's business (Zen 4 and 5 issue vdpbf16ps as fast as an FMA,
  // an Emerald Rapids core at a quarter of the FMA's rate, 0.45x its flops), so no lower bound
  // holds on every host; an upper one does: a probe that counts more work than it does (a
  // wrong multiplier, a lane count doubled) shows a rate above the bound.
  if (!host_has(PeakKind::fp32_fma_avx512)) {
    MESSAGE("no AVX-512F here: nothing to compare");
    return;
  }
  // The two are measured in pairs, back to back, and the median of 15 pairs' ratios is compared:
  // on a machine shared with other tests (or a second copy of the suite) a lone sample that lost
  // its core says nothing, and a pair shares whatever load there is.
  for (auto [kind, bound] : {std::pair{PeakKind::bf16_dot_avx512, 2.0},
                             std::pair{PeakKind::int8_vnni_avx512, 4.0}}) {
    if (!host_has(kind)) {
      continue;
    }
    CAPTURE(std::string(to_string(kind)));
    std::vector<double> ratios;
    for (int pair = 0; pair < 15; ++pair) {
      const bool fma_first = pair % 2 == 0; // neither always gets the fresher core
      double fma = 0;
      double other = 0;
      if (fma_first) {
        fma = measure_peak_gops(PeakKind::fp32_fma_avx512, 1, 0.01);
        other = measure_peak_gops(kind, 1, 0.01);
      } else {
        other = measure_peak_gops(kind, 1, 0.01);
        fma = measure_peak_gops(PeakKind::fp32_fma_avx512, 1, 0.01);
      }
      REQUIRE(fma > 0);
      REQUIRE(other > 0);
      ratios.push_back(other / fma);
    }
    std::sort(ratios.begin(), ratios.end());
    const double median = ratios[ratios.size() / 2];
    CAPTURE(median);
    CHECK(median <= bound * 1.1);
  }
}

TEST_CASE("kernels::host_peak_gops measures once per process and kind, then answers the same") {
  double first = host_peak_gops(PeakKind::int8_exact, 1);
  CHECK(first > 0);
  CHECK(host_peak_gops(PeakKind::int8_exact, 1) == first);
}

TEST_CASE("kernels::host_isas follows CPUID and XCR0 as /proc/cpuinfo reports them") {
  const auto flags = cpu_flags();
  const auto isas = host_isas();
  auto has = [&](GemmIsa isa) { return std::find(isas.begin(), isas.end(), isa) != isas.end(); };
  const bool avx512 =
      listed(flags, {"avx512f", "avx512bw", "avx512vl", "avx512dq"}) && !refused("avx512");
  CHECK(has(GemmIsa::portable));
  CHECK(has(GemmIsa::avx2) == listed(flags, {"avx2", "fma"}));
  CHECK(has(GemmIsa::avx512) == avx512);
  CHECK(has(GemmIsa::avx512_bf16) ==
        (avx512 && flags.count("avx512_bf16") > 0 && !refused("avx512-bf16")));
  CHECK(has(GemmIsa::avx512_vnni) ==
        (avx512 && flags.count("avx512_vnni") > 0 && !refused("avx512-vnni")));
  CHECK(has(GemmIsa::amx) == (avx512 && amx_listed(flags) && amx_status().usable));
  CHECK(amx_status().usable == amx_status().reason.empty());
  CHECK_FALSE(has(GemmIsa::auto_select));
}

TEST_CASE("kernels::selected_isa picks each dtype's best family under the cap it is given") {
  const auto isas = host_isas();
  auto has = [&](GemmIsa isa) { return std::find(isas.begin(), isas.end(), isa) != isas.end(); };
  auto pick = [](GemmDtype dtype, GemmIsa cap) {
    GemmOptions o;
    o.isa = cap;
    return selected_isa(dtype, o).value();
  };
  for (GemmDtype dtype : {GemmDtype::fp32, GemmDtype::bf16, GemmDtype::int8}) {
    CAPTURE(std::string(to_string(dtype)));
    CHECK(pick(dtype, GemmIsa::portable) == GemmIsa::portable);
    // auto is the dtype's best family (the siblings avx512-bf16 and avx512-vnni each lack
    // the other's kernel, so no single cap below amx gives every dtype its best)
    CHECK(pick(dtype, GemmIsa::auto_select) == tpuctl::test::gemm::dtype_paths(dtype).back());
  }
  if (has(GemmIsa::avx2)) {
    CHECK(pick(GemmDtype::int8, GemmIsa::avx2) == GemmIsa::avx2);
  }
  if (has(GemmIsa::avx512)) {
    // fp32 and bf16 (widened) have avx512 kernels; int8 needs VNNI, so it stays on avx2.
    CHECK(pick(GemmDtype::fp32, GemmIsa::avx512) == GemmIsa::avx512);
    CHECK(pick(GemmDtype::bf16, GemmIsa::avx512) == GemmIsa::avx512);
    CHECK(pick(GemmDtype::int8, GemmIsa::avx512) == GemmIsa::avx2);
  }
  if (has(GemmIsa::avx512_bf16)) {
    CHECK(pick(GemmDtype::bf16, GemmIsa::avx512_bf16) == GemmIsa::avx512_bf16);
    CHECK(pick(GemmDtype::int8, GemmIsa::avx512_bf16) == GemmIsa::avx2); // not a sibling's
    CHECK(pick(GemmDtype::fp32, GemmIsa::avx512_bf16) == GemmIsa::avx512);
  }
  if (has(GemmIsa::avx512_vnni)) {
    CHECK(pick(GemmDtype::int8, GemmIsa::avx512_vnni) == GemmIsa::avx512_vnni);
    CHECK(pick(GemmDtype::bf16, GemmIsa::avx512_vnni) == GemmIsa::avx512);
  }
  if (has(GemmIsa::amx)) {
    CHECK(pick(GemmDtype::int8, GemmIsa::amx) == GemmIsa::amx);
    CHECK(pick(GemmDtype::bf16, GemmIsa::amx) == GemmIsa::amx);
    CHECK(pick(GemmDtype::fp32, GemmIsa::amx) == GemmIsa::avx512);
  }
}

TEST_CASE("kernels::selected_isa refuses a family this host lacks and names what it has") {
  std::string have;
  for (GemmIsa isa : host_isas()) {
    have += (have.empty() ? "" : ", ") + std::string(to_string(isa));
  }
  int missing = 0;
  for (GemmIsa isa :
       {GemmIsa::avx2, GemmIsa::avx512, GemmIsa::avx512_bf16, GemmIsa::avx512_vnni, GemmIsa::amx}) {
    const auto isas = host_isas();
    if (std::find(isas.begin(), isas.end(), isa) != isas.end()) {
      continue;
    }
    ++missing;
    MESSAGE("this host has no " << std::string(to_string(isa))
                                << ": its kernels are compiled in, but their tests could not run "
                                   "here (amx is tested on the model)");
    GemmOptions o;
    o.isa = isa;
    auto r = selected_isa(GemmDtype::int8, o);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == tpuctl::ErrorKind::usage);
    CHECK(r.error().message.find(std::string("isa '") + to_string(isa) + "'") != std::string::npos);
    CHECK(r.error().message.find("it has " + have) != std::string::npos);
    std::vector<float> x(4, 1.0f), y(4);
    CHECK_FALSE(gemm_f32(2, 2, 2, x.data(), 2, x.data(), 2, y.data(), 2, o).has_value());
  }
  if (missing == 0) {
    MESSAGE("this host has every kernel family: nothing to refuse");
  }
}

TEST_CASE("kernels::parse_gemm_isa reads back every name to_string gives") {
  for (GemmIsa isa : {GemmIsa::auto_select, GemmIsa::portable, GemmIsa::avx2, GemmIsa::avx512,
                      GemmIsa::avx512_bf16, GemmIsa::avx512_vnni, GemmIsa::amx}) {
    CHECK(parse_gemm_isa(to_string(isa)).value() == isa);
  }
  auto bad = parse_gemm_isa("avx512_vnni");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message ==
        "isa 'avx512_vnni' is not a kernel family (use auto, portable, avx2, avx512, "
        "avx512-bf16, avx512-vnni or amx)");
}

TEST_SUITE_END();
