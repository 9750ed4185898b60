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
// Everything here has internal linkage (an anonymous namespace; no std:: inline functions), so
// the linker can never pick an AVX2-compiled COMDAT copy of a function for baseline code.
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

// B operand loaders: 16 fp32 values of one k step, as two ymm.
struct PackedF32 {
  using T = float;
  static __m256 lo(const float* b) { return _mm256_loadu_ps(b); }
  static __m256 hi(const float* b) { return _mm256_loadu_ps(b + 8); }
};
struct DirectBf16 {
  using T = bf16_t;
  static __m256 widen(const bf16_t* b) {
    __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  }
  static __m256 lo(const bf16_t* b) { return widen(b); }
  static __m256 hi(const bf16_t* b) { return widen(b + 8); }
};

// The 6 x 16 fp32 tile. With kPack, the widened B values are also stored to `pack` in the
// packed panel layout, so the driver's first row panel packs B for the others as it goes.
template <typename Load, bool kPack>
inline __attribute__((always_inline)) void f32_body(int kc, const float* a,
                                                    const typename Load::T* b, long ldb, float* c,
                                                    long ldc, bool accumulate, float* pack) {
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
    __m256 b0 = Load::lo(b);
    __m256 b1 = Load::hi(b);
    if (kPack) {
      _mm256_storeu_ps(pack, b0);
      _mm256_storeu_ps(pack + 8, b1);
      pack += k_nr;
    }
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
    b += ldb;
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

void kernel_f32(int kc, const float* a, const float* b, float* c, long ldc, bool accumulate) {
  f32_body<PackedF32, false>(kc, a, b, k_nr, c, ldc, accumulate, nullptr);
}

void kernel_f32_direct(int kc, const float* a, const float* b, long ldb, float* c, long ldc,
                       bool accumulate, float* pack) {
  if (pack) {
    f32_body<PackedF32, true>(kc, a, b, ldb, c, ldc, accumulate, pack);
  } else {
    f32_body<PackedF32, false>(kc, a, b, ldb, c, ldc, accumulate, nullptr);
  }
}

void kernel_bf16_direct(int kc, const float* a, const bf16_t* b, long ldb, float* c, long ldc,
                        bool accumulate, float* pack) {
  if (pack) {
    f32_body<DirectBf16, true>(kc, a, b, ldb, c, ldc, accumulate, pack);
  } else {
    f32_body<DirectBf16, false>(kc, a, b, ldb, c, ldc, accumulate, nullptr);
  }
}

inline __attribute__((always_inline)) void store_s32(int32_t* c, __m256i v, bool accumulate) {
  __m256i* p = reinterpret_cast<__m256i*>(c);
  if (accumulate) {
    v = _mm256_add_epi32(v, _mm256_loadu_si256(p));
  }
  _mm256_storeu_si256(p, v);
}

// One k-pair step of the int8 tile: 12 vpmaddwd + 12 vpaddd.
#define TPUCTL_S8_STEP(a, b0, b1)                                                                  \
  do {                                                                                             \
    __m256i av = _mm256_set1_epi32((a)[0]);                                                        \
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(av, b0));                                        \
    c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(av, b1));                                        \
    av = _mm256_set1_epi32((a)[1]);                                                                \
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(av, b0));                                        \
    c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(av, b1));                                        \
    av = _mm256_set1_epi32((a)[2]);                                                                \
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(av, b0));                                        \
    c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(av, b1));                                        \
    av = _mm256_set1_epi32((a)[3]);                                                                \
    c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(av, b0));                                        \
    c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(av, b1));                                        \
    av = _mm256_set1_epi32((a)[4]);                                                                \
    c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(av, b0));                                        \
    c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(av, b1));                                        \
    av = _mm256_set1_epi32((a)[5]);                                                                \
    c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(av, b0));                                        \
    c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(av, b1));                                        \
  } while (false)

#define TPUCTL_S8_DECLARE_ACCUMULATORS                                                             \
  __m256i c00 = _mm256_setzero_si256(), c01 = _mm256_setzero_si256();                              \
  __m256i c10 = _mm256_setzero_si256(), c11 = _mm256_setzero_si256();                              \
  __m256i c20 = _mm256_setzero_si256(), c21 = _mm256_setzero_si256();                              \
  __m256i c30 = _mm256_setzero_si256(), c31 = _mm256_setzero_si256();                              \
  __m256i c40 = _mm256_setzero_si256(), c41 = _mm256_setzero_si256();                              \
  __m256i c50 = _mm256_setzero_si256(), c51 = _mm256_setzero_si256()

#define TPUCTL_S8_STORE                                                                            \
  do {                                                                                             \
    store_s32(c + 0 * ldc, c00, accumulate);                                                       \
    store_s32(c + 0 * ldc + 8, c01, accumulate);                                                   \
    store_s32(c + 1 * ldc, c10, accumulate);                                                       \
    store_s32(c + 1 * ldc + 8, c11, accumulate);                                                   \
    store_s32(c + 2 * ldc, c20, accumulate);                                                       \
    store_s32(c + 2 * ldc + 8, c21, accumulate);                                                   \
    store_s32(c + 3 * ldc, c30, accumulate);                                                       \
    store_s32(c + 3 * ldc + 8, c31, accumulate);                                                   \
    store_s32(c + 4 * ldc, c40, accumulate);                                                       \
    store_s32(c + 4 * ldc + 8, c41, accumulate);                                                   \
    store_s32(c + 5 * ldc, c50, accumulate);                                                       \
    store_s32(c + 5 * ldc + 8, c51, accumulate);                                                   \
  } while (false)

void prefetch_c(const int32_t* c, long ldc) {
  for (int i = 0; i < k_mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + k_nr - 1), _MM_HINT_T0);
  }
}

void kernel_s8(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
               bool accumulate) {
  TPUCTL_S8_DECLARE_ACCUMULATORS;
  prefetch_c(c, ldc);
  const __m256i* bv = reinterpret_cast<const __m256i*>(b);
#pragma GCC unroll 4
  for (int q = 0; q < pairs; ++q) {
    __m256i b0 = _mm256_loadu_si256(bv);
    __m256i b1 = _mm256_loadu_si256(bv + 1);
    TPUCTL_S8_STEP(a, b0, b1);
    a += k_mr;
    bv += 2;
  }
  TPUCTL_S8_STORE;
}

// B straight from int8 rows: interleave rows 2q and 2q + 1 bytewise, then sign-extend, which
// is exactly the packed layout (8 columns x 2 k values per ymm). With kPack the two vectors are
// also stored to `pack` (the packed panel the driver's other row panels then use).
template <bool kPack>
inline __attribute__((always_inline)) void s8_direct_body(int kc, const int32_t* a, const int8_t* b,
                                                          long ldb, int32_t* c, long ldc,
                                                          bool accumulate, int16_t* pack) {
  TPUCTL_S8_DECLARE_ACCUMULATORS;
  prefetch_c(c, ldc);
  __m256i* out = reinterpret_cast<__m256i*>(pack);
  int pairs = kc / 2;
#pragma GCC unroll 2
  for (int q = 0; q < pairs; ++q) {
    __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + ldb));
    __m256i b0 = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(r0, r1));
    __m256i b1 = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(r0, r1));
    if (kPack) {
      _mm256_storeu_si256(out, b0);
      _mm256_storeu_si256(out + 1, b1);
      out += 2;
    }
    TPUCTL_S8_STEP(a, b0, b1);
    a += k_mr;
    b += 2 * ldb;
  }
  if (kc % 2 != 0) {
    __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    __m128i zero = _mm_setzero_si128();
    __m256i b0 = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(r0, zero));
    __m256i b1 = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(r0, zero));
    if (kPack) {
      _mm256_storeu_si256(out, b0);
      _mm256_storeu_si256(out + 1, b1);
    }
    TPUCTL_S8_STEP(a, b0, b1);
  }
  TPUCTL_S8_STORE;
}

void kernel_s8_direct(int kc, const int32_t* a, const int8_t* b, long ldb, int32_t* c, long ldc,
                      bool accumulate, int16_t* pack) {
  if (pack) {
    s8_direct_body<true>(kc, a, b, ldb, c, ldc, accumulate, pack);
  } else {
    s8_direct_body<false>(kc, a, b, ldb, c, ldc, accumulate, nullptr);
  }
}

#undef TPUCTL_S8_STEP
#undef TPUCTL_S8_DECLARE_ACCUMULATORS
#undef TPUCTL_S8_STORE

// ---- narrow edge kernels ----
// A ragged last panel of at most 8 columns (n = 129, 257, 1025 leave one column) needs only the
// first ymm of each B row: half the work of the full tile. The fp32 version keeps even and odd
// k in separate accumulators (12 chains, enough to cover the FMA latency) and adds them at the
// end; the result is still a sum of the same exact-or-rounded products (gate 1 holds).

void kernel_f32_narrow(int kc, const float* a, const float* b, float* c, long ldc,
                       bool accumulate) {
  __m256 e0 = _mm256_setzero_ps(), e1 = _mm256_setzero_ps(), e2 = _mm256_setzero_ps();
  __m256 e3 = _mm256_setzero_ps(), e4 = _mm256_setzero_ps(), e5 = _mm256_setzero_ps();
  __m256 o0 = _mm256_setzero_ps(), o1 = _mm256_setzero_ps(), o2 = _mm256_setzero_ps();
  __m256 o3 = _mm256_setzero_ps(), o4 = _mm256_setzero_ps(), o5 = _mm256_setzero_ps();
  int p = 0;
  for (; p + 2 <= kc; p += 2) {
    __m256 b0 = _mm256_loadu_ps(b);
    __m256 b1 = _mm256_loadu_ps(b + k_nr);
    e0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), b0, e0);
    e1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, e1);
    e2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, e2);
    e3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, e3);
    e4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), b0, e4);
    e5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), b0, e5);
    o0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 6), b1, o0);
    o1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 7), b1, o1);
    o2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 8), b1, o2);
    o3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 9), b1, o3);
    o4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 10), b1, o4);
    o5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 11), b1, o5);
    a += 2 * k_mr;
    b += 2 * k_nr;
  }
  if (p < kc) {
    __m256 b0 = _mm256_loadu_ps(b);
    e0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), b0, e0);
    e1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, e1);
    e2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, e2);
    e3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, e3);
    e4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), b0, e4);
    e5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), b0, e5);
  }
  store_f32(c + 0 * ldc, _mm256_add_ps(e0, o0), accumulate);
  store_f32(c + 1 * ldc, _mm256_add_ps(e1, o1), accumulate);
  store_f32(c + 2 * ldc, _mm256_add_ps(e2, o2), accumulate);
  store_f32(c + 3 * ldc, _mm256_add_ps(e3, o3), accumulate);
  store_f32(c + 4 * ldc, _mm256_add_ps(e4, o4), accumulate);
  store_f32(c + 5 * ldc, _mm256_add_ps(e5, o5), accumulate);
}

void kernel_s8_narrow(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
                      bool accumulate) {
  __m256i c0 = _mm256_setzero_si256(), c1 = _mm256_setzero_si256(), c2 = _mm256_setzero_si256();
  __m256i c3 = _mm256_setzero_si256(), c4 = _mm256_setzero_si256(), c5 = _mm256_setzero_si256();
  const __m256i* bv = reinterpret_cast<const __m256i*>(b);
#pragma GCC unroll 4
  for (int q = 0; q < pairs; ++q) {
    __m256i b0 = _mm256_loadu_si256(bv);
    c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(_mm256_set1_epi32(a[0]), b0));
    c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(_mm256_set1_epi32(a[1]), b0));
    c2 = _mm256_add_epi32(c2, _mm256_madd_epi16(_mm256_set1_epi32(a[2]), b0));
    c3 = _mm256_add_epi32(c3, _mm256_madd_epi16(_mm256_set1_epi32(a[3]), b0));
    c4 = _mm256_add_epi32(c4, _mm256_madd_epi16(_mm256_set1_epi32(a[4]), b0));
    c5 = _mm256_add_epi32(c5, _mm256_madd_epi16(_mm256_set1_epi32(a[5]), b0));
    a += k_mr;
    bv += 2;
  }
  store_s32(c + 0 * ldc, c0, accumulate);
  store_s32(c + 1 * ldc, c1, accumulate);
  store_s32(c + 2 * ldc, c2, accumulate);
  store_s32(c + 3 * ldc, c3, accumulate);
  store_s32(c + 4 * ldc, c4, accumulate);
  store_s32(c + 5 * ldc, c5, accumulate);
}

// At most 4 columns: the first xmm of each B row, a quarter of the full tile's work.
void kernel_f32_quarter(int kc, const float* a, const float* b, float* c, long ldc,
                        bool accumulate) {
  __m128 e0 = _mm_setzero_ps(), e1 = _mm_setzero_ps(), e2 = _mm_setzero_ps();
  __m128 e3 = _mm_setzero_ps(), e4 = _mm_setzero_ps(), e5 = _mm_setzero_ps();
  __m128 o0 = _mm_setzero_ps(), o1 = _mm_setzero_ps(), o2 = _mm_setzero_ps();
  __m128 o3 = _mm_setzero_ps(), o4 = _mm_setzero_ps(), o5 = _mm_setzero_ps();
  int p = 0;
  for (; p + 2 <= kc; p += 2) {
    __m128 b0 = _mm_loadu_ps(b);
    __m128 b1 = _mm_loadu_ps(b + k_nr);
    e0 = _mm_fmadd_ps(_mm_broadcast_ss(a + 0), b0, e0);
    e1 = _mm_fmadd_ps(_mm_broadcast_ss(a + 1), b0, e1);
    e2 = _mm_fmadd_ps(_mm_broadcast_ss(a + 2), b0, e2);
    e3 = _mm_fmadd_ps(_mm_broadcast_ss(a + 3), b0, e3);
    e4 = _mm_fmadd_ps(_mm_broadcast_ss(a + 4), b0, e4);
    e5 = _mm_fmadd_ps(_mm_broadcast_ss(a + 5), b0, e5);
    o0 = _mm_fmadd_ps(_mm_broadcast_ss(a + 6), b1, o0);
    o1 = _mm_fmadd_ps(_mm_broadcast_ss(a + 7), b1, o1);
    o2 = _mm_fmadd_ps(_mm_broadcast_ss(a + 8), b1, o2);
    o3 = _mm_fmadd_ps(_mm_broadcast_ss(a + 9), b1, o3);
    o4 = _mm_fmadd_ps(_mm_broadcast_ss(a + 10), b1, o4);
    o5 = _mm_fmadd_ps(_mm_broadcast_ss(a + 11), b1, o5);
    a += 2 * k_mr;
    b += 2 * k_nr;
  }
  if (p < kc) {
    __m128 b0 = _mm_loadu_ps(b);
    e0 = _mm_fmadd_ps(_mm_broadcast_ss(a + 0), b0, e0);
    e1 = _mm_fmadd_ps(_mm_broadcast_ss(a + 1), b0, e1);
    e2 = _mm_fmadd_ps(_mm_broadcast_ss(a + 2), b0, e2);
    e3 = _mm_fmadd_ps(_mm_broadcast_ss(a + 3), b0, e3);
    e4 = _mm_fmadd_ps(_mm_broadcast_ss(a + 4), b0, e4);
    e5 = _mm_fmadd_ps(_mm_broadcast_ss(a + 5), b0, e5);
  }
  __m128 rows[k_mr] = {_mm_add_ps(e0, o0), _mm_add_ps(e1, o1), _mm_add_ps(e2, o2),
                       _mm_add_ps(e3, o3), _mm_add_ps(e4, o4), _mm_add_ps(e5, o5)};
  for (int i = 0; i < k_mr; ++i) {
    __m128 v = accumulate ? _mm_add_ps(rows[i], _mm_loadu_ps(c + i * ldc)) : rows[i];
    _mm_storeu_ps(c + i * ldc, v);
  }
}

void kernel_s8_quarter(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
                       bool accumulate) {
  __m128i c0 = _mm_setzero_si128(), c1 = _mm_setzero_si128(), c2 = _mm_setzero_si128();
  __m128i c3 = _mm_setzero_si128(), c4 = _mm_setzero_si128(), c5 = _mm_setzero_si128();
#pragma GCC unroll 4
  for (int q = 0; q < pairs; ++q) {
    __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    c0 = _mm_add_epi32(c0, _mm_madd_epi16(_mm_set1_epi32(a[0]), b0));
    c1 = _mm_add_epi32(c1, _mm_madd_epi16(_mm_set1_epi32(a[1]), b0));
    c2 = _mm_add_epi32(c2, _mm_madd_epi16(_mm_set1_epi32(a[2]), b0));
    c3 = _mm_add_epi32(c3, _mm_madd_epi16(_mm_set1_epi32(a[3]), b0));
    c4 = _mm_add_epi32(c4, _mm_madd_epi16(_mm_set1_epi32(a[4]), b0));
    c5 = _mm_add_epi32(c5, _mm_madd_epi16(_mm_set1_epi32(a[5]), b0));
    a += k_mr;
    b += 2 * k_nr;
  }
  __m128i rows[k_mr] = {c0, c1, c2, c3, c4, c5};
  for (int i = 0; i < k_mr; ++i) {
    __m128i* p = reinterpret_cast<__m128i*>(c + i * ldc);
    _mm_storeu_si128(p, accumulate ? _mm_add_epi32(rows[i], _mm_loadu_si128(p)) : rows[i]);
  }
}

// At most 3 rows (m = 129 leaves 3): half the FMAs of the full tile. Even and odd k again use
// separate accumulators, 12 chains in all.
void kernel_f32_short(int kc, const float* a, const float* b, float* c, long ldc, bool accumulate) {
  __m256 e00 = _mm256_setzero_ps(), e01 = _mm256_setzero_ps(), e10 = _mm256_setzero_ps();
  __m256 e11 = _mm256_setzero_ps(), e20 = _mm256_setzero_ps(), e21 = _mm256_setzero_ps();
  __m256 o00 = _mm256_setzero_ps(), o01 = _mm256_setzero_ps(), o10 = _mm256_setzero_ps();
  __m256 o11 = _mm256_setzero_ps(), o20 = _mm256_setzero_ps(), o21 = _mm256_setzero_ps();
  int p = 0;
  for (; p + 2 <= kc; p += 2) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 b2 = _mm256_loadu_ps(b + k_nr), b3 = _mm256_loadu_ps(b + k_nr + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    e00 = _mm256_fmadd_ps(av, b0, e00);
    e01 = _mm256_fmadd_ps(av, b1, e01);
    av = _mm256_broadcast_ss(a + 1);
    e10 = _mm256_fmadd_ps(av, b0, e10);
    e11 = _mm256_fmadd_ps(av, b1, e11);
    av = _mm256_broadcast_ss(a + 2);
    e20 = _mm256_fmadd_ps(av, b0, e20);
    e21 = _mm256_fmadd_ps(av, b1, e21);
    av = _mm256_broadcast_ss(a + k_mr + 0);
    o00 = _mm256_fmadd_ps(av, b2, o00);
    o01 = _mm256_fmadd_ps(av, b3, o01);
    av = _mm256_broadcast_ss(a + k_mr + 1);
    o10 = _mm256_fmadd_ps(av, b2, o10);
    o11 = _mm256_fmadd_ps(av, b3, o11);
    av = _mm256_broadcast_ss(a + k_mr + 2);
    o20 = _mm256_fmadd_ps(av, b2, o20);
    o21 = _mm256_fmadd_ps(av, b3, o21);
    a += 2 * k_mr;
    b += 2 * k_nr;
  }
  if (p < kc) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    e00 = _mm256_fmadd_ps(av, b0, e00);
    e01 = _mm256_fmadd_ps(av, b1, e01);
    av = _mm256_broadcast_ss(a + 1);
    e10 = _mm256_fmadd_ps(av, b0, e10);
    e11 = _mm256_fmadd_ps(av, b1, e11);
    av = _mm256_broadcast_ss(a + 2);
    e20 = _mm256_fmadd_ps(av, b0, e20);
    e21 = _mm256_fmadd_ps(av, b1, e21);
  }
  store_f32(c + 0 * ldc, _mm256_add_ps(e00, o00), accumulate);
  store_f32(c + 0 * ldc + 8, _mm256_add_ps(e01, o01), accumulate);
  store_f32(c + 1 * ldc, _mm256_add_ps(e10, o10), accumulate);
  store_f32(c + 1 * ldc + 8, _mm256_add_ps(e11, o11), accumulate);
  store_f32(c + 2 * ldc, _mm256_add_ps(e20, o20), accumulate);
  store_f32(c + 2 * ldc + 8, _mm256_add_ps(e21, o21), accumulate);
}

void kernel_s8_short(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
                     bool accumulate) {
  __m256i c00 = _mm256_setzero_si256(), c01 = _mm256_setzero_si256();
  __m256i c10 = _mm256_setzero_si256(), c11 = _mm256_setzero_si256();
  __m256i c20 = _mm256_setzero_si256(), c21 = _mm256_setzero_si256();
  const __m256i* bv = reinterpret_cast<const __m256i*>(b);
#pragma GCC unroll 4
  for (int q = 0; q < pairs; ++q) {
    __m256i b0 = _mm256_loadu_si256(bv), b1 = _mm256_loadu_si256(bv + 1);
    __m256i av = _mm256_set1_epi32(a[0]);
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(av, b0));
    c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[1]);
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(av, b0));
    c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[2]);
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(av, b0));
    c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(av, b1));
    a += k_mr;
    bv += 2;
  }
  store_s32(c + 0 * ldc, c00, accumulate);
  store_s32(c + 0 * ldc + 8, c01, accumulate);
  store_s32(c + 1 * ldc, c10, accumulate);
  store_s32(c + 1 * ldc + 8, c11, accumulate);
  store_s32(c + 2 * ldc, c20, accumulate);
  store_s32(c + 2 * ldc + 8, c21, accumulate);
}

// At most 3 columns (n = 129, 257, 1025 leave one): the tile turned around. One unaligned
// load takes the 6 A values of a k step (plus 2 of the next step, ignored; the A buffers have
// slack for the last step's over-read) and each column's B value is broadcast, so a column
// costs one FMA per k step instead of a quarter tile's six. Four k-phases of accumulators hide
// the FMA latency; lanes 6 and 7 are never stored.
template <int kCols>
inline __attribute__((always_inline)) void f32_columns(int kc, const float* a, const float* b,
                                                       float* c, long ldc, bool accumulate) {
  __m256 acc[4][kCols];
  for (auto& phase : acc) {
    for (auto& v : phase) {
      v = _mm256_setzero_ps();
    }
  }
  int p = 0;
  for (; p + 4 <= kc; p += 4) {
    for (int u = 0; u < 4; ++u) {
      __m256 av = _mm256_loadu_ps(a + (p + u) * k_mr);
      for (int j = 0; j < kCols; ++j) {
        acc[u][j] = _mm256_fmadd_ps(
            av, _mm256_broadcast_ss(b + static_cast<long>(p + u) * k_nr + j), acc[u][j]);
      }
    }
  }
  for (; p < kc; ++p) {
    __m256 av = _mm256_loadu_ps(a + p * k_mr);
    for (int j = 0; j < kCols; ++j) {
      acc[0][j] =
          _mm256_fmadd_ps(av, _mm256_broadcast_ss(b + static_cast<long>(p) * k_nr + j), acc[0][j]);
    }
  }
  for (int j = 0; j < kCols; ++j) {
    __m256 v =
        _mm256_add_ps(_mm256_add_ps(acc[0][j], acc[1][j]), _mm256_add_ps(acc[2][j], acc[3][j]));
    alignas(32) float rows[8];
    _mm256_store_ps(rows, v);
    for (int i = 0; i < k_mr; ++i) {
      float* out = c + i * ldc + j;
      *out = accumulate ? *out + rows[i] : rows[i];
    }
  }
}

void kernel_f32_columns(int kc, const float* a, const float* b, float* c, long ldc, bool accumulate,
                        int nc) {
  if (nc == 1) {
    f32_columns<1>(kc, a, b, c, ldc, accumulate);
  } else if (nc == 2) {
    f32_columns<2>(kc, a, b, c, ldc, accumulate);
  } else {
    f32_columns<3>(kc, a, b, c, ldc, accumulate);
  }
}

// The int8 version: 6 A words (k-pairs) per load, the column's B pair broadcast as one word.
template <int kCols>
inline __attribute__((always_inline)) void s8_columns(int pairs, const int32_t* a, const int16_t* b,
                                                      int32_t* c, long ldc, bool accumulate) {
  __m256i acc[kCols];
  for (auto& v : acc) {
    v = _mm256_setzero_si256();
  }
  for (int q = 0; q < pairs; ++q) {
    __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + q * k_mr));
    const int16_t* bq = b + static_cast<long>(q) * 2 * k_nr;
    for (int j = 0; j < kCols; ++j) {
      int32_t word;
      __builtin_memcpy(&word, bq + 2 * j, sizeof word);
      acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(av, _mm256_set1_epi32(word)));
    }
  }
  for (int j = 0; j < kCols; ++j) {
    alignas(32) int32_t rows[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(rows), acc[j]);
    for (int i = 0; i < k_mr; ++i) {
      int32_t* out = c + i * ldc + j;
      *out =
          accumulate
              ? static_cast<int32_t>(static_cast<uint32_t>(*out) + static_cast<uint32_t>(rows[i]))
              : rows[i];
    }
  }
}

void kernel_s8_columns(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
                       bool accumulate, int nc) {
  if (nc == 1) {
    s8_columns<1>(pairs, a, b, c, ldc, accumulate);
  } else if (nc == 2) {
    s8_columns<2>(pairs, a, b, c, ldc, accumulate);
  } else {
    s8_columns<3>(pairs, a, b, c, ldc, accumulate);
  }
}

// ---- packing ----
// A panels are a transpose (6 rows of A become k-major groups of 6): 8 k values of the 6 rows
// are loaded as 6 ymm (two zero rows complete an 8 x 8 block), transposed with the usual
// unpack / shuffle / permute2f128 network and stored 6 values per k. Ragged panels (fewer than
// 6 rows) and k tails take the scalar loops. B panels are row copies: 16 values per k row,
// widened (bf16) or pair-interleaved and sign-extended (int8) on the way.

inline __attribute__((always_inline)) void transpose8(__m256& r0, __m256& r1, __m256& r2,
                                                      __m256& r3, __m256& r4, __m256& r5,
                                                      __m256& r6, __m256& r7) {
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r0 = _mm256_permute2f128_ps(s0, s4, 0x20);
  r1 = _mm256_permute2f128_ps(s1, s5, 0x20);
  r2 = _mm256_permute2f128_ps(s2, s6, 0x20);
  r3 = _mm256_permute2f128_ps(s3, s7, 0x20);
  r4 = _mm256_permute2f128_ps(s0, s4, 0x31);
  r5 = _mm256_permute2f128_ps(s1, s5, 0x31);
  r6 = _mm256_permute2f128_ps(s2, s6, 0x31);
  r7 = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Stores lanes 0..5 of v (one k step of an A panel).
inline __attribute__((always_inline)) void store6(void* dst, __m256 v) {
  float* d = static_cast<float*>(dst);
  _mm_storeu_ps(d, _mm256_castps256_ps128(v));
  _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(v, 1));
}

// Transposes 6 rows of 8 32-bit values (r6, r7 zero) and stores 8 groups of 6 at dst.
inline __attribute__((always_inline)) void
transpose_store6x8(__m256 r0, __m256 r1, __m256 r2, __m256 r3, __m256 r4, __m256 r5, void* dst) {
  __m256 r6 = _mm256_setzero_ps(), r7 = _mm256_setzero_ps();
  transpose8(r0, r1, r2, r3, r4, r5, r6, r7);
  float* d = static_cast<float*>(dst);
  store6(d + 0 * k_mr, r0);
  store6(d + 1 * k_mr, r1);
  store6(d + 2 * k_mr, r2);
  store6(d + 3 * k_mr, r3);
  store6(d + 4 * k_mr, r4);
  store6(d + 5 * k_mr, r5);
  store6(d + 6 * k_mr, r6);
  store6(d + 7 * k_mr, r7);
}

float bf16_bits_to_float(bf16_t v) {
  return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(v) << 16)));
}

__m256 widen8_bf16(const bf16_t* p) {
  __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}

// The scalar A packer for fp32 and bf16 (ragged panels and k tails): k in [p_begin, kc).
template <typename T>
inline __attribute__((always_inline)) void pack_a_scalar(const T* const* r, int rows, int p_begin,
                                                         int kc, float* dst) {
  for (int p = p_begin; p < kc; ++p) {
    for (int i = 0; i < k_mr; ++i) {
      float v = 0.0f;
      if (i < rows) {
        if constexpr (sizeof(T) == 2) {
          v = bf16_bits_to_float(r[i][p]);
        } else {
          v = r[i][p];
        }
      }
      dst[static_cast<long>(p) * k_mr + i] = v;
    }
  }
}

void pack_a_f32(int mc, int kc, const float* a, long lda, float* dst) {
  for (int i0 = 0; i0 < mc; i0 += k_mr, dst += static_cast<long>(kc) * k_mr) {
    int rows = mc - i0 < k_mr ? mc - i0 : k_mr;
    const float* r[k_mr];
    for (int i = 0; i < k_mr; ++i) {
      r[i] = a + static_cast<long>(i0 + (i < rows ? i : 0)) * lda;
    }
    int p = 0;
    if (rows == k_mr) {
      for (; p + 8 <= kc; p += 8) {
        transpose_store6x8(_mm256_loadu_ps(r[0] + p), _mm256_loadu_ps(r[1] + p),
                           _mm256_loadu_ps(r[2] + p), _mm256_loadu_ps(r[3] + p),
                           _mm256_loadu_ps(r[4] + p), _mm256_loadu_ps(r[5] + p),
                           dst + static_cast<long>(p) * k_mr);
      }
    }
    pack_a_scalar(r, rows, p, kc, dst);
  }
}

void pack_a_bf16(int mc, int kc, const bf16_t* a, long lda, float* dst) {
  for (int i0 = 0; i0 < mc; i0 += k_mr, dst += static_cast<long>(kc) * k_mr) {
    int rows = mc - i0 < k_mr ? mc - i0 : k_mr;
    const bf16_t* r[k_mr];
    for (int i = 0; i < k_mr; ++i) {
      r[i] = a + static_cast<long>(i0 + (i < rows ? i : 0)) * lda;
    }
    int p = 0;
    if (rows == k_mr) {
      for (; p + 8 <= kc; p += 8) {
        transpose_store6x8(widen8_bf16(r[0] + p), widen8_bf16(r[1] + p), widen8_bf16(r[2] + p),
                           widen8_bf16(r[3] + p), widen8_bf16(r[4] + p), widen8_bf16(r[5] + p),
                           dst + static_cast<long>(p) * k_mr);
      }
    }
    pack_a_scalar(r, rows, p, kc, dst);
  }
}

// 16 int8 of a row as 8 int32 words, each two sign-extended int16 (k even low, k odd high).
__m256 pairs8_s8(const int8_t* p) {
  return _mm256_castsi256_ps(
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

void pack_a_s8(int mc, int kc, const int8_t* a, long lda, int32_t* dst) {
  int pairs = (kc + 1) / 2;
  for (int i0 = 0; i0 < mc; i0 += k_mr, dst += static_cast<long>(pairs) * k_mr) {
    int rows = mc - i0 < k_mr ? mc - i0 : k_mr;
    const int8_t* r[k_mr];
    for (int i = 0; i < k_mr; ++i) {
      r[i] = a + static_cast<long>(i0 + (i < rows ? i : 0)) * lda;
    }
    int q = 0;
    if (rows == k_mr) {
      for (; 2 * q + 16 <= kc; q += 8) {
        int p = 2 * q;
        transpose_store6x8(pairs8_s8(r[0] + p), pairs8_s8(r[1] + p), pairs8_s8(r[2] + p),
                           pairs8_s8(r[3] + p), pairs8_s8(r[4] + p), pairs8_s8(r[5] + p),
                           dst + static_cast<long>(q) * k_mr);
      }
    }
    for (; q < pairs; ++q) {
      for (int i = 0; i < k_mr; ++i) {
        uint32_t word = 0;
        if (i < rows) {
          int p = 2 * q;
          uint32_t lo = static_cast<uint16_t>(static_cast<int16_t>(r[i][p]));
          uint32_t hi = p + 1 < kc ? static_cast<uint16_t>(static_cast<int16_t>(r[i][p + 1])) : 0u;
          word = lo | (hi << 16);
        }
        dst[static_cast<long>(q) * k_mr + i] = static_cast<int32_t>(word);
      }
    }
  }
}

// Full 16-column B panels take the vector path; a ragged last panel the portable packer.
PackBF32 g_portable_pack_b_f32 = nullptr;
PackBBf16 g_portable_pack_b_bf16 = nullptr;
PackBS8 g_portable_pack_b_s8 = nullptr;

void pack_b_f32(int kc, int nc, const float* b, long ldb, float* dst) {
  if (nc < k_nr) {
    g_portable_pack_b_f32(kc, nc, b, ldb, dst);
    return;
  }
  for (int p = 0; p < kc; ++p, b += ldb, dst += k_nr) {
    _mm256_storeu_ps(dst, _mm256_loadu_ps(b));
    _mm256_storeu_ps(dst + 8, _mm256_loadu_ps(b + 8));
  }
}

void pack_b_bf16(int kc, int nc, const bf16_t* b, long ldb, float* dst) {
  if (nc < k_nr) {
    g_portable_pack_b_bf16(kc, nc, b, ldb, dst);
    return;
  }
  for (int p = 0; p < kc; ++p, b += ldb, dst += k_nr) {
    _mm256_storeu_ps(dst, widen8_bf16(b));
    _mm256_storeu_ps(dst + 8, widen8_bf16(b + 8));
  }
}

void pack_b_s8(int kc, int nc, const int8_t* b, long ldb, int16_t* dst) {
  if (nc < k_nr) {
    g_portable_pack_b_s8(kc, nc, b, ldb, dst);
    return;
  }
  __m256i* out = reinterpret_cast<__m256i*>(dst);
  int q = 0;
  for (; 2 * q + 1 < kc; ++q, b += 2 * ldb, out += 2) {
    __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + ldb));
    _mm256_storeu_si256(out, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(r0, r1)));
    _mm256_storeu_si256(out + 1, _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(r0, r1)));
  }
  if (2 * q < kc) { // odd kc: the last row pairs with zero
    __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    __m128i zero = _mm_setzero_si128();
    _mm256_storeu_si256(out, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(r0, zero)));
    _mm256_storeu_si256(out + 1, _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(r0, zero)));
  }
}

} // namespace

const MicroKernels* avx2_micro_kernels() {
  static const MicroKernels k_table = [] {
    const MicroKernels& portable = portable_micro_kernels();
    g_portable_pack_b_f32 = portable.pack_b_f32;
    g_portable_pack_b_bf16 = portable.pack_b_bf16;
    g_portable_pack_b_s8 = portable.pack_b_s8;
    return MicroKernels{.f32 = kernel_f32,
                        .s8 = kernel_s8,
                        .pack_a_f32 = pack_a_f32,
                        .pack_a_bf16 = pack_a_bf16,
                        .pack_a_s8 = pack_a_s8,
                        .pack_b_f32 = pack_b_f32,
                        .pack_b_bf16 = pack_b_bf16,
                        .pack_b_s8 = pack_b_s8,
                        .f32_direct = kernel_f32_direct,
                        .bf16_direct = kernel_bf16_direct,
                        .s8_direct = kernel_s8_direct,
                        .f32_narrow = kernel_f32_narrow,
                        .s8_narrow = kernel_s8_narrow,
                        .f32_quarter = kernel_f32_quarter,
                        .s8_quarter = kernel_s8_quarter,
                        .f32_short = kernel_f32_short,
                        .s8_short = kernel_s8_short,
                        .f32_columns = kernel_f32_columns,
                        .s8_columns = kernel_s8_columns};
  }();
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
