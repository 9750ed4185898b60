// The C++ model of the AMX tile instructions (kernels/gemm_amx_model.hpp) against the SDM's
// definitions as amx.md states them: what it computes (TDPBSSD's signed bytes and int32 wrap,
// TDPBF16PS's two partial sums with DAZ/FTZ), and that it refuses what the hardware refuses.
// The AMX GEMM paths are tested on this model in test_gemm_paths.cpp; here is the model itself.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "kernels/cpu_features.hpp"
#include "kernels/gemm_amx_model.hpp"
#include "kernels/gemm_wide.hpp"

using namespace tpuctl::kernels;
using detail::amx::TileConfig;
using detail::amx::TileModel;

TEST_SUITE_BEGIN("kernels");

namespace {

// C (tile 0) rows x n int32, A (tile 4) rows x 4q bytes, B (tile 6) q x 4n bytes.
TileConfig config(int rows, int n, int q) {
  TileConfig cfg;
  cfg.palette = 1;
  cfg.rows[0] = static_cast<uint8_t>(rows);
  cfg.colsb[0] = static_cast<uint16_t>(4 * n);
  cfg.rows[4] = static_cast<uint8_t>(rows);
  cfg.colsb[4] = static_cast<uint16_t>(4 * q);
  cfg.rows[6] = static_cast<uint8_t>(q);
  cfg.colsb[6] = static_cast<uint16_t>(4 * n);
  return cfg;
}

float bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

} // namespace

TEST_CASE("kernels: the tile model's TDPBSSD sums signed byte products and wraps like int32") {
  const long faults = detail::amx_model_faults();
  TileModel t;
  t.configure(config(2, 2, 2)); // C 2 x 2, k = 8
  // A rows: [-128 x 8] and [1, 2, ..., 8]; B (VNNI: row q holds 4 k values of each column):
  // column 0 all -128, column 1 all 1.
  int8_t a[2][8];
  int8_t b[2][8];
  for (int p = 0; p < 8; ++p) {
    a[0][p] = -128;
    a[1][p] = static_cast<int8_t>(p + 1);
  }
  for (int q = 0; q < 2; ++q) {
    for (int i = 0; i < 4; ++i) {
      b[q][0 * 4 + i] = -128;
      b[q][1 * 4 + i] = 1;
    }
  }
  int32_t c[2][2] = {{std::numeric_limits<int32_t>::max(), 0}, {5, -5}};
  t.load<0>(c, sizeof c[0]);
  t.load<4>(a, sizeof a[0]);
  t.load<6>(b, sizeof b[0]);
  t.dpbssd<0, 4, 6>();
  t.store<0>(c, sizeof c[0]);
  // INT32_MAX + 8 x 16384 wraps; the other sums are exact.
  CHECK(c[0][0] == static_cast<int32_t>(0x7fffffffu + 8u * 16384u));
  CHECK(c[0][1] == -8 * 128);
  CHECK(c[1][0] == 5 - 128 * 36);
  CHECK(c[1][1] == -5 + 36);
  CHECK(detail::amx_model_faults() == faults);
}

TEST_CASE("kernels: the tile model's TDPBF16PS adds even and odd partial sums, then C") {
  TileModel t;
  t.configure(config(1, 1, 2)); // one output, two bf16 pairs (k = 4)
  const bf16_t two25 = fp32_to_bf16(std::ldexp(1.0f, 25)), one = fp32_to_bf16(1.0f);
  const bf16_t neg25 = fp32_to_bf16(-std::ldexp(1.0f, 25)), zero = 0;
  SUBCASE("the partial sums cancel before C is added, so C's 1 survives") {
    // even members: 2^25 x 1 and 0; odd members: -2^25 x 1 and 0. Added to C one product at a
    // time, 1 + 2^25 would round to 2^25 and the result would be 0.
    bf16_t a[4] = {two25, neg25, zero, zero};
    bf16_t b[2][2] = {{one, one}, {one, one}};
    float c = 1.0f;
    t.load<0>(&c, 4);
    t.load<4>(a, 8);
    t.load<6>(b, 4);
    t.dpbf16ps<0, 4, 6>();
    t.store<0>(&c, 4);
    CHECK(c == 1.0f);
  }
  SUBCASE("subnormal inputs count as zero and subnormal results flush to zero") {
    bf16_t a[4] = {0x0001, fp32_to_bf16(std::ldexp(1.0f, -70)), zero, zero};
    bf16_t b[2][2] = {{fp32_to_bf16(std::ldexp(1.0f, 100)), fp32_to_bf16(std::ldexp(1.0f, -60))},
                      {zero, zero}};
    float c = 0.0f;
    t.load<0>(&c, 4);
    t.load<4>(a, 8);
    t.load<6>(b, 4);
    t.dpbf16ps<0, 4, 6>();
    t.store<0>(&c, 4);
    // 2^-133 (subnormal bf16) x 2^100 would be 2^-33 with IEEE; 2^-70 x 2^-60 = 2^-130 is a
    // subnormal product: both become 0.
    CHECK(c == 0.0f);
    CHECK(!std::signbit(c));
  }
  SUBCASE("a NaN input gives NaN, as IEEE arithmetic does") {
    bf16_t a[4] = {0x7fc0, one, zero, zero};
    bf16_t b[2][2] = {{one, one}, {zero, zero}};
    float c = bits(0x3f800000u);
    t.load<0>(&c, 4);
    t.load<4>(a, 8);
    t.load<6>(b, 4);
    t.dpbf16ps<0, 4, 6>();
    t.store<0>(&c, 4);
    CHECK(std::isnan(c));
  }
}

TEST_CASE("kernels: the tile model refuses what the hardware refuses, and changes nothing") {
  TileModel t;
  SUBCASE("a configuration with a tile over 16 rows or 64 bytes, or palette 0") {
    for (int bad = 0; bad < 3; ++bad) {
      TileConfig cfg = config(2, 2, 2);
      if (bad == 0) {
        cfg.rows[0] = 17;
      } else if (bad == 1) {
        cfg.colsb[4] = 68;
      } else {
        cfg.palette = 0;
      }
      const long faults = detail::amx_model_faults();
      t.configure(cfg);
      CHECK(detail::amx_model_faults() == faults + 1);
    }
  }
  SUBCASE("operand shapes that do not chain: colsb(A) / 4 != rows(B), rows(C) != rows(A)") {
    int32_t c[2][2] = {{7, 7}, {7, 7}};
    for (int bad = 0; bad < 2; ++bad) {
      TileConfig cfg = config(2, 2, 2);
      if (bad == 0) {
        cfg.rows[6] = 3;
      } else {
        cfg.rows[4] = 1;
      }
      t.configure(cfg);
      t.load<0>(c, sizeof c[0]);
      const long faults = detail::amx_model_faults();
      t.dpbssd<0, 4, 6>();
      CHECK(detail::amx_model_faults() == faults + 1);
      int32_t out[2][2] = {};
      t.store<0>(out, sizeof out[0]);
      CHECK(out[1][1] == 7);
    }
  }
}

TEST_CASE("kernels: the AMX B packers write the plain loops' bytes on ragged panels") {
  // Where the CPU has AVX-512, the AMX paths pack B with the VNNI and BF16 paths' packers; the
  // tile model's tests then cover those, and this holds them to the plain loops a host without
  // AVX-512 uses (and which define the layout): every byte, the zero padding included.
  if (!cpu_features().avx512_vnni || !cpu_features().avx512_bf16) {
    MESSAGE("no AVX-512 VNNI and BF16 here: the AMX packers are the plain loops themselves");
    return;
  }
  std::mt19937 rng(1906);
  std::uniform_int_distribution<int> byte(-128, 127);
  for (int kc : {1, 3, 4, 31, 33, 63, 64, 65, 130}) {
    for (int nc : {1, 15, 16, 17, 31, 32}) {
      CAPTURE(kc);
      CAPTURE(nc);
      const int ldb = nc + 3;
      std::vector<int8_t> b8(static_cast<size_t>(kc * ldb));
      std::vector<bf16_t> bh(b8.size());
      for (size_t i = 0; i < b8.size(); ++i) {
        b8[i] = static_cast<int8_t>(byte(rng));
        bh[i] = fp32_to_bf16(static_cast<float>(byte(rng)) / 7.0f);
      }
      const size_t s8_bytes = static_cast<size_t>((kc + 63) / 64 * 64) * detail::k_wide_nr;
      std::vector<int8_t> fast(s8_bytes, 1), plain(s8_bytes, 2);
      detail::amx::pack_b_s8(kc, nc, b8.data(), ldb, fast.data());
      detail::amx::pack_b_s8_portable(kc, nc, b8.data(), ldb, plain.data());
      CHECK(fast == plain);
      const size_t bf16_elems = static_cast<size_t>((kc + 31) / 32 * 32) * detail::k_wide_nr;
      std::vector<bf16_t> hfast(bf16_elems, 1), hplain(bf16_elems, 2);
      detail::amx::pack_b_bf16(kc, nc, bh.data(), ldb, hfast.data());
      detail::amx::pack_b_bf16_portable(kc, nc, bh.data(), ldb, hplain.data());
      CHECK(hfast == hplain);
    }
  }
}

TEST_SUITE_END();
