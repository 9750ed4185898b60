// AVX-512 VNNI exact int8 kernel (this file alone is compiled with -mavx512vnni on top of the
// AVX-512 flags; gemm.cpp reaches it only when cpu_features() has AVX512_VNNI).
//
// vpdpbusd adds four u8 x s8 products per int32 lane, exactly and modulo 2^32 (no intermediate
// saturation, unlike vpmaddubsw). The s8 x s8 product is recovered with a bias (gemm_wide.hpp):
// B is packed as b + 128 (unsigned), A is used as stored (signed, the broadcast operand), and
// the epilogue subtracts 128 x the row sum of A over the k-block, which pack_a stores after the
// panel. The tile is 12 x 32: per k quad, two B loads (16 columns x 4 k each) and 24
// vpdpbusd with the A quad of each row broadcast from memory: 1536 MACs per step.
#include "kernels/gemm_avx512.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) &&                      \
    defined(__AVX512VNNI__)

namespace tpuctl::kernels::detail {

namespace {

using namespace avx512;

void kernel_s8(int kc, const int8_t* a, const uint8_t* b, int32_t* c, long ldc, bool accumulate,
               int rows, int nc) {
  __m512i acc[k_mr][2];
  zero(acc, _mm512_setzero_si512());
  prefetch_tile(c, ldc, rows);
  const int quads = (kc + 3) / 4;
  const long panel_bytes = 4L * quads * k_wide_nr;
#pragma GCC unroll 2
  for (int q = 0; q < quads; ++q) {
    prefetch_next_panel(b, panel_bytes);
    __m512i b0 = _mm512_loadu_si512(b);
    __m512i b1 = _mm512_loadu_si512(b + 64);
#pragma GCC unroll 12
    for (int i = 0; i < k_mr; ++i) {
      __m512i av = broadcast_word(a, static_cast<long>(i) * k_wide_row_stride);
      acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], b0, av);
      acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], b1, av);
    }
    a += 4;
    b += 4 * k_wide_nr;
  }
  // Undo the bias: the row sums lie after the panel's rows (a was advanced by 4 * quads).
  const auto* sums = reinterpret_cast<const int32_t*>(a - 4 * quads + k_mr * k_wide_row_stride);
  store_tile(acc, c, ldc, accumulate, rows, nc, sums);
}

// A as stored, plus each row's sum over the k-block (vpdpbusd of ones by the row's bytes).
void pack_a_s8(int mc, int kc, const int8_t* a, long lda, int8_t* dst) {
  const __m512i ones = _mm512_set1_epi8(1);
  for_panel_rows(
      mc, reinterpret_cast<char*>(dst), Avx512S8::a_panel_bytes,
      [&](int r) { return reinterpret_cast<const char*>(a + r * lda); },
      [&](const char* in, char* out, int i, char* panel) {
        __m512i sum = _mm512_setzero_si512();
        if (in) {
          copy_row(in, kc, out, [&](__m512i v) { sum = _mm512_dpbusd_epi32(sum, ones, v); });
        }
        reinterpret_cast<int32_t*>(panel + k_mr * k_wide_row_stride)[i] =
            _mm512_reduce_add_epi32(sum);
      });
}

// 32 columns x 4 k rows (r0..r3, 32 bytes each) as 128 bytes of quads, biased by +128 when
// `Bias`: bytes 0..63 hold columns 0..15 (4 k values each), bytes 64..127 columns 16..31.
template <bool Bias>
inline __attribute__((always_inline)) void store_quads(__m256i r0, __m256i r1, __m256i r2,
                                                       __m256i r3, void* dst) {
  if (Bias) {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    r0 = _mm256_xor_si256(r0, bias);
    r1 = _mm256_xor_si256(r1, bias);
    r2 = _mm256_xor_si256(r2, bias);
    r3 = _mm256_xor_si256(r3, bias);
  }
  // Per 128-bit lane (columns 0-15 low, 16-31 high): pairs of rows, then quads.
  __m256i t0 = _mm256_unpacklo_epi8(r0, r1), t1 = _mm256_unpackhi_epi8(r0, r1);
  __m256i t2 = _mm256_unpacklo_epi8(r2, r3), t3 = _mm256_unpackhi_epi8(r2, r3);
  __m256i q0 = _mm256_unpacklo_epi16(t0, t2); // columns 0-3 | 16-19
  __m256i q1 = _mm256_unpackhi_epi16(t0, t2); // columns 4-7 | 20-23
  __m256i q2 = _mm256_unpacklo_epi16(t1, t3); // columns 8-11 | 24-27
  __m256i q3 = _mm256_unpackhi_epi16(t1, t3); // columns 12-15 | 28-31
  auto* out = reinterpret_cast<__m256i*>(dst);
  _mm256_storeu_si256(out + 0, _mm256_permute2x128_si256(q0, q1, 0x20));
  _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(q2, q3, 0x20));
  _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(q0, q1, 0x31));
  _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(q2, q3, 0x31));
}

// How far ahead along each row of B the packer asks for lines (bytes). It reads 32 bytes of
// each of 16 rows per panel, so its row streams advance slowly and each first touch of a line
// waited on L2 or L3: with the lines of 256 bytes on requested, the plain call's packing of B
// cost 3.2% of an int8 1024^3 product instead of 5.8% (the gap to the packed-B call, 3 runs
// of 40 samples each with an OpenBLAS call between samples; 128 bytes: 3.8%).
constexpr long k_b_prefetch_bytes = 256;

// Rows [0, kc) x columns [0, nc) of b as quads, rows past kc (up to `depth`) zero.
template <bool Bias, typename Out>
inline __attribute__((always_inline)) void pack_quads(int kc, int nc, const int8_t* b, long ldb,
                                                      Out* dst, int depth) {
  __mmask32 m = nc >= 32 ? ~0u : (1u << nc) - 1u;
  auto row = [&](int p) {
    if (p >= kc) {
      return _mm256_setzero_si256();
    }
    _mm_prefetch(reinterpret_cast<const char*>(b + p * ldb) + k_b_prefetch_bytes, _MM_HINT_T0);
    return _mm256_maskz_loadu_epi8(m, b + p * ldb);
  };
  for (int p = 0; p < depth; p += 4, dst += 4 * k_wide_nr) {
    store_quads<Bias>(row(p), row(p + 1), row(p + 2), row(p + 3), dst);
  }
}

void pack_b_s8(int kc, int nc, const int8_t* b, long ldb, uint8_t* dst) {
  pack_quads<true>(kc, nc, b, ldb, dst, kc);
}

} // namespace

void avx512::pack_b_s8_unbiased(int kc, int nc, const int8_t* b, long ldb, int8_t* dst, int depth) {
  pack_quads<false>(kc, nc, b, ldb, dst, depth);
}

const WideKernels<Avx512S8>* avx512_s8_kernels() {
  static const WideKernels<Avx512S8> k_table = {kernel_s8, pack_a_s8, pack_b_s8, nullptr};
  return &k_table;
}

} // namespace tpuctl::kernels::detail

#else // a build without x86-64 AVX-512 code

namespace tpuctl::kernels::detail {
const WideKernels<Avx512S8>* avx512_s8_kernels() {
  return nullptr;
}
void avx512::pack_b_s8_unbiased(int, int, const int8_t*, long, int8_t*, int) {}
} // namespace tpuctl::kernels::detail

#endif
