// Internal to the AVX2 files (gemm_avx2*.cpp, each compiled with -mavx2 -mfma): the small
// store helpers they share (internal linkage: an anonymous namespace, so every file has its own
// copy and no AVX2-compiled COMDAT function can reach baseline code) and the kernels and
// packers defined in one file and put into the table in gemm_avx2.cpp.
#pragma once

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

inline __attribute__((always_inline)) void store_s32(int32_t* c, __m256i v, bool accumulate) {
  __m256i* p = reinterpret_cast<__m256i*>(c);
  if (accumulate) {
    v = _mm256_add_epi32(v, _mm256_loadu_si256(p));
  }
  _mm256_storeu_si256(p, v);
}

} // namespace

namespace avx2 {

// Edge kernels (gemm_avx2_edge.cpp): see MicroKernels in gemm_kernels.hpp.
void kernel_f32_narrow(int kc, const float* a, const float* b, float* c, long ldc, bool accumulate);
void kernel_s8_narrow(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
                      bool accumulate);
void kernel_f32_quarter(int kc, const float* a, const float* b, float* c, long ldc,
                        bool accumulate);
void kernel_s8_quarter(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
                       bool accumulate);
void kernel_f32_short(int kc, const float* a, const float* b, float* c, long ldc, bool accumulate);
void kernel_s8_short(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
                     bool accumulate);
void kernel_f32_columns(int kc, const float* a, const float* b, float* c, long ldc, bool accumulate,
                        int nc);
void kernel_s8_columns(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
                       bool accumulate, int nc);

// Packers (gemm_avx2_pack.cpp): see the Pack* types in gemm_kernels.hpp.
void pack_a_f32(int mc, int kc, const float* a, long lda, float* dst);
void pack_a_bf16(int mc, int kc, const bf16_t* a, long lda, float* dst);
void pack_a_s8(int mc, int kc, const int8_t* a, long lda, int32_t* dst);
void pack_b_f32(int kc, int nc, const float* b, long ldb, float* dst);
void pack_b_bf16(int kc, int nc, const bf16_t* b, long ldb, float* dst);
void pack_b_s8(int kc, int nc, const int8_t* b, long ldb, int16_t* dst);

} // namespace avx2

} // namespace tpuctl::kernels::detail

#endif
