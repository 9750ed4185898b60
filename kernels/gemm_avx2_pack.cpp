// AVX2 packing routines (compiled with -mavx2 -mfma; called only through the table of
// gemm_avx2.cpp, after the run-time CPU check).
//
// A panels are a transpose (6 rows of A become k-major groups of 6): 8 k values of the 6 rows
// are loaded as 6 ymm (two zero rows complete an 8 x 8 block), transposed with the usual
// unpack / shuffle / permute2f128 network and stored 6 values per k. Ragged panels (fewer than
// 6 rows) and k tails take the scalar loops. B panels are row copies: 16 values per k row,
// widened (bf16) or pair-interleaved and sign-extended (int8) on the way.
#include "kernels/gemm_avx2.hpp"

#if defined(__AVX2__) && defined(__FMA__)

namespace tpuctl::kernels::detail::avx2 {

namespace {

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

// 16 int8 of a row as 8 int32 words, each two sign-extended int16 (k even low, k odd high).
__m256 pairs8_s8(const int8_t* p) {
  return _mm256_castsi256_ps(
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

} // namespace

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

void pack_b_f32(int kc, int nc, const float* b, long ldb, float* dst) {
  if (nc < k_nr) {
    portable_micro_kernels().pack_b_f32(kc, nc, b, ldb, dst);
    return;
  }
  for (int p = 0; p < kc; ++p, b += ldb, dst += k_nr) {
    _mm256_storeu_ps(dst, _mm256_loadu_ps(b));
    _mm256_storeu_ps(dst + 8, _mm256_loadu_ps(b + 8));
  }
}

void pack_b_bf16(int kc, int nc, const bf16_t* b, long ldb, float* dst) {
  if (nc < k_nr) {
    portable_micro_kernels().pack_b_bf16(kc, nc, b, ldb, dst);
    return;
  }
  for (int p = 0; p < kc; ++p, b += ldb, dst += k_nr) {
    _mm256_storeu_ps(dst, widen8_bf16(b));
    _mm256_storeu_ps(dst + 8, widen8_bf16(b + 8));
  }
}

void pack_b_s8(int kc, int nc, const int8_t* b, long ldb, int16_t* dst) {
  if (nc < k_nr) {
    portable_micro_kernels().pack_b_s8(kc, nc, b, ldb, dst);
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

} // namespace tpuctl::kernels::detail::avx2

#endif
