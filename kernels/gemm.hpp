// Fast GEMM for the CPU: C[m x n] = A[m x k] * B[k x n], row-major with leading dimensions in
// elements, beta = 0 (C is overwritten; K = 0 gives zeros). Three element types:
//   fp32 x fp32 -> fp32;  bf16 x bf16 -> fp32 (widened at pack time, fp32 FMA inside);
//   int8 x int8 -> int32, exact (sign-extended to int16 at pack time, vpmaddwd + vpaddd), with
//   two's-complement wrap when |sum| exceeds int32 (only possible for K > 131071), exactly as
//   reference_gemm_s8 does.
// AVX2+FMA micro-kernels are chosen at run time when the CPU has them; otherwise (or with
// GemmOptions::force_portable) portable C++ micro-kernels run on the same packed layout.
// Floating point follows IEEE 754 with the host's default MXCSR: this library never sets FTZ or
// DAZ, so subnormal inputs and results are kept, and Inf and NaN propagate as the FMA sums them.
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

#include "kernels/bf16.hpp"
#include "util/expected.hpp"

namespace tpuctl::kernels {

enum class GemmDtype { fp32, bf16, int8 };

// "fp32", "bf16" or "int8".
const char* to_string(GemmDtype dtype);

// The micro-kernel family a call runs on.
enum class GemmIsa { portable, avx2_fma };

// "portable" or "avx2_fma".
const char* to_string(GemmIsa isa);

struct GemmOptions {
  // Threads that share the work: 1 (default) runs on the caller only; 0 means one per hardware
  // thread. Small problems use fewer threads than asked (never more than the work can split to).
  int threads = 1;
  // Runs the portable C++ micro-kernels even when AVX2+FMA is available (tests, comparisons).
  bool force_portable = false;
};

// The micro-kernel family `options` selects on this host.
GemmIsa selected_isa(const GemmOptions& options = {});

// B packed for the micro-kernels: k x n values of one dtype, split into k-blocks and 16-column
// panels (int8: sign-extended to int16 and interleaved by k-pairs; bf16: widened to fp32).
// Move-only; reusable from any number of threads at once (read-only after packing).
class PackedB {
public:
  PackedB() = default;
  int k() const { return m_k; }
  int n() const { return m_n; }
  GemmDtype dtype() const { return m_dtype; }
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
  size_t m_bytes = 0;
  std::unique_ptr<void, Free> m_data;
};

// C = A * B in fp32. Errors: usage (invalid sizes, leading dimensions, pointers or threads).
Status gemm_f32(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                int ldc, const GemmOptions& options = {});

// C (fp32) = A (bf16) * B (bf16), products exact, fp32 accumulation. Errors: as gemm_f32.
Status gemm_bf16(int m, int n, int k, const bf16_t* a, int lda, const bf16_t* b, int ldb, float* c,
                 int ldc, const GemmOptions& options = {});

// C (int32) = A (int8) * B (int8), exact with int32 wrap. Errors: as gemm_f32.
Status gemm_s8(int m, int n, int k, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* c,
               int ldc, const GemmOptions& options = {});

// Packs B (k x n, row-major, leading dimension ldb) once for the *_packed calls.
// Errors: usage (invalid sizes, leading dimension, pointer or threads).
Expected<PackedB> pack_b_f32(int k, int n, const float* b, int ldb,
                             const GemmOptions& options = {});
Expected<PackedB> pack_b_bf16(int k, int n, const bf16_t* b, int ldb,
                              const GemmOptions& options = {});
Expected<PackedB> pack_b_s8(int k, int n, const int8_t* b, int ldb,
                            const GemmOptions& options = {});

// C (m x b.n()) = A (m x b.k(), leading dimension lda) * B, with B packed by the pack_b_* of the
// same dtype. Errors: usage (invalid sizes, pointers or threads, or `b` packed from another dtype).
Status gemm_f32_packed(int m, const float* a, int lda, const PackedB& b, float* c, int ldc,
                       const GemmOptions& options = {});
Status gemm_bf16_packed(int m, const bf16_t* a, int lda, const PackedB& b, float* c, int ldc,
                        const GemmOptions& options = {});
Status gemm_s8_packed(int m, const int8_t* a, int lda, const PackedB& b, int32_t* c, int ldc,
                      const GemmOptions& options = {});

} // namespace tpuctl::kernels
