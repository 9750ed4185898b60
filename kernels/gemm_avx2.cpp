// AVX2 + FMA micro-kernels (this file and gemm_avx2_edge.cpp / gemm_avx2_pack.cpp alone are
// compiled with -mavx2 -mfma; gemm.cpp reaches them only after cpu_features() says the
// CPU has both).
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
// Helpers and templates here have internal linkage (anonymous namespaces; no std:: inline
// functions), so the linker can never pick an AVX2-compiled COMDAT copy of a function for
// baseline code; the only external functions are the ones the table points to.
//
// The edge kernels (ragged panels) live in gemm_avx2_edge.cpp and the packers in
// gemm_avx2_pack.cpp; this file holds the two main tiles, the direct-B variants and the table.
#include "kernels/gemm_avx2.hpp"

#if defined(__AVX2__) && defined(__FMA__)

namespace tpuctl::kernels::detail {

namespace {

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

} // namespace

const MicroKernels* avx2_micro_kernels() {
  static const MicroKernels k_table = {.f32 = kernel_f32,
                                       .s8 = kernel_s8,
                                       .pack_a_f32 = avx2::pack_a_f32,
                                       .pack_a_bf16 = avx2::pack_a_bf16,
                                       .pack_a_s8 = avx2::pack_a_s8,
                                       .pack_b_f32 = avx2::pack_b_f32,
                                       .pack_b_bf16 = avx2::pack_b_bf16,
                                       .pack_b_s8 = avx2::pack_b_s8,
                                       .f32_direct = kernel_f32_direct,
                                       .bf16_direct = kernel_bf16_direct,
                                       .s8_direct = kernel_s8_direct,
                                       .f32_narrow = avx2::kernel_f32_narrow,
                                       .s8_narrow = avx2::kernel_s8_narrow,
                                       .f32_quarter = avx2::kernel_f32_quarter,
                                       .s8_quarter = avx2::kernel_s8_quarter,
                                       .f32_short = avx2::kernel_f32_short,
                                       .s8_short = avx2::kernel_s8_short,
                                       .f32_columns = avx2::kernel_f32_columns,
                                       .s8_columns = avx2::kernel_s8_columns};
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
