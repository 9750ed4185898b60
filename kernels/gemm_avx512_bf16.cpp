// AVX-512 BF16 kernel (this file alone is compiled with -mavx512bf16 on top of the AVX-512
// flags; gemm.cpp reaches it only when cpu_features() has AVX512_BF16).
//
// vdpbf16ps adds two bf16 x bf16 products per fp32 lane (odd element first, each step rounded
// to nearest even, DAZ and FTZ: gemm.hpp), twice the work of vfmadd231ps per instruction. The
// tile is 12 x 32: per k pair, two B loads (16 columns x 2 k each, the pair layout of
// gemm_wide.hpp) and 24 vdpbf16ps with the A pair of each row broadcast from memory. A and B
// keep their bf16 bits: no conversion at all, only B's pair interleave while packing.
#include "kernels/gemm_avx512.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) &&                      \
    defined(__AVX512BF16__)

namespace tpuctl::kernels::detail {

namespace {

using namespace avx512;

inline __attribute__((always_inline)) __m512bh as_bh(__m512i v) {
  return __builtin_bit_cast(__m512bh, v);
}

void kernel_bf16(int kc, const bf16_t* a, const bf16_t* b, float* c, long ldc, bool accumulate,
                 int rows, int nc) {
  __m512 acc[k_mr][2];
  zero(acc, _mm512_setzero_ps());
  prefetch_tile(c, ldc, rows);
  const int pairs = (kc + 1) / 2;
  const long panel_bytes = 4L * pairs * k_wide_nr;
#pragma GCC unroll 2
  for (int q = 0; q < pairs; ++q) {
    prefetch_next_panel(b, panel_bytes);
    __m512bh b0 = as_bh(_mm512_loadu_si512(b));
    __m512bh b1 = as_bh(_mm512_loadu_si512(b + 32));
#pragma GCC unroll 12
    for (int i = 0; i < k_mr; ++i) {
      __m512bh av = as_bh(broadcast_word(a, static_cast<long>(i) * k_wide_row_stride));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
    }
    a += 2;
    b += 2 * k_wide_nr;
  }
  store_tile(acc, c, ldc, accumulate, rows, nc);
}

void pack_a_bf16(int mc, int kc, const bf16_t* a, long lda, bf16_t* dst) {
  pack_a_as_stored<Avx512Bf16>(mc, kc, a, lda, dst);
}

// Rows p and p + 1 of 32 columns as pairs: out[2j + r] = row r's column j; columns 0-15 in the
// first zmm, 16-31 in the second; rows past kc (up to `depth`) zero.
void pack_pairs(int kc, int nc, const bf16_t* b, long ldb, bf16_t* dst, int depth) {
  alignas(64) static constexpr uint16_t k_lo[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                                    37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                                    11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static constexpr uint16_t k_hi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21,
                                                    53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58,
                                                    27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i lo = _mm512_load_si512(k_lo), hi = _mm512_load_si512(k_hi);
  __mmask32 m = nc >= 32 ? ~0u : (1u << nc) - 1u;
  for (int p = 0; p < depth; p += 2, dst += 2 * k_wide_nr) {
    __m512i r0 = p < kc ? _mm512_maskz_loadu_epi16(m, b + p * ldb) : _mm512_setzero_si512();
    __m512i r1 =
        p + 1 < kc ? _mm512_maskz_loadu_epi16(m, b + (p + 1) * ldb) : _mm512_setzero_si512();
    _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(r0, lo, r1));
    _mm512_storeu_si512(dst + 32, _mm512_permutex2var_epi16(r0, hi, r1));
  }
}

void pack_b_bf16(int kc, int nc, const bf16_t* b, long ldb, bf16_t* dst) {
  pack_pairs(kc, nc, b, ldb, dst, kc);
}

} // namespace

void avx512::pack_b_bf16_pairs(int kc, int nc, const bf16_t* b, long ldb, bf16_t* dst, int depth) {
  pack_pairs(kc, nc, b, ldb, dst, depth);
}

const WideKernels<Avx512Bf16>* avx512_bf16_kernels() {
  static const WideKernels<Avx512Bf16> k_table = {kernel_bf16, pack_a_bf16, pack_b_bf16, nullptr};
  return &k_table;
}

} // namespace tpuctl::kernels::detail

#else // a build without x86-64 AVX-512 code

namespace tpuctl::kernels::detail {
const WideKernels<Avx512Bf16>* avx512_bf16_kernels() {
  return nullptr;
}
void avx512::pack_b_bf16_pairs(int, int, const bf16_t*, long, bf16_t*, int) {}
} // namespace tpuctl::kernels::detail

#endif
