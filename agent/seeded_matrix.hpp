// The operands of spmd-matmul, generated from a seed so that no process needs another's data:
// element (row, col) of matrix A or B is a pure function of (seed, matrix, row, col) (a
// counter-based hash), so any shard of A or B can be produced on its own, in any order, and
// every process agrees on every element. The check of the gathered product (Freivalds) uses the
// same generator, and costs O(MK + KN + MN) instead of the GEMM's O(MNK). See seeded_matrix.cpp.
#pragma once

#include <cstdint>

#include "kernels/bf16.hpp"

namespace tpuctl::agent {

enum class MatrixId : uint64_t { a = 1, b = 2, x = 3 };

// The 64-bit hash every element is drawn from. Never fails.
uint64_t element_hash(uint64_t seed, MatrixId which, uint64_t row, uint64_t col);

// Element (row, col) of `which`: int8 over the whole range -128..127; fp32 uniform in [-1, 1) on
// a 2^-23 grid; bf16 that fp32 value rounded to nearest even.
int8_t s8_element(uint64_t seed, MatrixId which, uint64_t row, uint64_t col);
float f32_element(uint64_t seed, MatrixId which, uint64_t row, uint64_t col);
kernels::bf16_t bf16_element(uint64_t seed, MatrixId which, uint64_t row, uint64_t col);

// Writes rows [row0, row0 + rows) x columns [col0, col0 + cols) of `which` to `out`, row-major
// with leading dimension `cols`. Preconditions: non-negative sizes, `out` holds rows * cols.
void fill_block_s8(uint64_t seed, MatrixId which, int row0, int col0, int rows, int cols,
                   int8_t* out);
void fill_block_f32(uint64_t seed, MatrixId which, int row0, int col0, int rows, int cols,
                    float* out);
void fill_block_bf16(uint64_t seed, MatrixId which, int row0, int col0, int rows, int cols,
                     kernels::bf16_t* out);

// The outcome of checking C (m x n) against A (m x k) * B (k x n) of a seed.
struct ChecksumResult {
  bool ok = false;
  int64_t bad_rows = 0;   // rows of C * x that disagree with A * (B * x)
  int64_t first_bad = -1; // the first such row, -1 when none
  // fp32/bf16: the largest |C x - A (B x)| of a row divided by that row's tolerance (ok <= 1);
  // int8: 0 when exact, else 1.
  double worst_ratio = 0;
};

// Freivalds' check of an int8 product, exact: C x == A (B x) in arithmetic modulo 2^64 with
// odd 64-bit x from the seed. One wrong element is always caught (x is odd, so invertible mod
// 2^64); several cancel with probability about 2^-63. Requires k < 131072 (C exact in int32).
ChecksumResult freivalds_check_s8(uint64_t seed, int m, int n, int k, const int32_t* c, int ldc);

// Freivalds' check of a bf16 or fp32 product computed with fp32 accumulation, in double, with
// x_j = +-[1, 2) from the seed. Row i passes when
//   |(C x)_i - (A (B x))_i| <= (min(k, 8 sqrt(k)) * 1.01 * 2^-24 + 2 (k + n + 2) 2^-53) * r_i,
//   r_i = (|A| (|B| |x|))_i.
// min(k, ...) * 2^-24 * r_i bounds the fp32 GEMM's rounding: k * 2^-24 is the worst case for any
// summation order (Higham, Accuracy and Stability, 3.1); 8 sqrt(k) is the probabilistic bound of
// Higham & Mary (SISC 2019) with lambda = 8, exceeded with probability below 2 k exp(-32) per
// element. The 2^-53 term covers the check's own double arithmetic. A NaN or Inf fails.
ChecksumResult freivalds_check_f32(uint64_t seed, int m, int n, int k, const float* c, int ldc);
ChecksumResult freivalds_check_bf16(uint64_t seed, int m, int n, int k, const float* c, int ldc);

} // namespace tpuctl::agent
