// The public GEMM API: argument validation, run-time choice of the micro-kernel family
// (AVX2 + FMA when __builtin_cpu_supports says so, else portable C++), and the PackedB object.
// The blocking, packing and threading live in gemm_driver.cpp.
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

} // namespace

Expected<PackedB> pack_b_f32(int k, int n, const float* b, int ldb, const GemmOptions& options) {
  TPUCTL_TRY(validate_pack("pack_b_f32", k, n, b, ldb, options));
  PackedB p = PackedBAccess::make(k, n, GemmDtype::fp32, packed_b_bytes(GemmDtype::fp32, k, n));
  pack_b_full_f32(kernels_for(options), resolve_threads(options.threads), k, n, b, ldb,
                  static_cast<float*>(PackedBAccess::data(p)));
  return p;
}

Expected<PackedB> pack_b_bf16(int k, int n, const bf16_t* b, int ldb, const GemmOptions& options) {
  TPUCTL_TRY(validate_pack("pack_b_bf16", k, n, b, ldb, options));
  PackedB p = PackedBAccess::make(k, n, GemmDtype::bf16, packed_b_bytes(GemmDtype::bf16, k, n));
  pack_b_full_bf16(kernels_for(options), resolve_threads(options.threads), k, n, b, ldb,
                   static_cast<float*>(PackedBAccess::data(p)));
  return p;
}

Expected<PackedB> pack_b_s8(int k, int n, const int8_t* b, int ldb, const GemmOptions& options) {
  TPUCTL_TRY(validate_pack("pack_b_s8", k, n, b, ldb, options));
  PackedB p = PackedBAccess::make(k, n, GemmDtype::int8, packed_b_bytes(GemmDtype::int8, k, n));
  pack_b_full_s8(kernels_for(options), resolve_threads(options.threads), k, n, b, ldb,
                 static_cast<int16_t*>(PackedBAccess::data(p)));
  return p;
}

// ---- the multiplications ----

Status gemm_f32(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                int ldc, const GemmOptions& options) {
  TPUCTL_TRY(validate_gemm("gemm_f32", m, n, k, a, lda, b, ldb, c, ldc, options));
  run_f32(kernels_for(options), resolve_threads(options.threads), m, n, k, a, lda, b, ldb, nullptr,
          c, ldc);
  return ok();
}

Status gemm_bf16(int m, int n, int k, const bf16_t* a, int lda, const bf16_t* b, int ldb, float* c,
                 int ldc, const GemmOptions& options) {
  TPUCTL_TRY(validate_gemm("gemm_bf16", m, n, k, a, lda, b, ldb, c, ldc, options));
  run_bf16(kernels_for(options), resolve_threads(options.threads), m, n, k, a, lda, b, ldb, nullptr,
           c, ldc);
  return ok();
}

Status gemm_s8(int m, int n, int k, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* c,
               int ldc, const GemmOptions& options) {
  TPUCTL_TRY(validate_gemm("gemm_s8", m, n, k, a, lda, b, ldb, c, ldc, options));
  run_s8(kernels_for(options), resolve_threads(options.threads), m, n, k, a, lda, b, ldb, nullptr,
         c, ldc);
  return ok();
}

Status gemm_f32_packed(int m, const float* a, int lda, const PackedB& b, float* c, int ldc,
                       const GemmOptions& options) {
  TPUCTL_TRY(validate_packed("gemm_f32_packed", GemmDtype::fp32, m, a, lda, b, c, ldc, options));
  run_f32(kernels_for(options), resolve_threads(options.threads), m, b.n(), b.k(), a, lda, nullptr,
          0, static_cast<const float*>(PackedBAccess::data(b)), c, ldc);
  return ok();
}

Status gemm_bf16_packed(int m, const bf16_t* a, int lda, const PackedB& b, float* c, int ldc,
                        const GemmOptions& options) {
  TPUCTL_TRY(validate_packed("gemm_bf16_packed", GemmDtype::bf16, m, a, lda, b, c, ldc, options));
  run_bf16(kernels_for(options), resolve_threads(options.threads), m, b.n(), b.k(), a, lda, nullptr,
           0, static_cast<const float*>(PackedBAccess::data(b)), c, ldc);
  return ok();
}

Status gemm_s8_packed(int m, const int8_t* a, int lda, const PackedB& b, int32_t* c, int ldc,
                      const GemmOptions& options) {
  TPUCTL_TRY(validate_packed("gemm_s8_packed", GemmDtype::int8, m, a, lda, b, c, ldc, options));
  run_s8(kernels_for(options), resolve_threads(options.threads), m, b.n(), b.k(), a, lda, nullptr,
         0, static_cast<const int16_t*>(PackedBAccess::data(b)), c, ldc);
  return ok();
}

} // namespace tpuctl::kernels
