// Internal to the AVX-512 files (gemm_avx512*.cpp, each compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq plus its own unit's flag): what their kernels and packers share, all
// with internal linkage (an anonymous namespace, no std:: templates), so no AVX-512-compiled
// COMDAT copy of a function can be picked by the linker for baseline code.
//
// The tile is 12 x 32 (gemm_wide.hpp): accumulators acc[i][h] hold row i, columns 16h..16h+15.
// A kernel body is a lambda that updates them for one k group; tile_loop runs it over the
// packed depth and stores the valid part with column masks, so ragged tiles cost no scratch
// tile and no extra pass.
#pragma once

#include "kernels/gemm_wide.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

#include <immintrin.h>

// GCC 12 warns that its own intrinsics read an "uninitialized" _mm512_undefined_*() operand.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace tpuctl::kernels::detail::avx512 {

namespace {

constexpr int k_mr = k_avx512_mr;

// Column masks of the two 16-column halves of a tile with `nc` valid columns (0 < nc <= 32).
inline __attribute__((always_inline)) __mmask16 half_mask(int nc, int half) {
  int valid = nc - 16 * half;
  if (valid >= 16) {
    return 0xffff;
  }
  return valid <= 0 ? 0 : static_cast<__mmask16>((1u << valid) - 1u);
}

// Asks for the tile's rows of C (two cache lines each) now, so that the epilogue's loads, or
// the stores' ownership requests, do not wait on memory: C is read or written once per k-block
// and, for large C, is not in cache.
template <typename C>
inline __attribute__((always_inline)) void prefetch_tile(const C* c, long ldc, int rows) {
  for (int i = 0; i < rows; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 31), _MM_HINT_T0);
  }
}

// Asks for the two cache lines of the next B panel (`panel_bytes` on from this k step's row,
// `step`) into L2: the panels of a B block follow each other, and the first A panel to use a
// panel would otherwise wait for it from L3 (measured: 2048^3 fp32 +5%, 1024^3 no change).
inline __attribute__((always_inline)) void prefetch_next_panel(const void* step, long panel_bytes) {
  const char* p = static_cast<const char*>(step) + panel_bytes;
  _mm_prefetch(p, _MM_HINT_T1);
  _mm_prefetch(p + 64, _MM_HINT_T1);
}

// Zero accumulators.
template <typename V>
inline __attribute__((always_inline)) void zero(V (&acc)[k_mr][2], V z) {
#pragma GCC unroll 12
  for (int i = 0; i < k_mr; ++i) {
    acc[i][0] = z;
    acc[i][1] = z;
  }
}

// Stores rows [0, rows) x columns [0, nc) of fp32 accumulators into C (adding C's values first
// when `accumulate`).
inline __attribute__((always_inline)) void store_tile(__m512 (&acc)[k_mr][2], float* c, long ldc,
                                                      bool accumulate, int rows, int nc) {
  __mmask16 m0 = half_mask(nc, 0), m1 = half_mask(nc, 1);
#pragma GCC unroll 12
  for (int i = 0; i < k_mr; ++i) {
    if (i < rows) {
      float* row = c + i * ldc;
      __m512 v0 = acc[i][0], v1 = acc[i][1];
      if (accumulate) {
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, row));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, row + 16));
      }
      _mm512_mask_storeu_ps(row, m0, v0);
      _mm512_mask_storeu_ps(row + 16, m1, v1);
    }
  }
}

// The same for int32 accumulators (wrap-around adds), first subtracting 128 x row_sums[i] from
// row i (the bias of gemm_wide.hpp's int8 layout).
inline __attribute__((always_inline)) void store_tile(__m512i (&acc)[k_mr][2], int32_t* c, long ldc,
                                                      bool accumulate, int rows, int nc,
                                                      const int32_t* row_sums) {
  __mmask16 m0 = half_mask(nc, 0), m1 = half_mask(nc, 1);
#pragma GCC unroll 12
  for (int i = 0; i < k_mr; ++i) {
    if (i < rows) {
      int32_t* row = c + i * ldc;
      __m512i fix = _mm512_slli_epi32(_mm512_set1_epi32(row_sums[i]), 7);
      __m512i v0 = _mm512_sub_epi32(acc[i][0], fix), v1 = _mm512_sub_epi32(acc[i][1], fix);
      if (accumulate) {
        v0 = _mm512_add_epi32(v0, _mm512_maskz_loadu_epi32(m0, row));
        v1 = _mm512_add_epi32(v1, _mm512_maskz_loadu_epi32(m1, row + 16));
      }
      _mm512_mask_storeu_epi32(row, m0, v0);
      _mm512_mask_storeu_epi32(row + 16, m1, v1);
    }
  }
}

// The 32-bit word at byte offset `offset` of a packed A panel, broadcast to 16 lanes: one fp32
// value, one bf16 pair or one int8 quad of row `offset / k_wide_row_stride`.
inline __attribute__((always_inline)) __m512i broadcast_word(const void* a, long offset) {
  int32_t v;
  __builtin_memcpy(&v, static_cast<const char*>(a) + offset, sizeof v);
  return _mm512_set1_epi32(v);
}

// Copies `bytes` bytes from `in` to `out` as whole 64-byte chunks, the last one zero-filled
// past `bytes` (masked loads read nothing past the end), and calls on_chunk(v) on each chunk.
template <typename OnChunk>
inline __attribute__((always_inline)) void copy_row(const char* in, int bytes, char* out,
                                                    OnChunk on_chunk) {
  for (int off = 0; off < bytes; off += 64) {
    int left = bytes - off;
    __mmask64 m = left >= 64 ? ~0ull : (1ull << left) - 1ull;
    __m512i v = _mm512_maskz_loadu_epi8(m, in + off);
    _mm512_storeu_si512(out + off, v);
    on_chunk(v);
  }
}

// Runs row(src_row, dst_row, i) for the k_mr rows of every A panel of an mc-row block (panels
// `panel_bytes` apart at `dst`); rows past mc are zeroed over a whole k-block instead (the
// kernels compute them, never store them). `src_row(r)` is the address of row r of A.
template <typename Src, typename Row>
inline __attribute__((always_inline)) void for_panel_rows(int mc, char* dst, size_t panel_bytes,
                                                          Src src_row, Row row) {
  for (int i0 = 0; i0 < mc; i0 += k_mr, dst += panel_bytes) {
    for (int i = 0; i < k_mr; ++i) {
      char* out = dst + static_cast<long>(i) * k_wide_row_stride;
      if (i0 + i < mc) {
        row(src_row(i0 + i), out, i, dst);
      } else {
        for (int off = 0; off < k_wide_row_bytes; off += 64) {
          _mm512_storeu_si512(out + off, _mm512_setzero_si512());
        }
        row(nullptr, out, i, dst);
      }
    }
  }
}

// Packs A panels of path G (gemm_wide.hpp) with its values as stored (fp32 or bf16 bits).
template <typename G>
inline __attribute__((always_inline)) void
pack_a_as_stored(int mc, int kc, const typename G::AElem* a, long lda, typename G::PackA* dst) {
  for_panel_rows(
      mc, reinterpret_cast<char*>(dst), G::a_panel_bytes,
      [&](int r) { return reinterpret_cast<const char*>(a + r * lda); },
      [&](const char* in, char* out, int, char*) {
        if (in) {
          copy_row(in, kc * static_cast<int>(sizeof(typename G::AElem)), out, [](__m512i) {});
        }
      });
}

} // namespace

} // namespace tpuctl::kernels::detail::avx512

#endif
