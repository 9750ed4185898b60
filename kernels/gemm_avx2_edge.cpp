// AVX2 + FMA kernels for the ragged edges of C (compiled with -mavx2 -mfma; called only through
// the table of gemm_avx2.cpp, after the run-time CPU check). Each trades the full 6 x 16 tile
// for the part of it that is valid, so sizes like 129 or 257 pay little for their last row
// panel or column panel.
#include "kernels/gemm_avx2.hpp"

#if defined(__AVX2__) && defined(__FMA__)

namespace tpuctl::kernels::detail::avx2 {

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
namespace {

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

} // namespace

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
namespace {

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

} // namespace

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

} // namespace tpuctl::kernels::detail::avx2

#endif
