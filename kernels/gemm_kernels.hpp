// Internal to kernels/gemm*.cpp: tile and block sizes, the packed layouts, the packing routines
// and the micro-kernel tables. Not part of the public API (use kernels/gemm.hpp).
//
// Packed layouts (all zero-padded to whole tiles, so micro-kernels never see a ragged edge):
//   A, fp32 path: panels of k_mr rows; element (i, p) of a panel at [p * k_mr + i].
//   B, fp32 path: panels of k_nr columns; element (p, j) of a panel at [p * k_nr + j].
//   A, int8 path: panels of k_mr rows over k-pairs; the int32 word [q * k_mr + i] holds
//     a(i, 2q) in its low int16 and a(i, 2q + 1) in its high int16 (sign-extended; 0 past k).
//   B, int8 path: panels of k_nr columns over k-pairs; int16 [q * 2 k_nr + 2 j + r] = b(2q + r, j).
//     So one 256-bit load holds 8 columns x 2 k values, the operand layout vpmaddwd wants.
// This header deliberately holds no inline functions: gemm_avx2.cpp is compiled with -mavx2 and
// must not emit a COMDAT copy of any function the baseline code could end up calling.
#pragma once

#include <cstdint>

#include "kernels/bf16.hpp"

namespace tpuctl::kernels::detail {

inline constexpr int k_mr = 6;          // rows of the micro-tile
inline constexpr int k_nr = 16;         // columns of the micro-tile (two 256-bit vectors of fp32)
inline constexpr int k_kc_f32 = 256;    // k values per block, fp32 path (B panel 16 KiB)
inline constexpr int k_kc_s8 = 512;     // k values per block, int8 path (even; B panel 16 KiB)
inline constexpr int k_mc = 120;        // rows of A per packed block (a multiple of k_mr)
inline constexpr int k_nc = 4096;       // columns of B per packed block (a multiple of k_nr)
inline constexpr int k_columns_max = 3; // the widest ragged panel the column kernels take
inline constexpr int k_a_slack = 16;    // elements after a packed A block that may be read

// c[k_mr x k_nr] = (accumulate ? c : 0) + sum over p < kc of a(:, p) * b(p, :), with `a` one
// packed A panel and `b` one packed B panel.
using KernelF32 = void (*)(int kc, const float* a, const float* b, float* c, long ldc,
                           bool accumulate);
// The same over `pairs` k-pairs of the int8 layout, int32 wrap-around accumulation.
using KernelS8 = void (*)(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
                          bool accumulate);

// The same kernels reading B straight from the caller's row-major matrix (16 columns at `b`,
// rows `ldb` apart; int8: `kc` k values, an odd last one paired with zero). When `pack` is not
// null they also store the B values they read there, as one packed panel, so a GEMM with few
// rows of A never runs a separate packing pass over B. nullptr in a table without them.
using KernelF32Direct = void (*)(int kc, const float* a, const float* b, long ldb, float* c,
                                 long ldc, bool accumulate, float* pack);
using KernelBf16Direct = void (*)(int kc, const float* a, const bf16_t* b, long ldb, float* c,
                                  long ldc, bool accumulate, float* pack);
using KernelS8Direct = void (*)(int kc, const int32_t* a, const int8_t* b, long ldb, int32_t* c,
                                long ldc, bool accumulate, int16_t* pack);

// Packs rows [0, mc) x columns [0, kc) of `a` into ceil(mc / k_mr) panels at `dst`.
using PackAF32 = void (*)(int mc, int kc, const float* a, long lda, float* dst);
using PackABf16 = void (*)(int mc, int kc, const bf16_t* a, long lda, float* dst);
using PackAS8 = void (*)(int mc, int kc, const int8_t* a, long lda, int32_t* dst);
// Packs rows [0, kc) x columns [0, nc) of `b` (nc <= k_nr) into one panel at `dst`.
using PackBF32 = void (*)(int kc, int nc, const float* b, long ldb, float* dst);
using PackBBf16 = void (*)(int kc, int nc, const bf16_t* b, long ldb, float* dst);
using PackBS8 = void (*)(int kc, int nc, const int8_t* b, long ldb, int16_t* dst);

struct MicroKernels {
  KernelF32 f32;
  KernelS8 s8;
  PackAF32 pack_a_f32;
  PackABf16 pack_a_bf16;
  PackAS8 pack_a_s8;
  PackBF32 pack_b_f32;
  PackBBf16 pack_b_bf16;
  PackBS8 pack_b_s8;
  KernelF32Direct f32_direct;
  KernelBf16Direct bf16_direct;
  KernelS8Direct s8_direct;
  // Kernels for a ragged last panel of at most 8 columns: they read the first 8 columns of a
  // packed B panel and write an k_mr x 8 tile. nullptr in a table without them.
  KernelF32 f32_narrow;
  KernelS8 s8_narrow;
  // The same for at most 4 columns (a k_mr x 4 tile).
  KernelF32 f32_quarter;
  KernelS8 s8_quarter;
  // Kernels for a ragged last row panel of at most 3 rows: a 3 x k_nr tile from the first 3
  // rows of a packed A panel. nullptr in a table without them.
  KernelF32 f32_short;
  KernelS8 s8_short;
  // Kernels for a ragged last panel of at most k_columns_max columns: they write only the `nc`
  // valid columns of a k_mr-row tile and may read up to 8 elements past the end of the A panel
  // (A buffers carry k_a_slack elements of slack). nullptr in a table without them.
  void (*f32_columns)(int kc, const float* a, const float* b, float* c, long ldc, bool accumulate,
                      int nc);
  void (*s8_columns)(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
                     bool accumulate, int nc);
};

// Portable C++ (baseline x86-64, or any target).
const MicroKernels& portable_micro_kernels();

// AVX2 + FMA. Call only when the CPU has both (gemm_isa.cpp checks with cpu_features());
// nullptr when this build has no AVX2 code (a non-x86 target).
const MicroKernels* avx2_micro_kernels();

} // namespace tpuctl::kernels::detail
