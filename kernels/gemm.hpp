// Fast GEMM for the CPU: C[m x n] = A[m x k] * B[k x n], row-major with leading dimensions in
// elements, beta = 0 (C is overwritten; K = 0 gives zeros). Three element types:
//   fp32 x fp32 -> fp32;  bf16 x bf16 -> fp32 (products exact, fp32 accumulation);
//   int8 x int8 -> int32, exact, with two's-complement wrap when |sum| exceeds int32 (only
//   possible for K > 131071), exactly as reference_gemm_s8 does.
// Each dtype runs on the best kernel family of the host (GemmIsa; chosen at run time, every
// family compiled into every x86-64 build):
//   fp32  avx512 (vfmadd231ps zmm), avx2 (vfmadd231ps ymm), portable C++
//   bf16  amx (tdpbf16ps), avx512-bf16 (vdpbf16ps), avx512 / avx2 / portable (widened to fp32
//         while packing, fp32 FMA)
//   int8  amx (tdpbssd), avx512-vnni (vpdpbusd, B biased by +128 and corrected with A's row
//         sums), avx2 / portable (sign-extended to int16 while packing, vpmaddwd + vpaddd)
// GemmOptions::isa caps the choice (tests, comparisons, `tpuctl kernel run --isa`).
// Floating point follows IEEE 754 with the host's default MXCSR: this library never sets FTZ or
// DAZ, so fp32 and widened bf16 keep subnormal inputs and results, and Inf and NaN propagate as
// the FMA sums them. The bf16 dot-product instructions (avx512-bf16, amx) are defined with DAZ
// and FTZ: on those paths a subnormal bf16 input counts as zero and a subnormal result of a
// step becomes zero; every other value is rounded to nearest even at each step, so the gate-1
// bound of reference_gemm.hpp holds on every path.
//
// Weight-stationary mode: pack_b_*() packs B once into a PackedB (the layout the micro-kernels
// stream), and gemm_*_packed() multiplies any number of A matrices against it.
//
// Every function validates its arguments and returns a usage Error (nothing is written to C)
// when a size is negative, a leading dimension is smaller than the row it must hold, a pointer
// the sizes need is null, or the thread count is out of range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/bf16.hpp"
#include "util/expected.hpp"

namespace tpuctl::kernels {

enum class GemmDtype { fp32, bf16, int8 };

// "fp32", "bf16" or "int8".
const char* to_string(GemmDtype dtype);

// The kernel families. Each includes the ones before it but for the two siblings avx512-bf16
// and avx512-vnni, which both include avx512; amx includes every other (the AMX CPUs have all
// of AVX-512).
enum class GemmIsa { auto_select, portable, avx2, avx512, avx512_bf16, avx512_vnni, amx };

// "auto", "portable", "avx2", "avx512", "avx512-bf16", "avx512-vnni" or "amx".
const char* to_string(GemmIsa isa);

// The family named by to_string's text. Errors: usage naming `text` and the choices.
Expected<GemmIsa> parse_gemm_isa(const std::string& text);

// The families this host can run, in the enum's order: portable always; amx only when the CPU
// has AMX-INT8 and AMX-BF16 and Linux granted the tile-data permission (amx_status() in
// cpu_features.hpp says why not).
std::vector<GemmIsa> host_isas();

struct GemmOptions {
  // Threads that share the work: 1 (default) runs on the caller only; 0 means one per hardware
  // thread. Small problems use fewer threads than asked (never more than the work can split to).
  int threads = 1;
  // auto_select: the best family of this host for the dtype. Another value caps the choice, as
  // ONEDNN_MAX_CPU_ISA does: the dtype runs on the best family the named one includes (fp32 has
  // no bf16, VNNI or AMX kernels and runs on avx512 under those; int8 has no avx512 kernel
  // without VNNI and runs on avx2 under avx512 and avx512-bf16). The named family must be one
  // of host_isas(), or every call fails with a usage error.
  GemmIsa isa = GemmIsa::auto_select;
};

// The family a `dtype` call with `options` runs on. Errors: usage when options.isa is not one of
// host_isas(), e.g. "isa 'amx' is not available on this host: it has portable, avx2, avx512,
// avx512-bf16, avx512-vnni; no amx: the CPU has no AMX-TILE (CPUID.(7,0):EDX[24])".
Expected<GemmIsa> selected_isa(GemmDtype dtype, const GemmOptions& options = {});

// How the bf16 kernel of family `isa` treats subnormals (flushed on avx512-bf16 and amx), for
// check_gemm_bf16 (reference_gemm.hpp).
Subnormals bf16_subnormals(GemmIsa isa);

// B packed for the micro-kernels of one family: k x n values of one dtype, split into k-blocks
// and column panels in that family's layout (gemm_kernels.hpp, gemm_wide.hpp). The *_packed
// calls run on the family it was packed for. Move-only; reusable from any number of threads at
// once (read-only after packing).
class PackedB {
public:
  PackedB() = default;
  int k() const { return m_k; }
  int n() const { return m_n; }
  GemmDtype dtype() const { return m_dtype; }
  // The family it was packed for (never auto_select).
  GemmIsa isa() const { return m_isa; }
  // Bytes held by the packed copy.
  size_t bytes() const { return m_bytes; }

private:
  struct Free {
    void operator()(void* p) const;
  };
  friend struct PackedBAccess;
  int m_k = 0;
  int m_n = 0;
  GemmDtype m_dtype = GemmDtype::fp32;
  GemmIsa m_isa = GemmIsa::portable;
  size_t m_bytes = 0;
  std::unique_ptr<void, Free> m_data;
};

// C = A * B in fp32. Errors: usage (invalid sizes, leading dimensions, pointers, threads or isa).
Status gemm_f32(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                int ldc, const GemmOptions& options = {});

// C (fp32) = A (bf16) * B (bf16), products exact, fp32 accumulation. Errors: as gemm_f32.
Status gemm_bf16(int m, int n, int k, const bf16_t* a, int lda, const bf16_t* b, int ldb, float* c,
                 int ldc, const GemmOptions& options = {});

// C (int32) = A (int8) * B (int8), exact with int32 wrap. Errors: as gemm_f32.
Status gemm_s8(int m, int n, int k, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* c,
               int ldc, const GemmOptions& options = {});

// Packs B (k x n, row-major, leading dimension ldb) once for the *_packed calls, for the family
// selected_isa(dtype, options) names. Errors: usage (invalid sizes, leading dimension, pointer,
// threads or isa).
Expected<PackedB> pack_b_f32(int k, int n, const float* b, int ldb,
                             const GemmOptions& options = {});
Expected<PackedB> pack_b_bf16(int k, int n, const bf16_t* b, int ldb,
                              const GemmOptions& options = {});
Expected<PackedB> pack_b_s8(int k, int n, const int8_t* b, int ldb,
                            const GemmOptions& options = {});

// C (m x b.n()) = A (m x b.k(), leading dimension lda) * B, with B packed by the pack_b_* of the
// same dtype, on the family `b` was packed for. Errors: usage (invalid sizes, pointers or
// threads, `b` packed from another dtype, or options.isa selecting another family than b's).
Status gemm_f32_packed(int m, const float* a, int lda, const PackedB& b, float* c, int ldc,
                       const GemmOptions& options = {});
Status gemm_bf16_packed(int m, const bf16_t* a, int lda, const PackedB& b, float* c, int ldc,
                        const GemmOptions& options = {});
Status gemm_s8_packed(int m, const int8_t* a, int lda, const PackedB& b, int32_t* c, int ldc,
                      const GemmOptions& options = {});

} // namespace tpuctl::kernels
