// A cycle-stepped simulator of an R x C systolic array (the MXU) that computes the real product
// and counts the cycles it took. Every PE holds registers that are updated once per cycle;
// operands move one PE per cycle, enter skewed, and partial sums flow down and out. Its cycle
// count equals model_gemm's `cycles` (systolic_model.hpp) in both modes for ws and is, and in
// scalesim mode for os. The essay is in systolic_sim.cpp.
//
// Data paths: int8 x int8 -> int32 (wrapping two's-complement adds, so it equals
// reference_gemm_s8 bit for bit), and bf16 x bf16 -> fp32 (each product rounded to fp32, which
// is exact for bf16 inputs unless it overflows or underflows fp32; fp32 adds with IEEE
// round-to-nearest-even, no flush-to-zero). The bf16 summation order is the one
// systolic_order_gemm_bf16 spells out, so the two agree bit for bit.
#pragma once

#include <cstdint>

#include "kernels/bf16.hpp"
#include "kernels/systolic_model.hpp"
#include "util/expected.hpp"

namespace tpuctl::kernels {

struct SimConfig {
  ArrayShape array;
  Dataflow dataflow = Dataflow::ws;
  CycleMode mode = CycleMode::scalesim;
};

struct SimStats {
  int64_t cycles = 0;      // from the first preload/injection to the last result, inclusive
  int64_t folds = 0;       // tiles the simulator ran
  int64_t pe_macs = 0;     // MACs performed by PEs on valid data, padding PEs included
  int64_t useful_macs = 0; // of those, MACs on real (unpadded) operands: M*N*K when correct
  // Self-checks that must stay 0: a PE saw operands of two different (fold, step) tokens, or
  // switched to a tile its shadow register did not hold yet. Non-zero means a simulator bug.
  int64_t hazards = 0;
};

// C[m x n] = A[m x k] * B[k x n], row-major with leading dimensions in elements, int8 inputs and
// int32 results, simulated cycle by cycle on `config`. Fails (usage) on what model_gemm rejects
// (sizes or array dims below 1, tpu mode with os) and on a leading dimension shorter than its
// row; fails (failure) only if the simulator stalls, which would be a bug.
Expected<SimStats> simulate_gemm_s8(const GemmShape& shape, const int8_t* a, int64_t lda,
                                    const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc,
                                    const SimConfig& config);

// The same with bf16 inputs and fp32 results.
Expected<SimStats> simulate_gemm_bf16(const GemmShape& shape, const bf16_t* a, int64_t lda,
                                      const bf16_t* b, int64_t ldb, float* c, int64_t ldc,
                                      const SimConfig& config);

// The scalar reference for kernels.md 6.3 gate 3: bf16 x bf16 -> fp32 in the simulator's
// summation order, for an array of `array_rows` rows.
//   ws, is: for each output, acc = +0; for each tile of `array_rows` consecutive k (ascending,
//           the row folds in order): psum = +0; psum = psum + fp32(a*b) for k ascending in the
//           tile; acc = acc + psum.
//   os:     acc = +0; acc = acc + fp32(a*b) for k = 0 .. K-1.
// fp32(a*b) is the product rounded to fp32 (exact unless it overflows or underflows), so an FMA
// gives the same bits whenever no product leaves fp32's normal range. The number of columns
// does not change the order. No failure: sizes must be >= 1 and array_rows >= 1.
void systolic_order_gemm_bf16(const GemmShape& shape, const bf16_t* a, int64_t lda, const bf16_t* b,
                              int64_t ldb, float* c, int64_t ldc, int64_t array_rows,
                              Dataflow dataflow);

} // namespace tpuctl::kernels
