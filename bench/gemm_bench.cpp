// gemm_bench: tpuctl's fast GEMM against OpenBLAS in one process (kernels.md 6.1 protocol).
//
//   fp32:  gemm_f32                      vs cblas_sgemm
//   bf16:  gemm_bf16 (widens in packing) vs "convert A and B to fp32, then cblas_sgemm", the
//          conversion timed in (Debian's OpenBLAS exports no sbgemm)
//   int8:  gemm_s8 (exact int32)         vs cblas_sgemm on the same shape: the op-rate peer
// Shapes: square 256..2048, padding-hostile 127/129/257/1025, and M in {1, 8, 32} with
// N = K = 4096; 1 and 2 threads (OpenBLAS set to the same count). Every sample pair runs the
// candidate and the baseline back to back, alternating which goes first; we report medians,
// the best and worst, and the median of the per-pair ratios, which cancels most of the drift of
// a shared host. "packed" is the weight-stationary call (B packed once, outside the timer).
// The peak probes run at the start and at the end; a session whose probes moved by more than
// 10%, or whose 2-thread probe is below 1.8x the 1-thread probe, is flagged as disturbed.
//
// Output: markdown on stdout (bench/README.md embeds it), progress on stderr.
#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <emmintrin.h>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/gemm.hpp"
#include "kernels/peak_probe.hpp"

using namespace tpuctl::kernels;

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int reps = 11;
  std::vector<int> threads{1, 2};
  bool quick = false;
};

struct Shape {
  const char* group;
  int m, n, k;
};

struct Row {
  std::string group;
  int threads = 1;
  Shape shape{};
  std::string dtype;
  double cand_med = 0, cand_best = 0, cand_worst = 0;
  double base_med = 0, base_best = 0;
  double packed_med = 0;
  double ratio_med = 0;     // median over pairs of baseline time / candidate time
  double cpu_ratio_med = 0; // the same with the calling thread's CPU time (1 thread only)
  double peak = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Wall-clock seconds per call; `cpu` receives the calling thread's CPU seconds per call, which
// on one thread excludes the time the host's other tenants took the core away.
double seconds_of(const std::function<void()>& f, int inner, double* cpu = nullptr) {
  double c0 = thread_cpu_seconds();
  auto t0 = Clock::now();
  for (int i = 0; i < inner; ++i) {
    f();
  }
  double wall = std::chrono::duration<double>(Clock::now() - t0).count() / inner;
  if (cpu) {
    *cpu = (thread_cpu_seconds() - c0) / inner;
  }
  return wall;
}

// bf16 -> fp32 for the baseline, 8 values per step with SSE2 (baseline x86-64): a bf16 is the
// high half of an fp32, so interleaving zeros below each value is the whole conversion.
void widen_bf16(const bf16_t* src, float* dst, size_t count) {
  size_t i = 0;
  __m128i zero = _mm_setzero_si128();
  for (; i + 8 <= count; i += 8) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_unpacklo_epi16(zero, v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 4), _mm_unpackhi_epi16(zero, v));
  }
  for (; i < count; ++i) {
    dst[i] = bf16_to_fp32(src[i]);
  }
}

void die_on(const tpuctl::Status& st) {
  if (!st) {
    std::fprintf(stderr, "gemm_bench: %s\n", st.error().message.c_str());
    std::exit(1);
  }
}

// Times candidate, weight-stationary candidate and baseline, interleaved.
Row measure(const Args& args, int threads, const Shape& s, const std::string& dtype,
            const std::function<void()>& cand, const std::function<void()>& packed,
            const std::function<void()>& base) {
  cand();
  packed();
  base();
  double warm = std::max({seconds_of(cand, 1), seconds_of(base, 1), 1e-7});
  int inner = std::max(1, static_cast<int>(std::ceil(0.004 / warm))); // samples of >= 4 ms
  std::vector<double> tc, tp, tb, ratio, cpu_ratio;
  for (int r = 0; r < args.reps; ++r) {
    double c, p, b, cc = 0, bc = 0;
    if (r % 2 == 0) {
      c = seconds_of(cand, inner, &cc);
      p = seconds_of(packed, inner);
      b = seconds_of(base, inner, &bc);
    } else {
      b = seconds_of(base, inner, &bc);
      p = seconds_of(packed, inner);
      c = seconds_of(cand, inner, &cc);
    }
    tc.push_back(c);
    tp.push_back(p);
    tb.push_back(b);
    ratio.push_back(b / c);
    cpu_ratio.push_back(cc > 0 ? bc / cc : 0);
  }
  double ops = 2.0 * s.m * s.n * s.k / 1e9;
  Row row;
  row.group = s.group;
  row.threads = threads;
  row.shape = s;
  row.dtype = dtype;
  row.cand_med = ops / median(tc);
  row.cand_best = ops / *std::min_element(tc.begin(), tc.end());
  row.cand_worst = ops / *std::max_element(tc.begin(), tc.end());
  row.base_med = ops / median(tb);
  row.base_best = ops / *std::min_element(tb.begin(), tb.end());
  row.packed_med = ops / median(tp);
  row.ratio_med = median(ratio);
  row.cpu_ratio_med = threads == 1 ? median(cpu_ratio) : 0;
  return row;
}

std::vector<Row> run_shape(const Args& args, int threads, const Shape& s, double peak_f32,
                           double peak_i8) {
  std::mt19937 rng(12345u + static_cast<unsigned>(s.m * 7 + s.n * 3 + s.k));
  std::uniform_real_distribution<float> real(-1, 1);
  std::uniform_int_distribution<int> byte(-128, 127);
  size_t as = static_cast<size_t>(s.m) * s.k, bs = static_cast<size_t>(s.k) * s.n,
         cs = static_cast<size_t>(s.m) * s.n;
  std::vector<float> a(as), b(bs), c(cs), a_wide(as), b_wide(bs);
  std::vector<bf16_t> ah(as), bh(bs);
  std::vector<int8_t> a8(as), b8(bs);
  std::vector<int32_t> c32(cs);
  for (size_t i = 0; i < as; ++i) {
    a[i] = real(rng);
    ah[i] = fp32_to_bf16(a[i]);
    a8[i] = static_cast<int8_t>(byte(rng));
  }
  for (size_t i = 0; i < bs; ++i) {
    b[i] = real(rng);
    bh[i] = fp32_to_bf16(b[i]);
    b8[i] = static_cast<int8_t>(byte(rng));
  }
  GemmOptions o;
  o.threads = threads;
  int m = s.m, n = s.n, k = s.k;
  auto sgemm = [&](const float* x, const float* y) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x, k, y, n, 0.0f,
                c.data(), n);
  };
  std::vector<Row> rows;

  auto pf = pack_b_f32(k, n, b.data(), n, o);
  die_on(pf.has_value() ? tpuctl::Status{} : tpuctl::Status{pf.error()});
  rows.push_back(measure(
      args, threads, s, "fp32",
      [&] { die_on(gemm_f32(m, n, k, a.data(), k, b.data(), n, c.data(), n, o)); },
      [&] { die_on(gemm_f32_packed(m, a.data(), k, *pf, c.data(), n, o)); },
      [&] { sgemm(a.data(), b.data()); }));
  rows.back().peak = peak_f32;

  auto ph = pack_b_bf16(k, n, bh.data(), n, o);
  die_on(ph.has_value() ? tpuctl::Status{} : tpuctl::Status{ph.error()});
  rows.push_back(measure(
      args, threads, s, "bf16",
      [&] { die_on(gemm_bf16(m, n, k, ah.data(), k, bh.data(), n, c.data(), n, o)); },
      [&] { die_on(gemm_bf16_packed(m, ah.data(), k, *ph, c.data(), n, o)); },
      [&] {
        widen_bf16(ah.data(), a_wide.data(), as);
        widen_bf16(bh.data(), b_wide.data(), bs);
        sgemm(a_wide.data(), b_wide.data());
      }));
  rows.back().peak = peak_f32;

  auto p8 = pack_b_s8(k, n, b8.data(), n, o);
  die_on(p8.has_value() ? tpuctl::Status{} : tpuctl::Status{p8.error()});
  rows.push_back(measure(
      args, threads, s, "int8",
      [&] { die_on(gemm_s8(m, n, k, a8.data(), k, b8.data(), n, c32.data(), n, o)); },
      [&] { die_on(gemm_s8_packed(m, a8.data(), k, *p8, c32.data(), n, o)); },
      [&] { sgemm(a.data(), b.data()); }));
  rows.back().peak = peak_i8;
  return rows;
}

struct Probes {
  double f32_1 = 0, f32_2 = 0, i8_1 = 0, i8_2 = 0;
};

Probes probe_all() {
  Probes p;
  p.f32_1 = measure_peak_gops(PeakKind::fp32_fma, 1, 0.25);
  p.f32_2 = measure_peak_gops(PeakKind::fp32_fma, 2, 0.25);
  p.i8_1 = measure_peak_gops(PeakKind::int8_exact, 1, 0.25);
  p.i8_2 = measure_peak_gops(PeakKind::int8_exact, 2, 0.25);
  return p;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      return line.substr(line.find(':') + 2);
    }
  }
  return "unknown";
}

std::string shape_text(const Shape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string w = argv[i];
    if (w == "--quick") {
      a.quick = true;
      a.reps = 7;
    } else if (w == "--reps" && i + 1 < argc) {
      a.reps = std::max(3, std::atoi(argv[++i]));
    } else if (w == "--threads" && i + 1 < argc) {
      a.threads.clear();
      std::string list = argv[++i];
      for (size_t p = 0; p < list.size();) {
        size_t q = list.find(',', p);
        a.threads.push_back(std::max(1, std::atoi(list.substr(p, q - p).c_str())));
        p = q == std::string::npos ? list.size() : q + 1;
      }
    } else {
      std::fprintf(stderr, "usage: gemm_bench [--quick] [--reps N] [--threads 1,2]\n");
      std::exit(2);
    }
  }
  return a;
}

const Row* find(const std::vector<Row>& rows, int threads, int m, int n, int k,
                const std::string& dtype) {
  for (const Row& r : rows) {
    if (r.threads == threads && r.shape.m == m && r.shape.n == n && r.shape.k == k &&
        r.dtype == dtype) {
      return &r;
    }
  }
  return nullptr;
}

void print_targets(const std::vector<Row>& rows) {
  std::printf("\n### Targets (medians)\n\n");
  std::printf("| target | measured (wall clock) | met | by CPU time (1 thread) |\n"
              "|---|---|---|---|\n");
  auto line = [](const std::string& what, double value, double goal, double cpu = 0) {
    std::string by_cpu = cpu > 0 ? std::to_string(cpu).substr(0, 5) : "-";
    std::printf("| %s >= %.2f | %.3f | %s | %s |\n", what.c_str(), goal, value,
                value >= goal ? "yes" : "**no**", by_cpu.c_str());
  };
  const std::pair<const char*, double> goals[] = {{"fp32", 0.9}, {"bf16", 0.95}, {"int8", 1.3}};
  for (int n : {1024, 2048}) {
    for (const auto& [dtype, goal] : goals) {
      if (const Row* r = find(rows, 1, n, n, n, dtype)) {
        line(std::string(dtype) + " " + std::to_string(n) + " 1T vs OpenBLAS", r->ratio_med, goal,
             r->cpu_ratio_med);
      }
    }
  }
  for (int n : {1024, 2048}) {
    for (const char* dtype : {"fp32", "bf16", "int8"}) {
      const Row* one = find(rows, 1, n, n, n, dtype);
      const Row* two = find(rows, 2, n, n, n, dtype);
      if (one && two) {
        line(std::string(dtype) + " " + std::to_string(n) + " 2T / own 1T",
             two->cand_med / one->cand_med, 1.75);
      }
    }
  }
  for (const Row& r : rows) {
    if (r.group == std::string("padding-hostile")) {
      line(r.dtype + " " + shape_text(r.shape) + " " + std::to_string(r.threads) + "T vs OpenBLAS",
           r.ratio_med, 1.0, r.cpu_ratio_med);
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  std::vector<Shape> shapes;
  for (int n : {256, 512, 1024, 2048}) {
    if (!(args.quick && n > 1024)) {
      shapes.push_back({"square", n, n, n});
    }
  }
  for (int n : {127, 129, 257, 1025}) {
    shapes.push_back({"padding-hostile", n, n, n});
  }
  for (int m : {1, 8, 32}) {
    shapes.push_back({"small-M", m, 4096, 4096});
  }

  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::printf("## Session %s\n\n", date);
  std::printf("- CPU: %s, %u hardware threads; kernel ISA: %s\n", cpu_model().c_str(),
              std::thread::hardware_concurrency(), to_string(*selected_isa(GemmDtype::int8)));
  std::printf("- OpenBLAS: %s (core %s)\n", openblas_get_config(), openblas_get_corename());
  std::printf("- protocol: %d interleaved pairs per row, samples of >= 4 ms, medians\n", args.reps);
  std::fflush(stdout);

  std::fprintf(stderr, "probing peaks...\n");
  Probes start = probe_all();
  std::vector<Row> rows;
  for (int threads : args.threads) {
    openblas_set_num_threads(threads);
    for (const Shape& s : shapes) {
      std::fprintf(stderr, "%dT %s %s\n", threads, s.group, shape_text(s).c_str());
      double pf = threads == 1 ? start.f32_1 : start.f32_2;
      double pi = threads == 1 ? start.i8_1 : start.i8_2;
      for (Row& r : run_shape(args, threads, s, pf, pi)) {
        rows.push_back(r);
      }
    }
  }
  Probes end = probe_all();

  std::printf("- peak probes at start: fp32 FMA %.1f (1T) / %.1f (2T) GFLOP/s; exact int8 "
              "%.1f (1T) / %.1f (2T) Gop/s\n",
              start.f32_1, start.f32_2, start.i8_1, start.i8_2);
  std::printf("- peak probes at end:   fp32 FMA %.1f (1T) / %.1f (2T) GFLOP/s; exact int8 "
              "%.1f (1T) / %.1f (2T) Gop/s\n",
              end.f32_1, end.f32_2, end.i8_1, end.i8_2);
  bool drift = std::fabs(end.f32_1 - start.f32_1) > 0.1 * start.f32_1 ||
               std::fabs(end.f32_2 - start.f32_2) > 0.1 * start.f32_2;
  bool weak_two = start.f32_2 < 1.8 * start.f32_1 || end.f32_2 < 1.8 * end.f32_1;
  std::printf("- session: %s\n\n", drift || weak_two
                                       ? "**disturbed** (probes moved > 10% or 2T probe < 1.8x 1T)"
                                       : "clean (probes within 10%, 2T probe >= 1.8x 1T)");

  std::printf("| T | group | m x n x k | dtype | tpuctl Gop/s median (best / worst) | "
              "packed-B Gop/s | OpenBLAS Gop/s median (best) | ratio (median of pairs) | "
              "ratio by CPU time | %% of peak |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::string cpu = r.threads == 1 ? std::to_string(r.cpu_ratio_med).substr(0, 5) : "-";
    std::printf(
        "| %d | %s | %s | %s | %.1f (%.1f / %.1f) | %.1f | %.1f (%.1f) | %.3f | %s | %.0f%% |\n",
        r.threads, r.group.c_str(), shape_text(r.shape).c_str(), r.dtype.c_str(), r.cand_med,
        r.cand_best, r.cand_worst, r.packed_med, r.base_med, r.base_best, r.ratio_med, cpu.c_str(),
        r.peak > 0 ? 100 * r.cand_med / r.peak : 0.0);
  }
  std::printf("\nSmall-M rows as weight bandwidth (B bytes / median time, GB/s):\n\n");
  std::printf("| T | m x n x k | dtype | tpuctl cold | tpuctl packed-B | OpenBLAS |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    if (r.group != std::string("small-M")) {
      continue;
    }
    double elem = r.dtype == "int8" ? 1 : (r.dtype == "bf16" ? 2 : 4);
    double base_elem = r.dtype == "bf16" ? 2 : 4; // baseline reads bf16 (converts) or fp32
    double bytes = static_cast<double>(r.shape.k) * r.shape.n / 1e9;
    double ops = 2.0 * r.shape.m * r.shape.n * r.shape.k / 1e9;
    std::printf("| %d | %s | %s | %.1f | %.1f | %.1f |\n", r.threads, shape_text(r.shape).c_str(),
                r.dtype.c_str(), bytes * elem / (ops / r.cand_med),
                bytes * elem / (ops / r.packed_med), bytes * base_elem / (ops / r.base_med));
  }
  print_targets(rows);
  return 0;
}
