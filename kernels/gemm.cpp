// The GEMM driver: validation, run-time kernel selection, B packing, cache blocking and threads.
//
// Algorithm (Goto / BLIS): C = A B is cut so that each operand is read from the cache level it
// fits in. B is packed once into k-blocks of k_kc rows, each cut into 16-column panels of
// k_kc x 16 values (16 KiB: one panel sits in L1 while it is used). For every k-block, the rows
// of A are packed k_mc at a time (a k_mc x k_kc block, about 120 KiB, stays in L2); then for
// each B panel (outer) and each 6-row A panel (inner) one micro-kernel call computes a 6 x 16
// tile of C, storing it on the first k-block and adding to it on the others. Edge tiles (m or n
// not a multiple of 6 or 16) run the same kernel into a scratch tile whose valid part is then
// merged into C, so sizes like 127, 129 or 1025 need no padding of the caller's matrices.
//
// The packed B is the weight-stationary object: pack_b_* builds it once and gemm_*_packed
// reuses it; the plain gemm_* calls pack B into a per-thread scratch buffer and then run the
// same packed path. Packing is where dtypes are converted: bf16 is widened to fp32 (so bf16
// runs at fp32 FMA speed) and int8 is sign-extended to int16 and paired along k (so the int8
// micro-kernel is exact vpmaddwd + vpaddd).
//
// Threads: the output is split into one rectangle per thread, along M (in 6-row units) when
// there are enough rows, else along N (in 16-column panels), so threads share the read-only
// packed B and never write the same C element. Each thread packs its own A blocks.
#include "kernels/gemm.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>

#include "kernels/gemm_kernels.hpp"
#include "kernels/parallel_for.hpp"

namespace tpuctl::kernels {

void PackedB::Free::operator()(void* p) const {
  std::free(p);
}

namespace {

using namespace detail;

constexpr int k_max_threads = 1024;
// Below this many multiply-adds a second thread costs more than it saves.
constexpr double k_min_macs_per_thread = 1 << 18;
// Scratch buffers larger than this are freed after the call instead of kept for the next one.
constexpr size_t k_keep_scratch_bytes = size_t{32} << 20;

void* allocate(size_t bytes) {
  size_t rounded = (std::max<size_t>(bytes, 64) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) {
    throw std::bad_alloc();
  }
  return p;
}

// A growable, 64-byte aligned, per-thread buffer.
class Scratch {
public:
  ~Scratch() { std::free(m_data); }
  void* get(size_t bytes) {
    if (bytes > m_bytes) {
      std::free(m_data);
      m_data = allocate(bytes);
      m_bytes = bytes;
    }
    return m_data;
  }
  void trim() {
    if (m_bytes > k_keep_scratch_bytes) {
      std::free(m_data);
      m_data = nullptr;
      m_bytes = 0;
    }
  }

private:
  void* m_data = nullptr;
  size_t m_bytes = 0;
};

Scratch& a_scratch() {
  thread_local Scratch s;
  return s;
}

Scratch& b_scratch() {
  thread_local Scratch s;
  return s;
}

const MicroKernels& kernels_for(const GemmOptions& options) {
  if (selected_isa(options) == GemmIsa::avx2_fma) {
    return *avx2_micro_kernels();
  }
  return portable_micro_kernels();
}

int resolve_threads(int requested) {
  if (requested == 0) {
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, k_max_threads));
  }
  return requested;
}

// Per-dtype facts of the two packed paths.
struct F32Path {
  using PackA = float;
  using PackB = float;
  using C = float;
  static constexpr int kc_block = k_kc_f32;
  static int a_depth(int kc) { return kc; }      // A panel = k_mr * a_depth elements
  static int b_depth(int kc) { return kc; }      // B panel = k_nr * b_depth elements
  static int kernel_depth(int kc) { return kc; } // the kernel's loop count
  static void run_kernel(const MicroKernels& mk, int depth, const PackA* a, const PackB* b, C* c,
                         long ldc, bool acc) {
    mk.f32(depth, a, b, c, ldc, acc);
  }
  static C add(C x, C y) { return x + y; }
};

struct S8Path {
  using PackA = int32_t;
  using PackB = int16_t;
  using C = int32_t;
  static constexpr int kc_block = k_kc_s8;
  static int a_depth(int kc) { return (kc + 1) / 2; }
  static int b_depth(int kc) { return (kc + 1) / 2 * 2; }
  static int kernel_depth(int kc) { return (kc + 1) / 2; }
  static void run_kernel(const MicroKernels& mk, int depth, const PackA* a, const PackB* b, C* c,
                         long ldc, bool acc) {
    mk.s8(depth, a, b, c, ldc, acc);
  }
  static C add(C x, C y) {
    return static_cast<int32_t>(static_cast<uint32_t>(x) + static_cast<uint32_t>(y));
  }
};

int panels_of(int n) {
  return (n + k_nr - 1) / k_nr;
}

// Elements of PackB in a packed B of k x n.
template <typename Path>
size_t packed_b_elements(int k, int n) {
  size_t depth = 0;
  for (int p0 = 0; p0 < k; p0 += Path::kc_block) {
    depth += static_cast<size_t>(Path::b_depth(std::min(Path::kc_block, k - p0)));
  }
  return depth * static_cast<size_t>(panels_of(n)) * k_nr;
}

// Packs panels [jp0, jp1) of every k-block of B into `dst` (laid out for k x n).
template <typename Path, typename T, typename PackPanel>
void pack_b_panels(int k, int n, const T* b, long ldb, typename Path::PackB* dst, int jp0, int jp1,
                   PackPanel pack_panel) {
  size_t panel_count = static_cast<size_t>(panels_of(n));
  for (int p0 = 0; p0 < k; p0 += Path::kc_block) {
    int kc = std::min(Path::kc_block, k - p0);
    size_t panel_elems = static_cast<size_t>(Path::b_depth(kc)) * k_nr;
    typename Path::PackB* block = dst + static_cast<size_t>(p0) * panel_count * k_nr;
    for (int jp = jp0; jp < jp1; ++jp) {
      int j0 = jp * k_nr;
      pack_panel(kc, std::min(k_nr, n - j0), b + static_cast<long>(p0) * ldb + j0, ldb,
                 block + static_cast<size_t>(jp) * panel_elems);
    }
  }
}

// How the output is split among threads: rows [row0, row1) x panels [panel0, panel1) each.
struct Split {
  int parts = 1;
  bool along_m = true;
};

Split plan_split(int m, int n, int k, int threads) {
  Split s;
  double macs = static_cast<double>(m) * n * k;
  int by_work =
      static_cast<int>(std::min<double>(threads, std::max(1.0, macs / k_min_macs_per_thread)));
  int units_m = (m + k_mr - 1) / k_mr;
  int units_n = panels_of(n);
  s.along_m = units_m >= 4 * by_work || units_m >= units_n;
  s.parts = std::max(1, std::min(by_work, s.along_m ? units_m : units_n));
  return s;
}

template <typename Path, typename AElem, typename PackA>
struct Job {
  int m, n, k;
  const AElem* a;
  long lda;
  const typename Path::PackB* b;
  typename Path::C* c;
  long ldc;
  const MicroKernels* mk;
  PackA pack_a;
};

// Computes C rows [i0, i1) x panels [jp0, jp1) on the calling thread.
template <typename Path, typename JobT>
void run_rect(const JobT& job, int i0, int i1, int jp0, int jp1) {
  using C = typename Path::C;
  using PackA = typename Path::PackA;
  using PackB = typename Path::PackB;
  const int kcb = Path::kc_block;
  size_t a_elems = static_cast<size_t>(k_mc) * static_cast<size_t>(Path::a_depth(kcb));
  auto* abuf = static_cast<PackA*>(a_scratch().get(a_elems * sizeof(PackA)));
  alignas(64) C tile[k_mr * k_nr];
  size_t panel_count = static_cast<size_t>(panels_of(job.n));
  for (int p0 = 0; p0 < job.k; p0 += kcb) {
    int kc = std::min(kcb, job.k - p0);
    int adepth = Path::a_depth(kc);
    int kdepth = Path::kernel_depth(kc);
    size_t b_panel = static_cast<size_t>(Path::b_depth(kc)) * k_nr;
    const PackB* bblock = job.b + static_cast<size_t>(p0) * panel_count * k_nr;
    bool accumulate = p0 > 0;
    for (int ic = i0; ic < i1; ic += k_mc) {
      int mc = std::min(k_mc, i1 - ic);
      job.pack_a(mc, kc, job.a + static_cast<long>(ic) * job.lda + p0, job.lda, abuf);
      for (int jp = jp0; jp < jp1; ++jp) {
        const PackB* bp = bblock + static_cast<size_t>(jp) * b_panel;
        int j0 = jp * k_nr;
        int nc = std::min(k_nr, job.n - j0);
        for (int ir = 0; ir < mc; ir += k_mr) {
          int mr = std::min(k_mr, mc - ir);
          const PackA* ap = abuf + static_cast<size_t>(ir) * static_cast<size_t>(adepth);
          C* cp = job.c + static_cast<long>(ic + ir) * job.ldc + j0;
          if (mr == k_mr && nc == k_nr) {
            Path::run_kernel(*job.mk, kdepth, ap, bp, cp, job.ldc, accumulate);
            continue;
          }
          Path::run_kernel(*job.mk, kdepth, ap, bp, tile, k_nr, false);
          for (int i = 0; i < mr; ++i) {
            C* row = cp + static_cast<long>(i) * job.ldc;
            for (int j = 0; j < nc; ++j) {
              row[j] = accumulate ? Path::add(row[j], tile[i * k_nr + j]) : tile[i * k_nr + j];
            }
          }
        }
      }
    }
  }
}

template <typename C>
void zero_c(int m, int n, C* c, long ldc) {
  for (int i = 0; i < m; ++i) {
    std::fill(c + static_cast<long>(i) * ldc, c + static_cast<long>(i) * ldc + n, C{});
  }
}

template <typename Path, typename JobT>
void run_job(const JobT& job, int threads) {
  if (job.m == 0 || job.n == 0) {
    return;
  }
  if (job.k == 0) {
    zero_c(job.m, job.n, job.c, job.ldc);
    return;
  }
  Split split = plan_split(job.m, job.n, job.k, threads);
  int units = split.along_m ? (job.m + k_mr - 1) / k_mr : panels_of(job.n);
  parallel_for(split.parts, [&](int t) {
    int u0 = static_cast<int>(static_cast<long>(units) * t / split.parts);
    int u1 = static_cast<int>(static_cast<long>(units) * (t + 1) / split.parts);
    if (split.along_m) {
      run_rect<Path>(job, u0 * k_mr, std::min(job.m, u1 * k_mr), 0, panels_of(job.n));
    } else {
      run_rect<Path>(job, 0, job.m, u0, u1);
    }
  });
}

// Packs all of B (k x n) into dst, splitting the panels among threads.
template <typename Path, typename T, typename PackPanel>
void pack_b_all(int k, int n, const T* b, long ldb, typename Path::PackB* dst, int threads,
                PackPanel pack_panel) {
  int panels = panels_of(n);
  double elems = static_cast<double>(k) * n;
  int parts =
      static_cast<int>(std::min<double>({static_cast<double>(threads), static_cast<double>(panels),
                                         std::max(1.0, elems / (1 << 16))}));
  parts = std::max(parts, 1);
  parallel_for(parts, [&](int t) {
    int jp0 = static_cast<int>(static_cast<long>(panels) * t / parts);
    int jp1 = static_cast<int>(static_cast<long>(panels) * (t + 1) / parts);
    pack_b_panels<Path>(k, n, b, ldb, dst, jp0, jp1, pack_panel);
  });
}

// ---- validation ----

std::string quoted(long long v) {
  return "'" + std::to_string(v) + "'";
}

void check_size(ErrorList& errors, const char* fn, const char* name, int v) {
  if (v < 0) {
    errors.add(ErrorKind::usage, std::string(fn) + ": " + name + " " + quoted(v) +
                                     " is negative: sizes must be 0 or more");
  }
}

void check_threads(ErrorList& errors, const char* fn, int threads) {
  if (threads < 0 || threads > k_max_threads) {
    errors.add(ErrorKind::usage, std::string(fn) + ": threads " + quoted(threads) +
                                     " is out of range: use 0 (one per hardware thread) or 1 to " +
                                     std::to_string(k_max_threads));
  }
}

// An operand with `rows` rows of `cols` used elements each, `ld` apart.
void check_operand(ErrorList& errors, const char* fn, const char* name, const void* p, int rows,
                   int cols, int ld, const char* ld_name, const char* cols_name) {
  if (rows <= 0 || cols <= 0) {
    if (ld < 0) {
      errors.add(ErrorKind::usage, std::string(fn) + ": " + ld_name + " " + quoted(ld) +
                                       " is negative: leading dimensions must be 0 or more");
    }
    return;
  }
  if (ld < cols) {
    errors.add(ErrorKind::usage, std::string(fn) + ": " + ld_name + " " + quoted(ld) +
                                     " is smaller than " + cols_name + " " + quoted(cols) +
                                     ": a row of " + name + " holds " + cols_name +
                                     " elements, so pass " + ld_name + " >= " + cols_name);
  }
  if (p == nullptr) {
    errors.add(ErrorKind::usage, std::string(fn) + ": " + name + " is null but holds " +
                                     std::to_string(rows) + " x " + std::to_string(cols) +
                                     " elements: pass its data");
  }
}

Status validate_gemm(const char* fn, int m, int n, int k, const void* a, int lda, const void* b,
                     int ldb, const void* c, int ldc, const GemmOptions& options) {
  ErrorList errors;
  check_size(errors, fn, "m", m);
  check_size(errors, fn, "n", n);
  check_size(errors, fn, "k", k);
  check_threads(errors, fn, options.threads);
  if (errors.empty()) {
    bool needs_inputs = m > 0 && n > 0;
    check_operand(errors, fn, "A", a, needs_inputs ? m : 0, k, lda, "lda", "k");
    check_operand(errors, fn, "B", b, needs_inputs ? k : 0, n, ldb, "ldb", "n");
    check_operand(errors, fn, "C", c, m, n, ldc, "ldc", "n");
  }
  if (!errors.empty()) {
    return errors.combined();
  }
  return ok();
}

Status validate_packed(const char* fn, GemmDtype want, int m, const void* a, int lda,
                       const PackedB& b, const void* c, int ldc, const GemmOptions& options) {
  ErrorList errors;
  check_size(errors, fn, "m", m);
  check_threads(errors, fn, options.threads);
  if (b.dtype() != want) {
    errors.add(ErrorKind::usage, std::string(fn) + ": the packed B holds " + to_string(b.dtype()) +
                                     " values, not " + to_string(want) + ": pack it with pack_b_" +
                                     (want == GemmDtype::int8   ? "s8"
                                      : want == GemmDtype::bf16 ? "bf16"
                                                                : "f32"));
  }
  if (errors.empty()) {
    bool needs_inputs = m > 0 && b.n() > 0;
    check_operand(errors, fn, "A", a, needs_inputs ? m : 0, b.k(), lda, "lda", "k");
    check_operand(errors, fn, "C", c, m, b.n(), ldc, "ldc", "n");
  }
  if (!errors.empty()) {
    return errors.combined();
  }
  return ok();
}

} // namespace

struct PackedBAccess {
  static PackedB make(int k, int n, GemmDtype dtype, size_t bytes) {
    PackedB p;
    p.m_k = k;
    p.m_n = n;
    p.m_dtype = dtype;
    p.m_bytes = bytes;
    p.m_data.reset(allocate(bytes));
    return p;
  }
  static void* data(PackedB& p) { return p.m_data.get(); }
  static const void* data(const PackedB& p) { return p.m_data.get(); }
};

const char* to_string(GemmDtype dtype) {
  switch (dtype) {
  case GemmDtype::fp32:
    return "fp32";
  case GemmDtype::bf16:
    return "bf16";
  case GemmDtype::int8:
    return "int8";
  }
  return "fp32";
}

const char* to_string(GemmIsa isa) {
  return isa == GemmIsa::avx2_fma ? "avx2_fma" : "portable";
}

GemmIsa selected_isa(const GemmOptions& options) {
  if (options.force_portable) {
    return GemmIsa::portable;
  }
#if defined(__x86_64__) || defined(__i386__)
  static const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (has_avx2 && avx2_micro_kernels() != nullptr) {
    return GemmIsa::avx2_fma;
  }
#endif
  return GemmIsa::portable;
}

// ---- packing B ----

namespace {

template <typename Path, typename T, typename PackPanel>
Expected<PackedB> pack_b_impl(const char* fn, GemmDtype dtype, int k, int n, const T* b, int ldb,
                              const GemmOptions& options, PackPanel pack_panel) {
  ErrorList errors;
  check_size(errors, fn, "k", k);
  check_size(errors, fn, "n", n);
  check_threads(errors, fn, options.threads);
  if (errors.empty()) {
    check_operand(errors, fn, "B", b, k, n, ldb, "ldb", "n");
  }
  if (!errors.empty()) {
    return errors.combined();
  }
  size_t elems = packed_b_elements<Path>(k, n);
  PackedB packed = PackedBAccess::make(k, n, dtype, elems * sizeof(typename Path::PackB));
  auto* dst = static_cast<typename Path::PackB*>(PackedBAccess::data(packed));
  pack_b_all<Path>(k, n, b, ldb, dst, resolve_threads(options.threads), pack_panel);
  return packed;
}

template <typename Path, typename T, typename PackPanel>
void pack_b_to_scratch(int k, int n, const T* b, long ldb, int threads, PackPanel pack_panel,
                       const typename Path::PackB** out) {
  size_t elems = packed_b_elements<Path>(k, n);
  auto* dst =
      static_cast<typename Path::PackB*>(b_scratch().get(elems * sizeof(typename Path::PackB)));
  pack_b_all<Path>(k, n, b, ldb, dst, threads, pack_panel);
  *out = dst;
}

} // namespace

Expected<PackedB> pack_b_f32(int k, int n, const float* b, int ldb, const GemmOptions& options) {
  return pack_b_impl<F32Path>("pack_b_f32", GemmDtype::fp32, k, n, b, ldb, options,
                              kernels_for(options).pack_b_f32);
}

Expected<PackedB> pack_b_bf16(int k, int n, const bf16_t* b, int ldb, const GemmOptions& options) {
  return pack_b_impl<F32Path>("pack_b_bf16", GemmDtype::bf16, k, n, b, ldb, options,
                              kernels_for(options).pack_b_bf16);
}

Expected<PackedB> pack_b_s8(int k, int n, const int8_t* b, int ldb, const GemmOptions& options) {
  return pack_b_impl<S8Path>("pack_b_s8", GemmDtype::int8, k, n, b, ldb, options,
                             kernels_for(options).pack_b_s8);
}

// ---- the multiplications ----

namespace {

template <typename Path, typename AElem, typename PackA>
void run(int m, int n, int k, const AElem* a, int lda, const typename Path::PackB* b,
         typename Path::C* c, int ldc, const GemmOptions& options, PackA pack_a) {
  Job<Path, AElem, PackA> job{m, n, k, a, lda, b, c, ldc, &kernels_for(options), pack_a};
  run_job<Path>(job, resolve_threads(options.threads));
}

// The plain (cold) call: pack B into scratch, then the packed path.
template <typename Path, typename AElem, typename BElem, typename PackA, typename PackPanel>
Status cold(const char* fn, int m, int n, int k, const AElem* a, int lda, const BElem* b, int ldb,
            typename Path::C* c, int ldc, const GemmOptions& options, PackA pack_a,
            PackPanel pack_panel) {
  TPUCTL_TRY(validate_gemm(fn, m, n, k, a, lda, b, ldb, c, ldc, options));
  if (m == 0 || n == 0) {
    return ok();
  }
  if (k == 0) {
    zero_c(m, n, c, ldc);
    return ok();
  }
  int threads = resolve_threads(options.threads);
  const typename Path::PackB* packed = nullptr;
  pack_b_to_scratch<Path>(k, n, b, ldb, threads, pack_panel, &packed);
  run<Path>(m, n, k, a, lda, packed, c, ldc, options, pack_a);
  b_scratch().trim();
  return ok();
}

} // namespace

Status gemm_f32(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                int ldc, const GemmOptions& options) {
  const MicroKernels& mk = kernels_for(options);
  return cold<F32Path>("gemm_f32", m, n, k, a, lda, b, ldb, c, ldc, options, mk.pack_a_f32,
                       mk.pack_b_f32);
}

Status gemm_bf16(int m, int n, int k, const bf16_t* a, int lda, const bf16_t* b, int ldb, float* c,
                 int ldc, const GemmOptions& options) {
  const MicroKernels& mk = kernels_for(options);
  return cold<F32Path>("gemm_bf16", m, n, k, a, lda, b, ldb, c, ldc, options, mk.pack_a_bf16,
                       mk.pack_b_bf16);
}

Status gemm_s8(int m, int n, int k, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* c,
               int ldc, const GemmOptions& options) {
  const MicroKernels& mk = kernels_for(options);
  return cold<S8Path>("gemm_s8", m, n, k, a, lda, b, ldb, c, ldc, options, mk.pack_a_s8,
                      mk.pack_b_s8);
}

Status gemm_f32_packed(int m, const float* a, int lda, const PackedB& b, float* c, int ldc,
                       const GemmOptions& options) {
  TPUCTL_TRY(validate_packed("gemm_f32_packed", GemmDtype::fp32, m, a, lda, b, c, ldc, options));
  run<F32Path>(m, b.n(), b.k(), a, lda, static_cast<const float*>(PackedBAccess::data(b)), c, ldc,
               options, kernels_for(options).pack_a_f32);
  return ok();
}

Status gemm_bf16_packed(int m, const bf16_t* a, int lda, const PackedB& b, float* c, int ldc,
                        const GemmOptions& options) {
  TPUCTL_TRY(validate_packed("gemm_bf16_packed", GemmDtype::bf16, m, a, lda, b, c, ldc, options));
  run<F32Path>(m, b.n(), b.k(), a, lda, static_cast<const float*>(PackedBAccess::data(b)), c, ldc,
               options, kernels_for(options).pack_a_bf16);
  return ok();
}

Status gemm_s8_packed(int m, const int8_t* a, int lda, const PackedB& b, int32_t* c, int ldc,
                      const GemmOptions& options) {
  TPUCTL_TRY(validate_packed("gemm_s8_packed", GemmDtype::int8, m, a, lda, b, c, ldc, options));
  run<S8Path>(m, b.n(), b.k(), a, lda, static_cast<const int16_t*>(PackedBAccess::data(b)), c, ldc,
              options, kernels_for(options).pack_a_s8);
  return ok();
}

} // namespace tpuctl::kernels
