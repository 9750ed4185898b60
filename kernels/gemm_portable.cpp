// Portable micro-kernels and packing routines: plain C++ over the packed layouts described in
// gemm_kernels.hpp. They run when the CPU lacks AVX2+FMA (or when a caller forces them), and
// they are the packing routines the AVX2 table reuses where the AVX2 versions would not gain.
//
// The fp32 kernel multiplies and adds separately (the build uses ISO C++ mode, so the compiler
// does not contract them into FMAs); either way each element is a sum of exact-or-rounded
// products in some order, which is all gate 1 of kernels.md 6.3 assumes. The int8 kernel adds
// in uint32_t so that a wrap past INT32_MAX is defined behaviour and equals the two's-complement
// wrap of the AVX2 vpaddd path and of reference_gemm_s8.
#include <cstring>

#include "kernels/gemm_kernels.hpp"

namespace tpuctl::kernels::detail {

namespace {

void kernel_f32(int kc, const float* a, const float* b, float* c, long ldc, bool accumulate) {
  float acc[k_mr][k_nr] = {};
  for (int p = 0; p < kc; ++p) {
    const float* ap = a + static_cast<long>(p) * k_mr;
    const float* bp = b + static_cast<long>(p) * k_nr;
    for (int i = 0; i < k_mr; ++i) {
      float ai = ap[i];
      for (int j = 0; j < k_nr; ++j) {
        acc[i][j] += ai * bp[j];
      }
    }
  }
  for (int i = 0; i < k_mr; ++i) {
    float* ci = c + i * ldc;
    for (int j = 0; j < k_nr; ++j) {
      ci[j] = accumulate ? ci[j] + acc[i][j] : acc[i][j];
    }
  }
}

int32_t wrap_add(int32_t x, int32_t y) {
  return static_cast<int32_t>(static_cast<uint32_t>(x) + static_cast<uint32_t>(y));
}

void kernel_s8(int pairs, const int32_t* a, const int16_t* b, int32_t* c, long ldc,
               bool accumulate) {
  uint32_t acc[k_mr][k_nr] = {};
  for (int q = 0; q < pairs; ++q) {
    const int32_t* ap = a + static_cast<long>(q) * k_mr;
    const int16_t* bp = b + static_cast<long>(q) * 2 * k_nr;
    for (int i = 0; i < k_mr; ++i) {
      uint32_t word = static_cast<uint32_t>(ap[i]);
      int32_t lo = static_cast<int16_t>(word & 0xffffu);
      int32_t hi = static_cast<int16_t>(word >> 16);
      for (int j = 0; j < k_nr; ++j) {
        // |lo * b0 + hi * b1| <= 2 * 128 * 128: exact in int32, as vpmaddwd is.
        int32_t pair = lo * bp[2 * j] + hi * bp[2 * j + 1];
        acc[i][j] += static_cast<uint32_t>(pair);
      }
    }
  }
  for (int i = 0; i < k_mr; ++i) {
    int32_t* ci = c + i * ldc;
    for (int j = 0; j < k_nr; ++j) {
      int32_t v = static_cast<int32_t>(acc[i][j]);
      ci[j] = accumulate ? wrap_add(ci[j], v) : v;
    }
  }
}

template <typename T, typename Out, typename Convert>
void pack_a_fp(int mc, int kc, const T* a, long lda, Out* dst, Convert convert) {
  for (int i0 = 0; i0 < mc; i0 += k_mr) {
    int rows = mc - i0 < k_mr ? mc - i0 : k_mr;
    const T* r[k_mr];
    for (int i = 0; i < k_mr; ++i) {
      r[i] = a + static_cast<long>(i0 + (i < rows ? i : 0)) * lda;
    }
    for (int p = 0; p < kc; ++p) {
      for (int i = 0; i < k_mr; ++i) {
        dst[i] = i < rows ? convert(r[i][p]) : Out{};
      }
      dst += k_mr;
    }
  }
}

void pack_a_f32(int mc, int kc, const float* a, long lda, float* dst) {
  pack_a_fp(mc, kc, a, lda, dst, [](float v) { return v; });
}

void pack_a_bf16(int mc, int kc, const bf16_t* a, long lda, float* dst) {
  pack_a_fp(mc, kc, a, lda, dst, [](bf16_t v) { return bf16_to_fp32(v); });
}

void pack_a_s8(int mc, int kc, const int8_t* a, long lda, int32_t* dst) {
  int pairs = (kc + 1) / 2;
  for (int i0 = 0; i0 < mc; i0 += k_mr) {
    int rows = mc - i0 < k_mr ? mc - i0 : k_mr;
    for (int q = 0; q < pairs; ++q) {
      for (int i = 0; i < k_mr; ++i) {
        uint32_t word = 0;
        if (i < rows) {
          const int8_t* row = a + static_cast<long>(i0 + i) * lda;
          int p = 2 * q;
          uint32_t lo = static_cast<uint16_t>(static_cast<int16_t>(row[p]));
          uint32_t hi = p + 1 < kc ? static_cast<uint16_t>(static_cast<int16_t>(row[p + 1])) : 0u;
          word = lo | (hi << 16);
        }
        dst[i] = static_cast<int32_t>(word);
      }
      dst += k_mr;
    }
  }
}

template <typename T, typename Out, typename Convert>
void pack_b_fp(int kc, int nc, const T* b, long ldb, Out* dst, Convert convert) {
  for (int p = 0; p < kc; ++p) {
    const T* row = b + static_cast<long>(p) * ldb;
    for (int j = 0; j < k_nr; ++j) {
      dst[j] = j < nc ? convert(row[j]) : Out{};
    }
    dst += k_nr;
  }
}

void pack_b_f32(int kc, int nc, const float* b, long ldb, float* dst) {
  if (nc == k_nr) {
    for (int p = 0; p < kc; ++p) {
      std::memcpy(dst + static_cast<long>(p) * k_nr, b + static_cast<long>(p) * ldb,
                  sizeof(float) * k_nr);
    }
    return;
  }
  pack_b_fp(kc, nc, b, ldb, dst, [](float v) { return v; });
}

void pack_b_bf16(int kc, int nc, const bf16_t* b, long ldb, float* dst) {
  pack_b_fp(kc, nc, b, ldb, dst, [](bf16_t v) { return bf16_to_fp32(v); });
}

void pack_b_s8(int kc, int nc, const int8_t* b, long ldb, int16_t* dst) {
  int pairs = (kc + 1) / 2;
  for (int q = 0; q < pairs; ++q) {
    const int8_t* r0 = b + static_cast<long>(2 * q) * ldb;
    const int8_t* r1 = 2 * q + 1 < kc ? r0 + ldb : nullptr;
    for (int j = 0; j < k_nr; ++j) {
      dst[2 * j] = j < nc ? r0[j] : int16_t{0};
      dst[2 * j + 1] = j < nc && r1 ? r1[j] : int16_t{0};
    }
    dst += 2 * k_nr;
  }
}

} // namespace

const MicroKernels& portable_micro_kernels() {
  // No direct-B kernels: the portable family always packs B.
  static const MicroKernels k_table = {.f32 = kernel_f32,
                                       .s8 = kernel_s8,
                                       .pack_a_f32 = pack_a_f32,
                                       .pack_a_bf16 = pack_a_bf16,
                                       .pack_a_s8 = pack_a_s8,
                                       .pack_b_f32 = pack_b_f32,
                                       .pack_b_bf16 = pack_b_bf16,
                                       .pack_b_s8 = pack_b_s8,
                                       .f32_direct = nullptr,
                                       .bf16_direct = nullptr,
                                       .s8_direct = nullptr,
                                       .f32_narrow = nullptr,
                                       .s8_narrow = nullptr,
                                       .f32_quarter = nullptr,
                                       .s8_quarter = nullptr,
                                       .f32_short = nullptr,
                                       .s8_short = nullptr,
                                       .f32_columns = nullptr,
                                       .s8_columns = nullptr};
  return k_table;
}

} // namespace tpuctl::kernels::detail
