// AVX-512 fp32 kernels (this file alone is compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512dq; gemm.cpp reaches it only when cpu_features() has AVX-512): fp32, and bf16 widened
// to fp32 while packing.
//
// The tile is 12 x 32 (gemm_wide.hpp): 24 zmm accumulators. Per k step the kernel loads one
// 32-wide row of the B panel (two zmm) and issues 24 vfmadd231ps, each with one A value
// broadcast from the packed A panel as its memory operand ({1to16}): 24 FMAs against 2 loads and
// 12 broadcast loads, inside the two 512-bit FMA pipes and the load ports of Zen 4/5 and of
// Intel's server cores, and the 24 independent chains cover the FMA latency (4 cycles x 2
// pipes = 8 needed). The rows of an A panel are k_wide_row_stride bytes apart, so the 12
// broadcasts of a step are constant displacements from one pointer.
#include "kernels/gemm_avx512.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

namespace tpuctl::kernels::detail {

namespace {

using namespace avx512;

constexpr long k_row_floats = k_wide_row_stride / 4;

// The tile over A's 12 rows `stride` floats apart: a packed panel (a constant stride, so the 12
// broadcasts are displacements from one pointer), or whole rows of the caller's A where they
// are (fp32 needs no conversion, so whole panels skip the packing pass: 6-10% at 1024^3 to
// 4096^3).
inline __attribute__((always_inline)) void f32_tile(int kc, const float* a, long stride,
                                                    const float* b, float* c, long ldc,
                                                    bool accumulate, int rows, int nc) {
  __m512 acc[k_mr][2];
  zero(acc, _mm512_setzero_ps());
  prefetch_tile(c, ldc, rows);
  const long panel_bytes = 4L * kc * k_wide_nr;
#pragma GCC unroll 2
  for (int p = 0; p < kc; ++p) {
    prefetch_next_panel(b, panel_bytes);
    __m512 b0 = _mm512_loadu_ps(b);
    __m512 b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 12
    for (int i = 0; i < k_mr; ++i) {
      __m512 av = _mm512_set1_ps(a[i * stride + p]);
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
    }
    b += k_wide_nr;
  }
  store_tile(acc, c, ldc, accumulate, rows, nc);
}

void kernel_f32(int kc, const float* a, const float* b, float* c, long ldc, bool accumulate,
                int rows, int nc) {
  f32_tile(kc, a, k_row_floats, b, c, ldc, accumulate, rows, nc);
}

void kernel_f32_rows(int kc, const float* a, long lda, const float* b, float* c, long ldc,
                     bool accumulate, int nc) {
  f32_tile(kc, a, lda, b, c, ldc, accumulate, k_mr, nc);
}

void pack_a_f32(int mc, int kc, const float* a, long lda, float* dst) {
  pack_a_as_stored<Avx512F32>(mc, kc, a, lda, dst);
}

// 16 bf16 (32 bytes, the first `count` of them) widened to 16 fp32.
inline __attribute__((always_inline)) __m512 widen16(const bf16_t* p, int count) {
  __mmask16 m = count >= 16 ? 0xffff : static_cast<__mmask16>((1u << count) - 1u);
  __m256i raw = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}

void pack_a_bf16_widened(int mc, int kc, const bf16_t* a, long lda, float* dst) {
  for_panel_rows(
      mc, reinterpret_cast<char*>(dst), Avx512Bf16Widened::a_panel_bytes,
      [&](int r) { return reinterpret_cast<const char*>(a + r * lda); },
      [&](const char* in, char* out, int, char*) {
        if (!in) {
          return;
        }
        const auto* row = reinterpret_cast<const bf16_t*>(in);
        auto* o = reinterpret_cast<float*>(out);
        for (int p = 0; p < kc; p += 16) {
          _mm512_storeu_ps(o + p, widen16(row + p, kc - p));
        }
      });
}

void pack_b_f32(int kc, int nc, const float* b, long ldb, float* dst) {
  __mmask16 m0 = half_mask(nc, 0), m1 = half_mask(nc, 1);
  for (int p = 0; p < kc; ++p, b += ldb, dst += k_wide_nr) {
    _mm512_storeu_ps(dst, _mm512_maskz_loadu_ps(m0, b));
    _mm512_storeu_ps(dst + 16, _mm512_maskz_loadu_ps(m1, b + 16));
  }
}

void pack_b_bf16_widened(int kc, int nc, const bf16_t* b, long ldb, float* dst) {
  int n0 = nc < 16 ? nc : 16, n1 = nc - n0;
  for (int p = 0; p < kc; ++p, b += ldb, dst += k_wide_nr) {
    _mm512_storeu_ps(dst, widen16(b, n0));
    _mm512_storeu_ps(dst + 16, n1 > 0 ? widen16(b + 16, n1) : _mm512_setzero_ps());
  }
}

} // namespace

const WideKernels<Avx512F32>* avx512_f32_kernels() {
  static const WideKernels<Avx512F32> k_table = {kernel_f32, pack_a_f32, pack_b_f32,
                                                 kernel_f32_rows};
  return &k_table;
}

const WideKernels<Avx512Bf16Widened>* avx512_bf16_widened_kernels() {
  static const WideKernels<Avx512Bf16Widened> k_table = {kernel_f32, pack_a_bf16_widened,
                                                         pack_b_bf16_widened, nullptr};
  return &k_table;
}

} // namespace tpuctl::kernels::detail

#else // a build without x86-64 AVX-512 code

namespace tpuctl::kernels::detail {
const WideKernels<Avx512F32>* avx512_f32_kernels() {
  return nullptr;
}
const WideKernels<Avx512Bf16Widened>* avx512_bf16_widened_kernels() {
  return nullptr;
}
} // namespace tpuctl::kernels::detail

#endif
