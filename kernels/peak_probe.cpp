// The peak probes. Each is a loop of 12 independent register-only chains written in inline asm:
// a compiler given intrinsics plus an optimisation barrier spills registers and under-reports
// by more than half (kernels.md 6.4). Twelve chains cover any current core's latency x
// throughput product (Zen 3/4/5: 4-cycle FMA on 2 pipes needs 8). The asm assembles in this
// baseline x86-64 file; it only runs after cpu_features() confirms AVX2 and FMA.
//
// A trial starts all threads together at a barrier, runs a fixed number of iterations on each
// and times the slowest thread; the result is the best trial, i.e. what the host can deliver
// now, which on a shared machine is the fair denominator for "% of peak".
#include "kernels/peak_probe.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cpu_features.hpp"
#include "kernels/peak_probe_loops.hpp"

namespace tpuctl::kernels {

namespace {

using Clock = std::chrono::steady_clock;

constexpr long k_iterations = 1L << 20; // per trial per thread: ~2-4 ms

bool has_avx2_fma() {
  return cpu_features().avx2_fma;
}

// The units beyond the base probes, with what cpu_features() says (CPUID, XCR0 and, for AMX,
// the tile permission).
bool has_unit(PeakKind kind) {
  const CpuFeatures& f = cpu_features();
  switch (kind) {
  case PeakKind::fp32_fma_avx512:
    return f.avx512;
  case PeakKind::bf16_dot_avx512:
    return f.avx512_bf16;
  case PeakKind::int8_vnni_avx512:
    return f.avx512_vnni;
  case PeakKind::int8_amx:
  case PeakKind::bf16_amx:
    return f.amx;
  default:
    return false;
  }
}

bool is_extra_unit(PeakKind kind) {
  return kind != PeakKind::fp32_fma && kind != PeakKind::int8_exact;
}

bool is_amx(PeakKind kind) {
  return kind == PeakKind::int8_amx || kind == PeakKind::bf16_amx;
}

// Operations (flops or int ops) per iteration of each loop.
constexpr double k_ops_fp32 = 12 * 8 * 2;               // 12 FMAs x 8 lanes x (mul + add)
constexpr double k_ops_int8 = 12 * 16 * 2;              // 12 vpmaddwd x 16 int16 MACs x 2 ops
constexpr double k_ops_fp32_zmm = 12 * 16 * 2;          // 12 FMAs x 16 lanes x 2
constexpr double k_ops_bf16_zmm = 12 * 16 * 2 * 2;      // 12 vdpbf16ps x 16 lanes x 2 products x 2
constexpr double k_ops_vnni_zmm = 12 * 16 * 4 * 2;      // 12 vpdpbusd x 16 lanes x 4 MACs x 2
constexpr double k_ops_amx_int8 = 4 * 16 * 16 * 64 * 2; // 4 tdpbssd x 16 x 16 outputs x 64 MACs
constexpr double k_ops_amx_bf16 = 4 * 16 * 16 * 32 * 2; // 4 tdpbf16ps x 16 x 16 x 32 MACs

#if defined(__x86_64__)
void fma_loop(long iterations) {
  static const float k_one = 1.0f, k_tiny = 1e-7f;
  __asm__ volatile("vbroadcastss %[one], %%ymm14\n\t"
                   "vbroadcastss %[tiny], %%ymm15\n\t"
                   "vxorps %%ymm0, %%ymm0, %%ymm0\n\t"
                   "vxorps %%ymm1, %%ymm1, %%ymm1\n\t"
                   "vxorps %%ymm2, %%ymm2, %%ymm2\n\t"
                   "vxorps %%ymm3, %%ymm3, %%ymm3\n\t"
                   "vxorps %%ymm4, %%ymm4, %%ymm4\n\t"
                   "vxorps %%ymm5, %%ymm5, %%ymm5\n\t"
                   "vxorps %%ymm6, %%ymm6, %%ymm6\n\t"
                   "vxorps %%ymm7, %%ymm7, %%ymm7\n\t"
                   "vxorps %%ymm8, %%ymm8, %%ymm8\n\t"
                   "vxorps %%ymm9, %%ymm9, %%ymm9\n\t"
                   "vxorps %%ymm10, %%ymm10, %%ymm10\n\t"
                   "vxorps %%ymm11, %%ymm11, %%ymm11\n\t"
                   "1:\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm0\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm1\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm2\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm3\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm4\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm5\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm6\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm7\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm8\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm9\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm10\n\t"
                   "vfmadd231ps %%ymm14, %%ymm15, %%ymm11\n\t"
                   "dec %[n]\n\t"
                   "jnz 1b\n\t"
                   "vzeroupper\n\t"
                   : [n] "+r"(iterations)
                   : [one] "m"(k_one), [tiny] "m"(k_tiny)
                   : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                     "xmm8", "xmm9", "xmm10", "xmm11", "xmm14", "xmm15");
}

void int8_exact_loop(long iterations) {
  static const int32_t k_pair = 0x00010001; // two int16 ones
  __asm__ volatile("vpbroadcastd %[pair], %%ymm14\n\t"
                   "vmovdqa %%ymm14, %%ymm15\n\t"
                   "vpxor %%ymm0, %%ymm0, %%ymm0\n\t"
                   "vpxor %%ymm1, %%ymm1, %%ymm1\n\t"
                   "vpxor %%ymm2, %%ymm2, %%ymm2\n\t"
                   "vpxor %%ymm3, %%ymm3, %%ymm3\n\t"
                   "vpxor %%ymm4, %%ymm4, %%ymm4\n\t"
                   "vpxor %%ymm5, %%ymm5, %%ymm5\n\t"
                   "vpxor %%ymm6, %%ymm6, %%ymm6\n\t"
                   "vpxor %%ymm7, %%ymm7, %%ymm7\n\t"
                   "vpxor %%ymm8, %%ymm8, %%ymm8\n\t"
                   "vpxor %%ymm9, %%ymm9, %%ymm9\n\t"
                   "vpxor %%ymm10, %%ymm10, %%ymm10\n\t"
                   "vpxor %%ymm11, %%ymm11, %%ymm11\n\t"
                   "1:\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm12\n\t"
                   "vpaddd %%ymm12, %%ymm0, %%ymm0\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm13\n\t"
                   "vpaddd %%ymm13, %%ymm1, %%ymm1\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm12\n\t"
                   "vpaddd %%ymm12, %%ymm2, %%ymm2\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm13\n\t"
                   "vpaddd %%ymm13, %%ymm3, %%ymm3\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm12\n\t"
                   "vpaddd %%ymm12, %%ymm4, %%ymm4\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm13\n\t"
                   "vpaddd %%ymm13, %%ymm5, %%ymm5\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm12\n\t"
                   "vpaddd %%ymm12, %%ymm6, %%ymm6\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm13\n\t"
                   "vpaddd %%ymm13, %%ymm7, %%ymm7\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm12\n\t"
                   "vpaddd %%ymm12, %%ymm8, %%ymm8\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm13\n\t"
                   "vpaddd %%ymm13, %%ymm9, %%ymm9\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm12\n\t"
                   "vpaddd %%ymm12, %%ymm10, %%ymm10\n\t"
                   "vpmaddwd %%ymm14, %%ymm15, %%ymm13\n\t"
                   "vpaddd %%ymm13, %%ymm11, %%ymm11\n\t"
                   "dec %[n]\n\t"
                   "jnz 1b\n\t"
                   "vzeroupper\n\t"
                   : [n] "+r"(iterations)
                   : [pair] "m"(k_pair)
                   : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                     "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}
#endif

// Portable stand-ins (hosts without AVX2 + FMA): 12 independent multiply-add chains over
// 4-wide arrays, which the compiler is free to vectorise with what the baseline ISA has. The
// volatile sink keeps the work alive.
volatile float g_sink_f = 0;
volatile int32_t g_sink_i = 0;

void portable_fp32_loop(long iterations) {
  float acc[12][8] = {};
  float x = 1.0f, y = g_sink_f + 1e-7f;
  for (long it = 0; it < iterations; ++it) {
    for (auto& chain : acc) {
      for (float& v : chain) {
        v = v * x + y;
      }
    }
  }
  g_sink_f = acc[0][0] + acc[11][7];
}

void portable_int8_loop(long iterations) {
  uint32_t acc[12][16] = {};
  int32_t x = g_sink_i + 1;
  for (long it = 0; it < iterations; ++it) {
    for (auto& chain : acc) {
      for (uint32_t& v : chain) {
        v += static_cast<uint32_t>(x * 3 + x * 5);
      }
    }
  }
  g_sink_i = static_cast<int32_t>(acc[0][0] + acc[11][15]);
}

void run_loop(PeakKind kind, long iterations) {
  switch (kind) {
  case PeakKind::fp32_fma_avx512:
    detail::zmm_fma_loop(iterations);
    return;
  case PeakKind::bf16_dot_avx512:
    detail::zmm_bf16_loop(iterations);
    return;
  case PeakKind::int8_vnni_avx512:
    detail::zmm_vnni_loop(iterations);
    return;
  case PeakKind::int8_amx:
    detail::amx_int8_loop(iterations);
    return;
  case PeakKind::bf16_amx:
    detail::amx_bf16_loop(iterations);
    return;
  default:
    break;
  }
#if defined(__x86_64__)
  if (has_avx2_fma()) {
    if (kind == PeakKind::fp32_fma) {
      fma_loop(iterations);
    } else {
      int8_exact_loop(iterations);
    }
    return;
  }
#endif
  if (kind == PeakKind::fp32_fma) {
    portable_fp32_loop(iterations);
  } else {
    portable_int8_loop(iterations);
  }
}

double ops_per_iteration(PeakKind kind) {
  switch (kind) {
  case PeakKind::fp32_fma:
    return k_ops_fp32;
  case PeakKind::int8_exact:
    return k_ops_int8;
  case PeakKind::fp32_fma_avx512:
    return k_ops_fp32_zmm;
  case PeakKind::bf16_dot_avx512:
    return k_ops_bf16_zmm;
  case PeakKind::int8_vnni_avx512:
    return k_ops_vnni_zmm;
  case PeakKind::int8_amx:
    return k_ops_amx_int8;
  case PeakKind::bf16_amx:
    return k_ops_amx_bf16;
  }
  return 0;
}

} // namespace

const char* to_string(PeakKind kind) {
  switch (kind) {
  case PeakKind::fp32_fma:
    return "fp32_fma";
  case PeakKind::int8_exact:
    return "int8_exact";
  case PeakKind::fp32_fma_avx512:
    return "fp32_fma_avx512";
  case PeakKind::bf16_dot_avx512:
    return "bf16_dot_avx512";
  case PeakKind::int8_vnni_avx512:
    return "int8_vnni_avx512";
  case PeakKind::int8_amx:
    return "int8_amx";
  case PeakKind::bf16_amx:
    return "bf16_amx";
  }
  return "?";
}

const char* unit_isa(PeakKind kind) {
  switch (kind) {
  case PeakKind::fp32_fma:
  case PeakKind::int8_exact:
    return has_avx2_fma() ? "avx2" : "portable";
  case PeakKind::fp32_fma_avx512:
    return "avx512";
  case PeakKind::bf16_dot_avx512:
    return "avx512-bf16";
  case PeakKind::int8_vnni_avx512:
    return "avx512-vnni";
  case PeakKind::int8_amx:
  case PeakKind::bf16_amx:
    return "amx";
  }
  return "?";
}

PeakKind peak_kind_for(GemmDtype dtype, GemmIsa isa) {
  bool int8 = dtype == GemmDtype::int8;
  switch (isa) {
  case GemmIsa::amx:
    if (dtype != GemmDtype::fp32) {
      return int8 ? PeakKind::int8_amx : PeakKind::bf16_amx;
    }
    return PeakKind::fp32_fma_avx512;
  case GemmIsa::avx512_vnni:
    return int8 ? PeakKind::int8_vnni_avx512 : PeakKind::fp32_fma_avx512;
  case GemmIsa::avx512_bf16:
    return dtype == GemmDtype::bf16 ? PeakKind::bf16_dot_avx512
           : int8                   ? PeakKind::int8_exact
                                    : PeakKind::fp32_fma_avx512;
  case GemmIsa::avx512:
    return int8 ? PeakKind::int8_exact : PeakKind::fp32_fma_avx512;
  default:
    return int8 ? PeakKind::int8_exact : PeakKind::fp32_fma;
  }
}

bool host_has(PeakKind kind) {
  return is_extra_unit(kind) ? has_unit(kind) : true;
}

std::vector<PeakKind> host_units() {
  std::vector<PeakKind> out;
  for (PeakKind k : {PeakKind::fp32_fma, PeakKind::int8_exact, PeakKind::fp32_fma_avx512,
                     PeakKind::bf16_dot_avx512, PeakKind::int8_vnni_avx512, PeakKind::int8_amx,
                     PeakKind::bf16_amx}) {
    if (host_has(k)) {
      out.push_back(k);
    }
  }
  return out;
}

const char* probe_description(PeakKind kind) {
  switch (kind) {
  case PeakKind::fp32_fma_avx512:
    return "12 independent vfmadd231ps zmm chains (inline asm), 2 flop per lane";
  case PeakKind::bf16_dot_avx512:
    return "12 independent vdpbf16ps zmm chains (inline asm), 2 bf16 products of 2 flop per lane";
  case PeakKind::int8_vnni_avx512:
    return "12 independent vpdpbusd zmm chains (inline asm), 4 u8 x s8 MACs of 2 ops per lane";
  case PeakKind::int8_amx:
    return "tdpbssd round-robin over 4 C tiles (tmm0-3), 16 x 16 x 64 int8 MACs of 2 ops each";
  case PeakKind::bf16_amx:
    return "tdpbf16ps round-robin over 4 C tiles (tmm0-3), 16 x 16 x 32 bf16 MACs of 2 flop each";
  default:
    break;
  }
  if (has_avx2_fma()) {
    return kind == PeakKind::fp32_fma
               ? "12 independent vfmadd231ps ymm chains (inline asm), 2 flop per lane"
               : "12 independent vpmaddwd + vpaddd ymm chains (inline asm), 2 ops per int16 MAC";
  }
  return kind == PeakKind::fp32_fma ? "portable C++ multiply-add loop (no AVX2 + FMA)"
                                    : "portable C++ int32 multiply-add loop (no AVX2 + FMA)";
}

double measure_peak_gops(PeakKind kind, int threads, double budget_seconds) {
  if (!host_has(kind)) {
    return 0;
  }
  threads = std::max(threads, 1);
  // The portable loops do far more work per iteration; keep their trials short too.
  // An AMX iteration is 4 tile instructions of about 16 cycles each.
  long iterations = is_amx(kind)                            ? k_iterations / 16
                    : has_avx2_fma() || is_extra_unit(kind) ? k_iterations
                                                            : k_iterations / 64;
  double work = ops_per_iteration(kind) * static_cast<double>(iterations) * threads;
  double best = 0;
  auto start = Clock::now();
  int trials = 0;
  while (trials < 3 ||
         std::chrono::duration<double>(Clock::now() - start).count() < budget_seconds) {
    ++trials;
    std::barrier sync(threads);
    std::vector<double> ends(static_cast<size_t>(threads), 0);
    Clock::time_point t0;
    auto body = [&](int t) {
      sync.arrive_and_wait();
      if (t == 0) {
        t0 = Clock::now();
      }
      sync.arrive_and_wait();
      run_loop(kind, iterations);
      ends[static_cast<size_t>(t)] = std::chrono::duration<double>(Clock::now() - t0).count();
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) {
      pool.emplace_back(body, t);
    }
    body(0);
    for (auto& th : pool) {
      th.join();
    }
    double wall = *std::max_element(ends.begin(), ends.end());
    if (wall > 0) {
      best = std::max(best, work / wall / 1e9);
    }
    if (trials >= 100) {
      break;
    }
  }
  return best;
}

double host_peak_gops(PeakKind kind, int threads) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, double> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(static_cast<int>(kind), std::max(threads, 1));
  auto it = cache.find(key);
  if (it != cache.end()) {
    return it->second;
  }
  double value = measure_peak_gops(kind, key.second);
  cache.emplace(key, value);
  return value;
}

} // namespace tpuctl::kernels
