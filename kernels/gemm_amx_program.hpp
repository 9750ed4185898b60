// Internal to the AMX files: the tile program of the AMX kernels, written once over a `Tiles`
// type that is either the hardware (gemm_amx.cpp: the intrinsics, built with -mamx-*) or the
// plain C++ model of the tile instructions (gemm_amx_model.cpp, any host). Only the binding
// of the few instructions differs; the configuration, the blocking, the operand addresses and
// the epilogue below are the same code in both, so tests of the model check all of it.
//
// Blocking (amx.md section 3). An AMX tile block is 32 x 32 of C in tmm0-tmm3 (rows 0-15 /
// 16-31 x columns 0-15 / 16-31), A rows 0-15 and 16-31 in tmm4/tmm5 (16 rows x 64 bytes: 64
// int8 or 32 bf16 of k), B columns 0-15 and 16-31 in tmm6/tmm7 (16 rows of the VNNI layout:
// 64 int8 or 32 bf16 of k x 16 columns). Per k step the program loads the four operand tiles and
// issues (0,4,6) (1,4,7) (2,5,6) (3,5,7): 4 x 16 x 16 x 64 = 65536 int8 MACs (32768 bf16) for
// 4 KiB of loads. The packed depth is a whole number of steps (gemm_wide.hpp: AMX paths pad k
// to 64 bytes), so one configuration serves every call. After k the C tiles are stored to a
// 32 x 32 scratch block and the epilogue adds the valid part into C.
//
// Everything here has internal linkage (an anonymous namespace in a header): each AMX file gets
// its own copy, so the AMX-compiled one can never stand in for the model's.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/gemm_wide.hpp"

namespace tpuctl::kernels::detail::amx {

// The 64-byte operand of LDTILECFG (amx.md section 3), palette 1.
struct alignas(64) TileConfig {
  uint8_t palette = 0;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// The packers of the AMX paths (gemm_amx_pack.cpp), the same on hardware and model: A row
// panels of 32 rows (raw int8 / bf16), B in the VNNI layout of gemm_wide.hpp without a bias
// (tdpbssd multiplies signed by signed), both zero-padded to whole 64-byte k steps.
void pack_a_s8(int mc, int kc, const int8_t* a, long lda, int8_t* dst);
void pack_b_s8(int kc, int nc, const int8_t* b, long ldb, int8_t* dst);
void pack_a_bf16(int mc, int kc, const bf16_t* a, long lda, bf16_t* dst);
void pack_b_bf16(int kc, int nc, const bf16_t* b, long ldb, bf16_t* dst);
// The plain loops pack_b_* fall back to without AVX-512 (the same bytes).
void pack_b_s8_portable(int kc, int nc, const int8_t* b, long ldb, int8_t* dst);
void pack_b_bf16_portable(int kc, int nc, const bf16_t* b, long ldb, bf16_t* dst);

namespace {

constexpr int k_tile_rows = 16;
constexpr int k_tile_bytes = 64;
constexpr long k_b_row_bytes = 4L * k_wide_nr; // one k group of a B panel: 32 columns x 4 bytes
constexpr long k_c_row_bytes = 4L * k_wide_nr; // one row of the 32 x 32 scratch block

// Eight tiles of 16 rows x 64 bytes (the whole palette; amx.md section 3).
inline TileConfig full_config() {
  TileConfig cfg;
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = k_tile_bytes;
    cfg.rows[t] = k_tile_rows;
  }
  return cfg;
}

// C (rows x nc) = (accumulate ? C : 0) + block, block being 32 x 32 with rows 128 bytes apart.
template <typename C, typename Add>
void add_block(const C* block, C* c, long ldc, bool accumulate, int rows, int nc, Add add) {
  for (int i = 0; i < rows; ++i) {
    C* row = c + i * ldc;
    const C* in = block + i * k_wide_nr;
    for (int j = 0; j < nc; ++j) {
      row[j] = accumulate ? add(row[j], in[j]) : in[j];
    }
  }
}

// The tile program on one packed A panel (32 rows) and one packed B panel (32 columns) over
// the k-block's packed depth. `Dot` issues the multiply of the dtype: dot.template run<C, A,
// B>(tiles).
template <typename Tiles, typename Dot, typename C>
void tile_block(Tiles& t, Dot dot, int steps, const char* a, const char* b, C* block) {
  t.configure(full_config());
  t.template zero<0>();
  t.template zero<1>();
  t.template zero<2>();
  t.template zero<3>();
  for (int s = 0; s < steps; ++s) {
    const char* as = a + s * k_tile_bytes;
    const char* bs = b + s * k_tile_rows * k_b_row_bytes;
    t.template load<4>(as, k_wide_row_stride);
    t.template load<5>(as + k_tile_rows * k_wide_row_stride, k_wide_row_stride);
    t.template load<6>(bs, k_b_row_bytes);
    t.template load<7>(bs + k_tile_bytes, k_b_row_bytes);
    dot.template run<0, 4, 6>(t);
    dot.template run<1, 4, 7>(t);
    dot.template run<2, 5, 6>(t);
    dot.template run<3, 5, 7>(t);
  }
  t.template store<0>(block, k_c_row_bytes);
  t.template store<1>(block + 16, k_c_row_bytes);
  t.template store<2>(block + 16 * k_wide_nr, k_c_row_bytes);
  t.template store<3>(block + 16 * k_wide_nr + 16, k_c_row_bytes);
  t.release();
}

struct DotS8 {
  template <int C, int A, int B, typename Tiles>
  void run(Tiles& t) {
    t.template dpbssd<C, A, B>();
  }
};

struct DotBf16 {
  template <int C, int A, int B, typename Tiles>
  void run(Tiles& t) {
    t.template dpbf16ps<C, A, B>();
  }
};

// The kernel of path G (AmxS8 or AmxBf16, gemm_wide.hpp) on `Tiles`, for its WideKernels table.
template <typename Tiles, typename G, typename Dot>
void kernel(int kc, const typename G::PackA* a, const typename G::PackB* b, typename G::C* c,
            long ldc, bool accumulate, int rows, int nc) {
  using C = typename G::C;
  Tiles t;
  alignas(64) C block[k_amx_mr * k_wide_nr];
  tile_block(t, Dot{}, (kc + G::pad - 1) / G::pad, reinterpret_cast<const char*>(a),
             reinterpret_cast<const char*>(b), block);
  add_block(block, c, ldc, accumulate, rows, nc, [](C x, C y) {
    if constexpr (std::is_integral_v<C>) { // int32: wrap-around
      return static_cast<C>(static_cast<uint32_t>(x) + static_cast<uint32_t>(y));
    } else {
      return x + y;
    }
  });
}

} // namespace

} // namespace tpuctl::kernels::detail::amx
