// AVX2 + FMA micro-kernels (this file alone is compiled with -mavx2 -mfma; gemm.cpp calls into
// it only after __builtin_cpu_supports says the CPU has both).
//
// fp32 (also bf16, widened to fp32 at pack time): a 6 x 16 register tile, the BLIS "Haswell"
// shape. Twelve ymm accumulators hold C; per k step the kernel loads one 16-wide row of the B
// panel (two ymm), broadcasts the six A values of that step one after another and issues twelve
// vfmadd231ps. That is 12 FMAs against 2 loads + 6 broadcasts, comfortably inside the two FMA
// and three load ports of Zen 3/4/5 and Haswell-class cores, and the 12 independent accumulator
// chains cover the FMA latency (4 cycles x 2 ports = 8 chains needed).
//
// int8, exact: the packing step has already sign-extended both operands to int16 and
// interleaved k in pairs, so the inner loop is vpmaddwd (int16 x int16, adjacent pairs summed
// into int32, which is exact: |a0 b0 + a1 b1| <= 2 * 128 * 128 = 32768) followed by vpaddd into
// the int32 accumulator (two's-complement wrap, the contract of reference_gemm_s8). No
// vpmaddubsw anywhere: its int16 saturation is what makes oneDNN's s8 GEMM inexact. One k-pair
// step moves 6 x 16 x 2 = 192 MACs with 12 vpmaddwd + 12 vpaddd, 2 B loads and 6 vpbroadcastd.
//
// Only static functions and intrinsics live here (no templates, no std:: inline functions), so
// the linker can never pick an AVX2-compiled COMDAT copy for baseline code.
#include "kernels/gemm_kernels.hpp"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

namespace tpuctl::kernels::detail {

namespace {

inline __attribute__((always_inline)) void store_f32(float* c, __m256 v, bool accumulate) {
  if (accumulate) {
    v = _mm256_add_ps(v, _mm256_loadu_ps(c));
  }
  _mm256_storeu_ps(c, v);
}

void kernel_f32(int kc, const float* a, const float* b, float* c, long ldc, bool accumulate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int i = 0; i < k_mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + k_nr - 1), _MM_HINT_T0);
  }
#pragma GCC unroll 4
  for (int p = 0; p < kc; ++p) {
    __m256 b0 = _mm256_loadu_ps(b);
    __m256 b1 = _mm256_loadu_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    a += k_mr;
    b += k_nr;
  }
  store_f32(c + 0 * ldc, c00, accumulate);
  store_f32(c + 0 * ldc + 8, c01, accumulate);
  store_f32(c + 1 * ldc, c10, accumulate);
  store_f32(c + 1 * ldc + 8, c11, accumulate);
  store_f32(c + 2 * ldc, c20, accumulate);
  store_f32(c + 2 * ldc + 8, c21, accumulate);
  store_f32(c + 3 * ldc, c30, accumulate);
  store_f32(c + 3 * ldc + 8, c31, accumulate);
  store_f32(c + 4 * ldc, c40, accumulate);
  store_f32(c + 4 * ldc + 8, c41, accumulate);
  store_f32(c + 5 * ldc, c50, accumulate);
  store_f32(c + 5 * ldc + 8, c51, accumulate);
}

inline __attribute__((always_inline)) void store_s32(int32_t* c, __m256i v, bool accumulate) {
  __m256i* p = reinterpret_cast<__m256i*>(c);
  if (accumulate) {
    v = _mm256_add_epi32(v, _mm256_loadu_si256(p));
  }
  _mm256_storeu_si256(p, v);
}

void kernel_s8(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
               bool accumulate) {
  __m256i c00 = _mm256_setzero_si256(), c01 = _mm256_setzero_si256();
  __m256i c10 = _mm256_setzero_si256(), c11 = _mm256_setzero_si256();
  __m256i c20 = _mm256_setzero_si256(), c21 = _mm256_setzero_si256();
  __m256i c30 = _mm256_setzero_si256(), c31 = _mm256_setzero_si256();
  __m256i c40 = _mm256_setzero_si256(), c41 = _mm256_setzero_si256();
  __m256i c50 = _mm256_setzero_si256(), c51 = _mm256_setzero_si256();
  for (int i = 0; i < k_mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + k_nr - 1), _MM_HINT_T0);
  }
  const __m256i* bv = reinterpret_cast<const __m256i*>(b);
#pragma GCC unroll 4
  for (int q = 0; q < pairs; ++q) {
    __m256i b0 = _mm256_loadu_si256(bv);
    __m256i b1 = _mm256_loadu_si256(bv + 1);
    __m256i av = _mm256_set1_epi32(a[0]);
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(av, b0));
    c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[1]);
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(av, b0));
    c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[2]);
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(av, b0));
    c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[3]);
    c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(av, b0));
    c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[4]);
    c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(av, b0));
    c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[5]);
    c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(av, b0));
    c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(av, b1));
    a += k_mr;
    bv += 2;
  }
  store_s32(c + 0 * ldc, c00, accumulate);
  store_s32(c + 0 * ldc + 8, c01, accumulate);
  store_s32(c + 1 * ldc, c10, accumulate);
  store_s32(c + 1 * ldc + 8, c11, accumulate);
  store_s32(c + 2 * ldc, c20, accumulate);
  store_s32(c + 2 * ldc + 8, c21, accumulate);
  store_s32(c + 3 * ldc, c30, accumulate);
  store_s32(c + 3 * ldc + 8, c31, accumulate);
  store_s32(c + 4 * ldc, c40, accumulate);
  store_s32(c + 4 * ldc + 8, c41, accumulate);
  store_s32(c + 5 * ldc, c50, accumulate);
  store_s32(c + 5 * ldc + 8, c51, accumulate);
}

} // namespace

const MicroKernels* avx2_micro_kernels() {
  const MicroKernels& portable = portable_micro_kernels();
  static const MicroKernels k_table = {
      kernel_f32,         kernel_s8,           portable.pack_a_f32,  portable.pack_a_bf16,
      portable.pack_a_s8, portable.pack_b_f32, portable.pack_b_bf16, portable.pack_b_s8};
  return &k_table;
}

} // namespace tpuctl::kernels::detail

#else // built without AVX2 (a non-x86 target): the portable kernels run everywhere

namespace tpuctl::kernels::detail {
const MicroKernels* avx2_micro_kernels() {
  return nullptr;
}
} // namespace tpuctl::kernels::detail

#endif
