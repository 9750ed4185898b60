// Internal to kernels/gemm*.cpp: the wide kernel families, AVX-512 (gemm_avx512*.cpp) and AMX
// (gemm_amx*.cpp), which gemm_driver.cpp runs through the same blocking and threading as the
// AVX2 family. Like gemm_kernels.hpp this header holds no inline functions: it is included by
// files built with -mavx512* and -mamx-* flags.
//
// Geometry. A wide tile is mr x 32: 32 columns are two zmm of 4-byte lanes, or two 16-column
// AMX tiles. AVX-512 tiles have 12 rows (24 zmm accumulators, 8 left for B and A); an AMX
// block has 32 (four 16 x 16 C tiles, two A tiles, two B tiles: all eight tile registers).
// A k-block holds 2048 bytes of each row of A: 512 fp32, 1024 bf16 or 2048 int8 values (a 64
// KiB B panel, read from L1 and L2; measured against 1024 and 4096 bytes on Zen 5, where 2048
// was 2-12% faster than 1024 at 1024^3 and 2048^3 and 4096 slower).
//
// Packed layouts (zero-padded to whole tiles, so kernels never see a ragged edge):
//   A panel: mr rows of one k-block, row i at byte i * k_wide_row_stride, its kc values as
//     stored (fp32 widened from bf16 on the avx512 bf16 path), zero up to the padded depth;
//     then mr int32 row sums at byte mr * k_wide_row_stride (int8 on VNNI, below). The stride
//     is a row plus one cache line: the rows of a panel then do not share L1 sets (a 2048-byte
//     stride would put 12 rows into 2 sets), and a kernel addresses every row from one pointer
//     with constant displacements.
//   B panel: 32 columns, k in groups of g, the depth of the instruction (fp32 1, bf16 2, int8 4):
//     element (p, j) at [(p / g) * 32 g + j g + p % g]. One 64-byte row of a group holds 16
//     columns x g values: the operand of vdpbf16ps and vpdpbusd, and one row of an AMX B tile
//     ("VNNI layout", amx.md section 3).
//   int8 on VNNI: vpdpbusd multiplies unsigned by signed bytes, and only its last (signed)
//     operand can be a broadcast from memory, so B is stored biased (b + 128, unsigned) and A
//     as it is. sum (b + 128) a = sum a b + 128 sum a, so the kernel subtracts 128 x the row sum
//     of A over the k-block, which the A packer stores after the panel. Both sums wrap mod 2^32
//     like the result, so the difference is exact whenever the true value fits in int32, and
//     wraps as reference_gemm_s8 does otherwise (amx.md section 4).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/bf16.hpp"

namespace tpuctl::kernels::detail {

inline constexpr int k_wide_nr = 32;
inline constexpr int k_wide_row_bytes = 2048;
inline constexpr int k_wide_row_stride = k_wide_row_bytes + 64;

// One wide path: operand types, tile rows, k group and padding, rows per packed A block.
//   AElem  the caller's element type (A and B);  PackA / PackB  the packed types;  C  result.
//   Group  k values per B group;  Pad  the packed depth is a multiple of this (AMX tiles: 64
//   bytes of k);  RowSums  the A panel carries row sums (int8 with biased B).
template <typename AElem_, typename PackA_, typename PackB_, typename C_, int MR, int Group,
          int Pad, bool RowSums>
struct WideGeometry {
  using AElem = AElem_;
  using PackA = PackA_;
  using PackB = PackB_;
  using C = C_;
  static constexpr int mr = MR;
  static constexpr int nr = k_wide_nr;
  static constexpr int group = Group;
  static constexpr int pad = Pad;
  static constexpr bool row_sums = RowSums;
  static constexpr int kc_block = k_wide_row_bytes / static_cast<int>(sizeof(PackA_));
  static constexpr int mc = MR == 12 ? 120 : 128; // rows of A per packed block
  // Bytes of one packed A panel (rows, then row sums rounded to a cache line).
  static constexpr size_t a_panel_bytes =
      (static_cast<size_t>(MR) * (k_wide_row_stride + 4) + 63) / 64 * 64;
};

inline constexpr int k_avx512_mr = 12;
inline constexpr int k_amx_mr = 32;

// AVX-512 F: fp32 FMA, and bf16 widened to fp32 while packing.
using Avx512F32 = WideGeometry<float, float, float, float, k_avx512_mr, 1, 1, false>;
using Avx512Bf16Widened = WideGeometry<bf16_t, float, float, float, k_avx512_mr, 1, 1, false>;
// AVX-512 BF16 (vdpbf16ps) and VNNI (vpdpbusd, B biased, A row sums).
using Avx512Bf16 = WideGeometry<bf16_t, bf16_t, bf16_t, float, k_avx512_mr, 2, 2, false>;
using Avx512S8 = WideGeometry<int8_t, int8_t, uint8_t, int32_t, k_avx512_mr, 4, 4, true>;
// AMX: TDPBF16PS on 32 bf16 of k per tile, TDPBSSD on 64 int8 (both operands signed).
using AmxBf16 = WideGeometry<bf16_t, bf16_t, bf16_t, float, k_amx_mr, 2, 32, false>;
using AmxS8 = WideGeometry<int8_t, int8_t, int8_t, int32_t, k_amx_mr, 4, 64, false>;

// The functions of one wide path.
//   kernel: c[mr x nc] = (accumulate ? c : 0) + the k-block (kc values, kc <= kc_block) of one
//     packed A panel times one packed B panel; writes only the valid mr x nc part of C.
//   pack_a: rows [0, mc) x columns [0, kc) of `a` into ceil(mc / G::mr) panels at `dst`
//     (G::a_panel_bytes apart).
//   pack_b: rows [0, kc) x columns [0, nc) of `b` (nc <= 32) into one panel at `dst`.
template <typename G>
struct WideKernels {
  void (*kernel)(int kc, const typename G::PackA* a, const typename G::PackB* b, typename G::C* c,
                 long ldc, bool accumulate, int mr, int nc);
  void (*pack_a)(int mc, int kc, const typename G::AElem* a, long lda, typename G::PackA* dst);
  void (*pack_b)(int kc, int nc, const typename G::AElem* b, long ldb, typename G::PackB* dst);
  // The kernel on mr whole rows of A read where they are (lda elements apart), for paths whose
  // A needs no conversion; nullptr where A is always packed.
  void (*kernel_rows)(int kc, const typename G::AElem* a, long lda, const typename G::PackB* b,
                      typename G::C* c, long ldc, bool accumulate, int nc);
};

// AVX-512 tables (gemm_avx512*.cpp). Call only when cpu_features() has the unit; nullptr when
// this build has no x86-64 AVX-512 code.
const WideKernels<Avx512F32>* avx512_f32_kernels();
const WideKernels<Avx512Bf16Widened>* avx512_bf16_widened_kernels();
const WideKernels<Avx512Bf16>* avx512_bf16_kernels();
const WideKernels<Avx512S8>* avx512_s8_kernels();

namespace avx512 {
// B panels in the VNNI layout of gemm_wide.hpp without a bias (int8 quads; bf16 pairs), rows
// past kc up to `depth` (a multiple of the group) zero: the AVX-512 packers of the VNNI and
// BF16 files, which the AMX packers use where the CPU has AVX-512 BW (every AMX CPU does).
// Call only then.
void pack_b_s8_unbiased(int kc, int nc, const int8_t* b, long ldb, int8_t* dst, int depth);
void pack_b_bf16_pairs(int kc, int nc, const bf16_t* b, long ldb, bf16_t* dst, int depth);
} // namespace avx512

// AMX tables (gemm_amx.cpp): the tile program of gemm_amx_program.hpp on the hardware. Call
// only when cpu_features().amx; nullptr in a build without AMX code.
const WideKernels<AmxBf16>* amx_bf16_kernels();
const WideKernels<AmxS8>* amx_s8_kernels();

// The same packers and tile program on the plain C++ model of the tile instructions
// (gemm_amx_model.cpp): runs on any host, so tests check everything but the intrinsics.
const WideKernels<AmxBf16>& amx_model_bf16_kernels();
const WideKernels<AmxS8>& amx_model_s8_kernels();
// Tile instructions the model refused so far in this process (an invalid configuration or
// operand shapes: a fault on hardware). Tests expect 0.
long amx_model_faults();

} // namespace tpuctl::kernels::detail
