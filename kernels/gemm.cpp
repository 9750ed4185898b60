// The public GEMM API: argument validation, the route from the kernel family that
// selected_isa (gemm_isa.cpp) picks to its tables and driver entry points, and the PackedB
// object. The blocking, packing and threading live in gemm_driver.cpp.
#include "kernels/gemm.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "kernels/gemm_driver.hpp"

namespace tpuctl::kernels {

void PackedB::Free::operator()(void* p) const {
  std::free(p);
}

namespace {

using namespace detail;

constexpr int k_max_threads = 1024;

int resolve_threads(int requested) {
  if (requested == 0) {
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, k_max_threads));
  }
  return requested;
}

// ---- validation ----

const char* pack_name(GemmDtype dtype) {
  return dtype == GemmDtype::int8   ? "pack_b_s8"
         : dtype == GemmDtype::bf16 ? "pack_b_bf16"
                                    : "pack_b_f32";
}

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
                                     " values, not " + to_string(want) + ": pack it with " +
                                     pack_name(want));
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
  static PackedB make(int k, int n, GemmDtype dtype, GemmIsa isa, size_t bytes) {
    PackedB p;
    p.m_k = k;
    p.m_n = n;
    p.m_dtype = dtype;
    p.m_isa = isa;
    p.m_bytes = bytes;
    p.m_data.reset(allocate_aligned(bytes));
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

// ---- routes: one kernel family's entry points for one dtype ----

namespace {

// What a dtype needs from the family that runs it: the packed-B size, the packer and the
// multiplication (B unpacked, or packed by `pack` when `packed` is not null).
template <typename In, typename Out>
struct Route {
  size_t (*bytes)(int k, int n);
  void (*pack)(int threads, int k, int n, const In* b, long ldb, void* dst);
  void (*run)(int threads, int m, int n, int k, const In* a, long lda, const In* b, long ldb,
              const void* packed, Out* c, long ldc);
};

const MicroKernels* portable_table() {
  return &portable_micro_kernels();
}

template <typename G, const WideKernels<G>* (*Table)()>
Route<typename G::AElem, typename G::C> wide_route() {
  using In = typename G::AElem;
  using Out = typename G::C;
  return {&packed_b_bytes_wide<G>,
          [](int threads, int k, int n, const In* b, long ldb, void* dst) {
            pack_b_full_wide<G>(*Table(), threads, k, n, b, ldb,
                                static_cast<typename G::PackB*>(dst));
          },
          [](int threads, int m, int n, int k, const In* a, long lda, const In* b, long ldb,
             const void* packed, Out* c, long ldc) {
            run_wide<G>(*Table(), threads, m, n, k, a, lda, b, ldb,
                        static_cast<const typename G::PackB*>(packed), c, ldc);
          }};
}

// A dtype on the AVX2 or portable family: `Pack` and `Run` are its pack_b_full_* and run_*.
template <typename In, typename Out, typename PackB, GemmDtype Dtype,
          void (*Pack)(const MicroKernels&, int, int, int, const In*, long, PackB*),
          void (*Run)(const MicroKernels&, int, int, int, int, const In*, long, const In*, long,
                      const PackB*, Out*, long),
          const MicroKernels* (*Table)()>
Route<In, Out> narrow_route() {
  return {[](int k, int n) { return packed_b_bytes(Dtype, k, n); },
          [](int threads, int k, int n, const In* b, long ldb, void* dst) {
            Pack(*Table(), threads, k, n, b, ldb, static_cast<PackB*>(dst));
          },
          [](int threads, int m, int n, int k, const In* a, long lda, const In* b, long ldb,
             const void* packed, Out* c, long ldc) {
            Run(*Table(), threads, m, n, k, a, lda, b, ldb, static_cast<const PackB*>(packed), c,
                ldc);
          }};
}

template <const MicroKernels* (*Table)()>
Route<float, float> f32_route() {
  return narrow_route<float, float, float, GemmDtype::fp32, pack_b_full_f32, run_f32, Table>();
}

template <const MicroKernels* (*Table)()>
Route<bf16_t, float> bf16_route() {
  return narrow_route<bf16_t, float, float, GemmDtype::bf16, pack_b_full_bf16, run_bf16, Table>();
}

template <const MicroKernels* (*Table)()>
Route<int8_t, int32_t> s8_route() {
  return narrow_route<int8_t, int32_t, int16_t, GemmDtype::int8, pack_b_full_s8, run_s8, Table>();
}

// `isa` is what selected_isa returned for the dtype, so it has a kernel for it.
Route<float, float> route(GemmIsa isa, const float*) {
  switch (isa) {
  case GemmIsa::avx512:
    return wide_route<Avx512F32, avx512_f32_kernels>();
  case GemmIsa::avx2:
    return f32_route<avx2_micro_kernels>();
  default:
    return f32_route<portable_table>();
  }
}

Route<bf16_t, float> route(GemmIsa isa, const bf16_t*) {
  switch (isa) {
  case GemmIsa::amx:
    return wide_route<AmxBf16, amx_bf16_kernels>();
  case GemmIsa::avx512_bf16:
    return wide_route<Avx512Bf16, avx512_bf16_kernels>();
  case GemmIsa::avx512:
    return wide_route<Avx512Bf16Widened, avx512_bf16_widened_kernels>();
  case GemmIsa::avx2:
    return bf16_route<avx2_micro_kernels>();
  default:
    return bf16_route<portable_table>();
  }
}

Route<int8_t, int32_t> route(GemmIsa isa, const int8_t*) {
  switch (isa) {
  case GemmIsa::amx:
    return wide_route<AmxS8, amx_s8_kernels>();
  case GemmIsa::avx512_vnni:
    return wide_route<Avx512S8, avx512_s8_kernels>();
  case GemmIsa::avx2:
    return s8_route<avx2_micro_kernels>();
  default:
    return s8_route<portable_table>();
  }
}

template <typename In>
constexpr GemmDtype dtype_of() {
  if constexpr (sizeof(In) == 1) {
    return GemmDtype::int8;
  } else if constexpr (sizeof(In) == 2) {
    return GemmDtype::bf16;
  } else {
    return GemmDtype::fp32;
  }
}

Status validate_pack(const char* fn, int k, int n, const void* b, int ldb,
                     const GemmOptions& options) {
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
  return ok();
}

template <typename In>
Expected<PackedB> pack_any(int k, int n, const In* b, int ldb, const GemmOptions& options) {
  constexpr GemmDtype dtype = dtype_of<In>();
  TPUCTL_TRY(validate_pack(pack_name(dtype), k, n, b, ldb, options));
  TPUCTL_TRY_ASSIGN(GemmIsa isa, selected_isa(dtype, options));
  auto r = route(isa, b);
  PackedB p = PackedBAccess::make(k, n, dtype, isa, r.bytes(k, n));
  r.pack(resolve_threads(options.threads), k, n, b, ldb, PackedBAccess::data(p));
  return p;
}

template <typename In, typename Out>
Status gemm_any(const char* fn, int m, int n, int k, const In* a, int lda, const In* b, int ldb,
                Out* c, int ldc, const GemmOptions& options) {
  TPUCTL_TRY(validate_gemm(fn, m, n, k, a, lda, b, ldb, c, ldc, options));
  TPUCTL_TRY_ASSIGN(GemmIsa isa, selected_isa(dtype_of<In>(), options));
  route(isa, a).run(resolve_threads(options.threads), m, n, k, a, lda, b, ldb, nullptr, c, ldc);
  return ok();
}

template <typename In, typename Out>
Status gemm_packed_any(const char* fn, int m, const In* a, int lda, const PackedB& b, Out* c,
                       int ldc, const GemmOptions& options) {
  constexpr GemmDtype dtype = dtype_of<In>();
  TPUCTL_TRY(validate_packed(fn, dtype, m, a, lda, b, c, ldc, options));
  if (options.isa != GemmIsa::auto_select) {
    TPUCTL_TRY_ASSIGN(GemmIsa isa, selected_isa(dtype, options));
    if (isa != b.isa()) {
      return usage_error(std::string(fn) + ": the packed B was packed for isa '" +
                         to_string(b.isa()) + "', but the options select '" + to_string(isa) +
                         "': pack it with the same options");
    }
  }
  route(b.isa(), a)
      .run(resolve_threads(options.threads), m, b.n(), b.k(), a, lda, nullptr, 0,
           PackedBAccess::data(b), c, ldc);
  return ok();
}

} // namespace

// ---- the public functions ----

Expected<PackedB> pack_b_f32(int k, int n, const float* b, int ldb, const GemmOptions& options) {
  return pack_any(k, n, b, ldb, options);
}

Expected<PackedB> pack_b_bf16(int k, int n, const bf16_t* b, int ldb, const GemmOptions& options) {
  return pack_any(k, n, b, ldb, options);
}

Expected<PackedB> pack_b_s8(int k, int n, const int8_t* b, int ldb, const GemmOptions& options) {
  return pack_any(k, n, b, ldb, options);
}

Status gemm_f32(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                int ldc, const GemmOptions& options) {
  return gemm_any("gemm_f32", m, n, k, a, lda, b, ldb, c, ldc, options);
}

Status gemm_bf16(int m, int n, int k, const bf16_t* a, int lda, const bf16_t* b, int ldb, float* c,
                 int ldc, const GemmOptions& options) {
  return gemm_any("gemm_bf16", m, n, k, a, lda, b, ldb, c, ldc, options);
}

Status gemm_s8(int m, int n, int k, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* c,
               int ldc, const GemmOptions& options) {
  return gemm_any("gemm_s8", m, n, k, a, lda, b, ldb, c, ldc, options);
}

Status gemm_f32_packed(int m, const float* a, int lda, const PackedB& b, float* c, int ldc,
                       const GemmOptions& options) {
  return gemm_packed_any("gemm_f32_packed", m, a, lda, b, c, ldc, options);
}

Status gemm_bf16_packed(int m, const bf16_t* a, int lda, const PackedB& b, float* c, int ldc,
                        const GemmOptions& options) {
  return gemm_packed_any("gemm_bf16_packed", m, a, lda, b, c, ldc, options);
}

Status gemm_s8_packed(int m, const int8_t* a, int lda, const PackedB& b, int32_t* c, int ldc,
                      const GemmOptions& options) {
  return gemm_packed_any("gemm_s8_packed", m, a, lda, b, c, ldc, options);
}

} // namespace tpuctl::kernels
