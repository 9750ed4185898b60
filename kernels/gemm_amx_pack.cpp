// The AMX packers (gemm_amx_program.hpp), shared by the hardware and the model tables, so the
// layout the model is tested on is the one the tiles read. A panels are rows as stored,
// k_wide_row_stride bytes apart; B panels the VNNI layout of gemm_wide.hpp (int8 quads and
// bf16 pairs of k per column), without a bias. Both are zero past k and past the valid rows
// and columns, up to whole 64-byte k steps: zeros add nothing to a dot product. B is packed by
// the AVX-512 packers of the VNNI and BF16 paths where the CPU has them (every AMX CPU does: a
// byte loop packed 2048 x 2048 int8 at 0.7-2.8 GB/s here, a quarter of an AMX GEMM's time),
// else by the plain loops below (pack_b_*_portable), which tests hold to the same bytes.
#include <cstring>

#include "kernels/cpu_features.hpp"
#include "kernels/gemm_amx_program.hpp"

namespace tpuctl::kernels::detail::amx {

namespace {

// Rows [0, mc) x [0, kc) of `a` (elements of type T) into 32-row panels, each row zero-padded
// to `pad` elements.
template <typename T>
void pack_a_rows(int mc, int kc, const T* a, long lda, T* dst, int pad, size_t panel_bytes) {
  const size_t row_bytes = static_cast<size_t>((kc + pad - 1) / pad * pad) * sizeof(T);
  char* out = reinterpret_cast<char*>(dst);
  for (int i0 = 0; i0 < mc; i0 += k_amx_mr, out += panel_bytes) {
    for (int i = 0; i < k_amx_mr; ++i) {
      char* row = out + static_cast<long>(i) * k_wide_row_stride;
      std::memset(row, 0, row_bytes);
      if (i0 + i < mc) {
        std::memcpy(row, a + (i0 + i) * lda, static_cast<size_t>(kc) * sizeof(T));
      }
    }
  }
}

// Rows [0, kc) x columns [0, nc) of `b` in groups of G k values: dst[(p / G) * 32 G + j G +
// p % G] = b(p, j), zero up to `pad` rows and 32 columns.
template <int G, typename T>
void pack_b_groups(int kc, int nc, const T* b, long ldb, T* dst, int pad) {
  const int depth = (kc + pad - 1) / pad * pad;
  for (int p = 0; p < depth; ++p) {
    T* group = dst + static_cast<long>(p / G) * G * k_wide_nr + p % G;
    for (int j = 0; j < k_wide_nr; ++j) {
      group[j * G] = p < kc && j < nc ? b[p * ldb + j] : T{};
    }
  }
}

} // namespace

void pack_a_s8(int mc, int kc, const int8_t* a, long lda, int8_t* dst) {
  pack_a_rows(mc, kc, a, lda, dst, AmxS8::pad, AmxS8::a_panel_bytes);
}

void pack_b_s8_portable(int kc, int nc, const int8_t* b, long ldb, int8_t* dst) {
  pack_b_groups<4>(kc, nc, b, ldb, dst, AmxS8::pad);
}

void pack_b_s8(int kc, int nc, const int8_t* b, long ldb, int8_t* dst) {
  if (cpu_features().avx512_vnni) {
    avx512::pack_b_s8_unbiased(kc, nc, b, ldb, dst,
                               (kc + AmxS8::pad - 1) / AmxS8::pad * AmxS8::pad);
    return;
  }
  pack_b_s8_portable(kc, nc, b, ldb, dst);
}

void pack_a_bf16(int mc, int kc, const bf16_t* a, long lda, bf16_t* dst) {
  pack_a_rows(mc, kc, a, lda, dst, AmxBf16::pad, AmxBf16::a_panel_bytes);
}

void pack_b_bf16_portable(int kc, int nc, const bf16_t* b, long ldb, bf16_t* dst) {
  pack_b_groups<2>(kc, nc, b, ldb, dst, AmxBf16::pad);
}

void pack_b_bf16(int kc, int nc, const bf16_t* b, long ldb, bf16_t* dst) {
  if (cpu_features().avx512_bf16) {
    avx512::pack_b_bf16_pairs(kc, nc, b, ldb, dst,
                              (kc + AmxBf16::pad - 1) / AmxBf16::pad * AmxBf16::pad);
    return;
  }
  pack_b_bf16_portable(kc, nc, b, ldb, dst);
}

} // namespace tpuctl::kernels::detail::amx
