// Reference GEMMs and the correctness gates every fast or simulated kernel is checked against
// (kernels.md section 6.3). Row-major: C[m x n] = A[m x k] * B[k x n], leading dimensions in
// elements. Naive loops, written for obviousness, not speed.
#pragma once

#include <cstdint>

#include "kernels/bf16.hpp"

namespace tpuctl::kernels {

// int8 x int8 -> int32, exact: accumulates in int64, then narrows with two's-complement wrap
// (so K > 131071 with extreme inputs wraps exactly as an int32 accumulator does).
void reference_gemm_s8(int m, int n, int k, const int8_t* a, int lda, const int8_t* b, int ldb,
                       int32_t* c, int ldc);

// bf16 x bf16 accumulated in fp64 (the "true" answer for the error gates).
void reference_gemm_bf16_f64(int m, int n, int k, const bf16_t* a, int lda, const bf16_t* b,
                             int ldb, double* c, int ldc);

// fp32 x fp32 accumulated in fp64.
void reference_gemm_f32_f64(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                            double* c, int ldc);

struct GemmCheck {
  bool passed = true;
  double max_abs_error = 0;     // max |C - C_ref| over all elements
  double worst_bound_ratio = 0; // max |C - C_ref| / bound; <= 1 passes (0 when exact)
  long long mismatches = 0;     // elements over their bound (int8: elements that differ)
  int first_bad_row = -1, first_bad_col = -1;
};

// int8: exact equality with reference_gemm_s8.
GemmCheck check_gemm_s8(int m, int n, int k, const int8_t* a, int lda, const int8_t* b, int ldb,
                        const int32_t* c, int ldc);

// bf16 -> fp32: gate 1 of kernels.md 6.3, valid for any summation order:
//   |C - C64|_ij <= gamma_K * (|A||B|)_ij,  gamma_K = K u / (1 - K u),  u = 2^-24.
// Non-finite results must match the reference's class (NaN where NaN, same-signed infinity).
// With Subnormals::flushed (the DAZ/FTZ bf16 dot instructions: bf16_subnormals in gemm.hpp)
// the reference reads subnormal inputs as zero and the bound grows by (2K + 2) x 2^-126, the
// most the flushed steps of one output can lose.
GemmCheck check_gemm_bf16(int m, int n, int k, const bf16_t* a, int lda, const bf16_t* b, int ldb,
                          const float* c, int ldc, Subnormals subnormals = Subnormals::kept);

// fp32 -> fp32: the same gate 1 bound with fp32 inputs.
GemmCheck check_gemm_f32(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                         const float* c, int ldc);

} // namespace tpuctl::kernels
