// gemm_bench: tpuctl's fast GEMM against its peers in one process (kernels.md 6.1 protocol,
// amx.md section 8 for the peers).
//
//   fp32:  gemm_f32   vs OpenBLAS cblas_sgemm and oneDNN matmul f32
//   bf16:  gemm_bf16  vs oneDNN matmul bf16 x bf16 -> f32, and "convert A and B to fp32, then
//          cblas_sgemm" (the conversion timed in; Debian's OpenBLAS exports no sbgemm)
//   int8:  gemm_s8    vs oneDNN matmul s8 x s8 -> s32 (exact on VNNI and AMX; checked here), and
//          cblas_sgemm on the same shape (the op-rate comparison of the AVX2 era)
// Each row is compared with its better peer. Shapes: square 256..2048, padding-hostile
// 127/129/257/1025, and M in {1, 8, 32} with N = K = 4096 (--targets: only the target squares
// 1024 and 2048); 1 and 2 threads (the peers set to the same count). Every sample runs tpuctl,
// tpuctl packed-B and each peer back to back, rotating which goes first; we report medians,
// the best and worst, and the median of the per-sample ratios, which cancels most of the drift
// of a shared host. The peak probes of every unit the host has run at the start and at the end;
// a session whose probes moved by more than 10%, or whose 2-thread probe is below 1.8x the
// 1-thread one, is flagged as disturbed.
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
#include <dnnl.hpp>
#include <emmintrin.h>
#include <fstream>
#include <functional>
#include <omp.h>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
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
  bool targets = false;
  // tpuctl's family cap, as `tpuctl kernel run --isa` (run_gemm_bench.sh --avx2-host passes
  // avx2 and caps both peers to AVX2 as well).
  GemmIsa isa = GemmIsa::auto_select;
  GemmOptions options(int count) const {
    GemmOptions o;
    o.threads = count;
    o.isa = isa;
    return o;
  }
};

struct Shape {
  const char* group;
  int m, n, k;
};

struct Stats {
  double med = 0, best = 0, worst = 0; // Gop/s
};

struct PeerResult {
  std::string name;   // "OpenBLAS" or "oneDNN"
  std::string kernel; // what it ran: the OpenBLAS core, oneDNN's implementation string
  Stats rate;
  double ratio_med = 0;     // median over samples of peer time / tpuctl time (> 1: tpuctl faster)
  double cpu_ratio_med = 0; // the same with the calling thread's CPU time (1 thread only)
};

struct Row {
  std::string group;
  int threads = 1;
  Shape shape{};
  std::string dtype;
  std::string isa;  // tpuctl's kernel family
  std::string unit; // the peak probe of that family
  double peak = 0;
  Stats cand, packed;
  std::vector<PeerResult> peers;
  // The faster peer: the smaller ratio by wall clock (or, with `by_cpu`, by CPU time).
  const PeerResult* better(bool by_cpu = false) const {
    const PeerResult* b = nullptr;
    for (const auto& p : peers) {
      if (!b || (by_cpu ? p.cpu_ratio_med < b->cpu_ratio_med : p.ratio_med < b->ratio_med)) {
        b = &p;
      }
    }
    return b;
  }
  const PeerResult* peer(const std::string& name) const {
    for (const auto& p : peers) {
      if (p.name == name) {
        return &p;
      }
    }
    return nullptr;
  }
};

struct Contender {
  std::string name, kernel;
  std::function<void()> run;
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

Stats stats_of(const std::vector<double>& seconds, double gop) {
  return {gop / median(seconds), gop / *std::min_element(seconds.begin(), seconds.end()),
          gop / *std::max_element(seconds.begin(), seconds.end())};
}

// bf16 -> fp32 for the convert-then-sgemm peer, 8 values per step with SSE2 (baseline x86-64):
// a bf16 is the high half of an fp32, so interleaving zeros below each value is the whole
// conversion.
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

// ---- oneDNN ----

dnnl::engine& dnnl_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& dnnl_stream() {
  static dnnl::stream s(dnnl_engine());
  return s;
}

// A oneDNN matmul on the caller's row-major buffers (created outside the timer).
struct DnnlMatmul {
  dnnl::matmul prim;
  std::unordered_map<int, dnnl::memory> args;
  std::string impl;
  void run() {
    prim.execute(dnnl_stream(), args);
    dnnl_stream().wait();
  }
};

// Nothing when oneDNN has no implementation for it (bf16 under ONEDNN_MAX_CPU_ISA=AVX2).
std::optional<DnnlMatmul> dnnl_matmul(dnnl::memory::data_type in, dnnl::memory::data_type out,
                                      int m, int n, int k, void* a, void* b, void* c) {
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc a_md({m, k}, in, tag::ab), b_md({k, n}, in, tag::ab),
      c_md({m, n}, out, tag::ab);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), dnnl_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
  DnnlMatmul mm{dnnl::matmul(pd), {}, pd.impl_info_str()};
  mm.args = {{DNNL_ARG_SRC, dnnl::memory(a_md, dnnl_engine(), a)},
             {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, dnnl_engine(), b)},
             {DNNL_ARG_DST, dnnl::memory(c_md, dnnl_engine(), c)}};
  return mm;
}

// The peers of a row: OpenBLAS, and oneDNN when it has an implementation (which `impl` records
// for the session header: its implementation string, or "none").
std::vector<Contender> peers_with(Contender openblas, std::optional<DnnlMatmul>& dn,
                                  std::string& impl) {
  impl = dn ? dn->impl : "none";
  std::vector<Contender> peers{std::move(openblas)};
  if (dn) {
    peers.push_back({"oneDNN", dn->impl, [&dn] { dn->run(); }});
  }
  return peers;
}

// ---- one row ----

// Times tpuctl, tpuctl packed-B and the peers, interleaved: each sample runs them all back to
// back, the order rotating from sample to sample.
Row measure(const Args& args, int threads, const Shape& s, const std::string& dtype,
            const Contender& cand, const Contender& packed, const std::vector<Contender>& peers) {
  std::vector<const Contender*> all{&cand, &packed};
  for (const auto& p : peers) {
    all.push_back(&p);
  }
  double warm = 1e-7;
  for (const Contender* c : all) {
    c->run();
    warm = std::max(warm, seconds_of(c->run, 1));
  }
  int inner = std::max(1, static_cast<int>(std::ceil(0.004 / warm))); // samples of >= 4 ms
  std::vector<std::vector<double>> wall(all.size()), cpu(all.size());
  for (int r = 0; r < args.reps; ++r) {
    for (size_t i = 0; i < all.size(); ++i) {
      size_t c = (i + static_cast<size_t>(r)) % all.size();
      double cc = 0;
      wall[c].push_back(seconds_of(all[c]->run, inner, &cc));
      cpu[c].push_back(cc);
    }
  }
  double gop = 2.0 * s.m * s.n * s.k / 1e9;
  Row row;
  row.group = s.group;
  row.threads = threads;
  row.shape = s;
  row.dtype = dtype;
  row.cand = stats_of(wall[0], gop);
  row.packed = stats_of(wall[1], gop);
  for (size_t p = 2; p < all.size(); ++p) {
    std::vector<double> ratio, cpu_ratio;
    for (int r = 0; r < args.reps; ++r) {
      ratio.push_back(wall[p][static_cast<size_t>(r)] / wall[0][static_cast<size_t>(r)]);
      double c0 = cpu[0][static_cast<size_t>(r)];
      cpu_ratio.push_back(c0 > 0 ? cpu[p][static_cast<size_t>(r)] / c0 : 0);
    }
    row.peers.push_back({all[p]->name, all[p]->kernel, stats_of(wall[p], gop), median(ratio),
                         threads == 1 ? median(cpu_ratio) : 0});
  }
  return row;
}

struct Probe {
  PeakKind kind;
  double one = 0, two = 0;
};

struct Session {
  std::string openblas_core;
  std::string onednn_impl[3]; // fp32, bf16, int8: from the last row that created each
  std::string onednn_s8_exact = "not checked";
  std::vector<Probe> start; // the peak probes at the start of the session
  double peak(PeakKind kind, int threads) const {
    for (const Probe& p : start) {
      if (p.kind == kind) {
        return threads == 1 ? p.one : p.two;
      }
    }
    return 0;
  }
};

template <typename In>
void fill(std::vector<In>& v, std::mt19937& rng) {
  std::uniform_real_distribution<float> real(-1, 1);
  std::uniform_int_distribution<int> byte(-128, 127);
  for (auto& x : v) {
    if constexpr (sizeof(In) == 1) {
      x = static_cast<In>(byte(rng));
    } else if constexpr (sizeof(In) == 2) {
      x = fp32_to_bf16(real(rng));
    } else {
      x = real(rng);
    }
  }
}

std::vector<Row> run_shape(const Args& args, int threads, const Shape& s, Session& session) {
  std::mt19937 rng(12345u + static_cast<unsigned>(s.m * 7 + s.n * 3 + s.k));
  size_t as = static_cast<size_t>(s.m) * s.k, bs = static_cast<size_t>(s.k) * s.n,
         cs = static_cast<size_t>(s.m) * s.n;
  std::vector<float> a(as), b(bs), c(cs), c2(cs), a_wide(as), b_wide(bs);
  std::vector<bf16_t> ah(as), bh(bs);
  std::vector<int8_t> a8(as), b8(bs);
  std::vector<int32_t> c32(cs), c32_peer(cs);
  fill(a, rng);
  fill(b, rng);
  fill(ah, rng);
  fill(bh, rng);
  fill(a8, rng);
  fill(b8, rng);
  const GemmOptions o = args.options(threads);
  const int m = s.m, n = s.n, k = s.k;
  const std::string core = session.openblas_core;
  auto sgemm = [&, m, n, k](const float* x, const float* y) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x, k, y, n, 0.0f,
                c2.data(), n);
  };
  using dt = dnnl::memory::data_type;
  std::vector<Row> rows;
  auto finish = [&](Row row, GemmDtype dtype) {
    row.isa = to_string(*selected_isa(dtype, o));
    PeakKind unit = peak_kind_for(dtype, *selected_isa(dtype, o));
    row.unit = to_string(unit);
    row.peak = session.peak(unit, threads);
    rows.push_back(row);
  };

  {
    auto pf = pack_b_f32(k, n, b.data(), n, o);
    die_on(pf.has_value() ? tpuctl::Status{} : tpuctl::Status{pf.error()});
    std::optional<DnnlMatmul> dn =
        dnnl_matmul(dt::f32, dt::f32, m, n, k, a.data(), b.data(), c2.data());
    finish(
        measure(
            args, threads, s, "fp32",
            {"tpuctl", "",
             [&] { die_on(gemm_f32(m, n, k, a.data(), k, b.data(), n, c.data(), n, o)); }},
            {"packed", "", [&] { die_on(gemm_f32_packed(m, a.data(), k, *pf, c.data(), n, o)); }},
            peers_with({"OpenBLAS", "sgemm, core " + core, [&] { sgemm(a.data(), b.data()); }}, dn,
                       session.onednn_impl[0])),
        GemmDtype::fp32);
  }
  {
    auto ph = pack_b_bf16(k, n, bh.data(), n, o);
    die_on(ph.has_value() ? tpuctl::Status{} : tpuctl::Status{ph.error()});
    std::optional<DnnlMatmul> dn =
        dnnl_matmul(dt::bf16, dt::f32, m, n, k, ah.data(), bh.data(), c2.data());
    finish(
        measure(
            args, threads, s, "bf16",
            {"tpuctl", "",
             [&] { die_on(gemm_bf16(m, n, k, ah.data(), k, bh.data(), n, c.data(), n, o)); }},
            {"packed", "", [&] { die_on(gemm_bf16_packed(m, ah.data(), k, *ph, c.data(), n, o)); }},
            peers_with({"OpenBLAS", "widen to fp32 + sgemm, core " + core,
                        [&] {
                          widen_bf16(ah.data(), a_wide.data(), as);
                          widen_bf16(bh.data(), b_wide.data(), bs);
                          sgemm(a_wide.data(), b_wide.data());
                        }},
                       dn, session.onednn_impl[1])),
        GemmDtype::bf16);
  }
  {
    auto p8 = pack_b_s8(k, n, b8.data(), n, o);
    die_on(p8.has_value() ? tpuctl::Status{} : tpuctl::Status{p8.error()});
    std::optional<DnnlMatmul> dn =
        dnnl_matmul(dt::s8, dt::s32, m, n, k, a8.data(), b8.data(), c32_peer.data());
    finish(
        measure(
            args, threads, s, "int8",
            {"tpuctl", "",
             [&] { die_on(gemm_s8(m, n, k, a8.data(), k, b8.data(), n, c32.data(), n, o)); }},
            {"packed", "", [&] { die_on(gemm_s8_packed(m, a8.data(), k, *p8, c32.data(), n, o)); }},
            peers_with(
                {"OpenBLAS", "sgemm op rate, core " + core, [&] { sgemm(a.data(), b.data()); }}, dn,
                session.onednn_impl[2])),
        GemmDtype::int8);
    // tpuctl's int8 is exact (the unit tests hold it to the reference); is oneDNN's here?
    long bad = 0;
    for (size_t i = 0; i < cs; ++i) {
      bad += c32[i] != c32_peer[i];
    }
    if (dn && (session.onednn_s8_exact == "not checked" || bad > 0)) {
      session.onednn_s8_exact = bad == 0 ? "yes (equal to tpuctl's exact result on every int8 row)"
                                         : "**no**: " + std::to_string(bad) + " of " +
                                               std::to_string(cs) + " elements differ at " +
                                               std::to_string(m) + "x" + std::to_string(n) + "x" +
                                               std::to_string(k);
    }
  }
  return rows;
}

// ---- reporting ----

std::vector<Probe> probe_all() {
  std::vector<Probe> out;
  for (PeakKind kind : host_units()) {
    out.push_back({kind, measure_peak_gops(kind, 1, 0.25), measure_peak_gops(kind, 2, 0.25)});
  }
  return out;
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
    } else if (w == "--targets") {
      a.targets = true;
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
    } else if (w == "--isa" && i + 1 < argc) {
      auto isa = parse_gemm_isa(argv[++i]);
      if (isa) {
        a.isa = *isa;
      }
      auto chosen = isa ? selected_isa(GemmDtype::int8, a.options(1)) : isa;
      if (!chosen) {
        std::fprintf(stderr, "gemm_bench: %s\n", chosen.error().message.c_str());
        std::exit(2);
      }
    } else {
      std::fprintf(
          stderr,
          "usage: gemm_bench [--quick | --targets] [--reps N] [--threads 1,2] [--isa ISA]\n");
      std::exit(2);
    }
  }
  return a;
}

const Row* find(const std::vector<Row>& rows, int threads, int n, const std::string& dtype) {
  for (const Row& r : rows) {
    if (r.threads == threads && r.shape.m == n && r.shape.n == n && r.shape.k == n &&
        r.dtype == dtype && r.group == std::string("square")) {
      return &r;
    }
  }
  return nullptr;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Issue 19's targets for the host's kind (by the int8 family that ran), or the first kernel
// issue's on an AVX2-only host.
void print_targets(const Args& args, const std::vector<Row>& rows) {
  std::printf("\n### Targets (medians of interleaved samples)\n\n");
  std::printf("| target | by wall clock | met | 1 thread by CPU time | met |\n"
              "|---|---|---|---|---|\n");
  auto line = [](const std::string& what, double goal, double value, double cpu = 0) {
    std::printf("| %s >= %.2f | %.3f | %s | %s | %s |\n", what.c_str(), goal, value,
                value >= goal ? "yes" : "**no**", cpu > 0 ? fixed(cpu, 3).c_str() : "-",
                cpu > 0 ? (cpu >= goal ? "yes" : "**no**") : "-");
  };
  const GemmIsa int8_isa = *selected_isa(GemmDtype::int8, args.options(1));
  const bool wide = int8_isa != GemmIsa::avx2 && int8_isa != GemmIsa::portable;
  for (int n : {1024, 2048}) {
    for (const char* dtype : {"fp32", "bf16", "int8"}) {
      const Row* r = find(rows, 1, n, dtype);
      if (!r) {
        continue;
      }
      const std::string d = dtype;
      const std::string size = " " + std::to_string(n) + " 1T vs ";
      if (wide && d == "fp32") {
        // AVX-512 or AMX host: fp32 against the better peer, bf16 and int8 against oneDNN.
        line(d + size + "the better peer (wall: " + r->better()->name +
                 ", CPU: " + r->better(true)->name + ")",
             0.95, r->better()->ratio_med, r->better(true)->cpu_ratio_med);
      } else if (wide) {
        const PeerResult* p = r->peer("oneDNN");
        line(d + size + "oneDNN", 0.9, p->ratio_med, p->cpu_ratio_med);
      } else {
        const PeerResult* p = r->peer("OpenBLAS");
        line(d + size + "OpenBLAS", d == "fp32" ? 0.9 : (d == "bf16" ? 0.95 : 1.3), p->ratio_med,
             p->cpu_ratio_med);
      }
    }
  }
  for (int n : {1024, 2048}) {
    for (const char* dtype : {"fp32", "bf16", "int8"}) {
      const Row* one = find(rows, 1, n, dtype);
      const Row* two = find(rows, 2, n, dtype);
      if (one && two) {
        line(std::string(dtype) + " " + std::to_string(n) + " 2T / own 1T", wide ? 1.8 : 1.75,
             two->cand.med / one->cand.med);
      }
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  std::vector<Shape> shapes;
  for (int n : {256, 512, 1024, 2048}) {
    if ((!args.quick || n <= 1024) && (!args.targets || n >= 1024)) {
      shapes.push_back({"square", n, n, n});
    }
  }
  if (!args.targets) {
    for (int n : {127, 129, 257, 1025}) {
      shapes.push_back({"padding-hostile", n, n, n});
    }
    for (int m : {1, 8, 32}) {
      shapes.push_back({"small-M", m, 4096, 4096});
    }
  }

  Session session;
  session.openblas_core = openblas_get_corename();
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::printf("## Session %s\n\n", date);
  std::printf("- CPU: %s, %u hardware threads\n", cpu_model().c_str(),
              std::thread::hardware_concurrency());
  std::printf("- tpuctl kernel families: fp32 %s, bf16 %s, int8 %s (this host has:",
              to_string(*selected_isa(GemmDtype::fp32, args.options(1))),
              to_string(*selected_isa(GemmDtype::bf16, args.options(1))),
              to_string(*selected_isa(GemmDtype::int8, args.options(1))));
  for (GemmIsa isa : host_isas()) {
    std::printf(" %s", to_string(isa));
  }
  std::printf(")\n");
  std::printf("- OpenBLAS: %s (core %s; OPENBLAS_CORETYPE %s)\n", openblas_get_config(),
              session.openblas_core.c_str(),
              std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "unset");
  const dnnl_version_t* v = dnnl_version();
  const char* onednn_cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  std::printf("- oneDNN: %d.%d.%d (%s runtime, threads set with omp_set_num_threads; "
              "ONEDNN_MAX_CPU_ISA %s)\n",
              v->major, v->minor, v->patch, v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other",
              onednn_cap ? onednn_cap : "unset");
  std::printf("- protocol: %d interleaved samples per row (rotating order), samples of >= 4 ms, "
              "medians\n",
              args.reps);
  std::fflush(stdout);

  std::fprintf(stderr, "probing peaks...\n");
  session.start = probe_all();
  const std::vector<Probe>& start = session.start;
  std::vector<Row> rows;
  for (int threads : args.threads) {
    openblas_set_num_threads(threads);
    omp_set_num_threads(threads);
    for (const Shape& s : shapes) {
      std::fprintf(stderr, "%dT %s %s\n", threads, s.group, shape_text(s).c_str());
      for (Row& r : run_shape(args, threads, s, session)) {
        rows.push_back(r);
      }
    }
  }
  std::vector<Probe> end = probe_all();

  std::printf("- oneDNN implementations: fp32 %s, bf16 %s, int8 %s; oneDNN's s8 result exact: "
              "%s\n",
              session.onednn_impl[0].c_str(), session.onednn_impl[1].c_str(),
              session.onednn_impl[2].c_str(), session.onednn_s8_exact.c_str());
  std::printf("- the host's units (peak probes, G(FL)OP/s, start -> end, 1 thread / 2 threads):\n");
  bool drift = false, weak_two = false;
  for (size_t i = 0; i < start.size(); ++i) {
    std::printf("  - %s %s: %.1f -> %.1f / %.1f -> %.1f\n", unit_isa(start[i].kind),
                to_string(start[i].kind), start[i].one, end[i].one, start[i].two, end[i].two);
    drift = drift || std::fabs(end[i].one - start[i].one) > 0.1 * start[i].one ||
            std::fabs(end[i].two - start[i].two) > 0.1 * start[i].two;
    weak_two = weak_two || start[i].two < 1.8 * start[i].one || end[i].two < 1.8 * end[i].one;
  }
  std::printf("- session: %s\n\n",
              drift || weak_two ? "**disturbed** (a probe moved > 10% or a 2T probe < 1.8x 1T)"
                                : "clean (probes within 10%, 2T probes >= 1.8x 1T)");

  std::printf("| T | group | m x n x k | dtype | tpuctl isa | tpuctl Gop/s median (best / worst) | "
              "packed-B | OpenBLAS Gop/s (ratio / by CPU) | oneDNN Gop/s (ratio / by CPU) | vs "
              "better peer (by CPU) | %% of peak (unit) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    const PeerResult* ob = r.peer("OpenBLAS");
    const PeerResult* dn = r.peer("oneDNN");
    const bool one = r.threads == 1;
    auto cpu = [&](const PeerResult* p) { return one ? fixed(p->cpu_ratio_med, 3) : "-"; };
    auto peer = [&](const PeerResult* p) {
      return p ? fixed(p->rate.med, 1) + " (" + fixed(p->ratio_med, 3) + " / " + cpu(p) + ")"
               : std::string("none");
    };
    std::printf("| %d | %s | %s | %s | %s | %.1f (%.1f / %.1f) | %.1f | %s | %s | %.3f (%s) | "
                "%.0f%% (%s) |\n",
                r.threads, r.group.c_str(), shape_text(r.shape).c_str(), r.dtype.c_str(),
                r.isa.c_str(), r.cand.med, r.cand.best, r.cand.worst, r.packed.med,
                peer(ob).c_str(), peer(dn).c_str(), r.better()->ratio_med,
                cpu(r.better(true)).c_str(), r.peak > 0 ? 100 * r.cand.med / r.peak : 0.0,
                r.unit.c_str());
  }
  if (!args.targets) {
    std::printf("\nSmall-M rows as weight bandwidth (B bytes / median time, GB/s):\n\n");
    std::printf("| T | m x n x k | dtype | tpuctl cold | tpuctl packed-B | oneDNN |\n");
    std::printf("|---|---|---|---|---|---|\n");
    for (const Row& r : rows) {
      if (r.group != std::string("small-M")) {
        continue;
      }
      double elem = r.dtype == "int8" ? 1 : (r.dtype == "bf16" ? 2 : 4);
      double gb = static_cast<double>(r.shape.k) * r.shape.n * elem / 1e9;
      double gop = 2.0 * r.shape.m * r.shape.n * r.shape.k / 1e9;
      std::printf("| %d | %s | %s | %.1f | %.1f | %.1f |\n", r.threads, shape_text(r.shape).c_str(),
                  r.dtype.c_str(), gb / (gop / r.cand.med), gb / (gop / r.packed.med),
                  r.peer("oneDNN") ? gb / (gop / r.peer("oneDNN")->rate.med) : 0.0);
    }
  }
  print_targets(args, rows);
  return 0;
}
