// The seeded operands of spmd-matmul and Freivalds' check of the gathered product.
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include <doctest/doctest.h>

#include "agent/seeded_matrix.hpp"
#include "kernels/gemm.hpp"
#include "kernels/reference_gemm.hpp"

using namespace tpuctl::agent;
namespace kernels = tpuctl::kernels;

TEST_SUITE_BEGIN("agent");

TEST_CASE("agent::fill_block: any shard equals the same region of the whole matrix") {
  const int rows = 37, cols = 53;
  const uint64_t seed = 42;
  std::vector<int8_t> whole(rows * cols);
  fill_block_s8(seed, MatrixId::a, 0, 0, rows, cols, whole.data());
  // A shard drawn on its own, as another process would.
  const int r0 = 11, c0 = 29, sr = 9, sc = 17;
  std::vector<int8_t> shard(sr * sc);
  fill_block_s8(seed, MatrixId::a, r0, c0, sr, sc, shard.data());
  for (int i = 0; i < sr; ++i) {
    for (int j = 0; j < sc; ++j) {
      CHECK(shard[i * sc + j] == whole[(r0 + i) * cols + c0 + j]);
      CHECK(shard[i * sc + j] == s8_element(seed, MatrixId::a, r0 + i, c0 + j));
    }
  }
  std::vector<float> f(sr * sc);
  std::vector<kernels::bf16_t> h(sr * sc);
  fill_block_f32(seed, MatrixId::b, r0, c0, sr, sc, f.data());
  fill_block_bf16(seed, MatrixId::b, r0, c0, sr, sc, h.data());
  CHECK(f[5 * sc + 3] == f32_element(seed, MatrixId::b, r0 + 5, c0 + 3));
  CHECK(h[5 * sc + 3] == bf16_element(seed, MatrixId::b, r0 + 5, c0 + 3));
  CHECK(h[5 * sc + 3] == kernels::fp32_to_bf16(f[5 * sc + 3]));
}

TEST_CASE("agent::element_hash depends on the seed, the matrix and both coordinates") {
  uint64_t base = element_hash(1, MatrixId::a, 3, 4);
  CHECK(element_hash(1, MatrixId::a, 3, 4) == base); // deterministic
  CHECK(element_hash(2, MatrixId::a, 3, 4) != base);
  CHECK(element_hash(1, MatrixId::b, 3, 4) != base);
  CHECK(element_hash(1, MatrixId::a, 4, 3) != base); // not symmetric
  CHECK(element_hash(1, MatrixId::a, 3, 5) != base);
  CHECK(element_hash(1, MatrixId::a, 4, 4) != base);
}

TEST_CASE("agent::s8_element and f32_element cover their ranges") {
  std::set<int> bytes;
  float lo = 1, hi = -1;
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 64; ++j) {
      bytes.insert(s8_element(9, MatrixId::a, i, j));
      float f = f32_element(9, MatrixId::b, i, j);
      lo = std::min(lo, f);
      hi = std::max(hi, f);
      CHECK(f >= -1.0f);
      CHECK(f < 1.0f);
    }
  }
  CHECK(bytes.size() == 256); // 4096 draws reach every int8 value, -128 and 127 included
  CHECK(lo < -0.99f);
  CHECK(hi > 0.99f);
}

namespace {

// C = A B of a seed through the fast kernel.
template <typename In, typename Out, typename Fill, typename Gemm>
std::vector<Out> product(uint64_t seed, int m, int n, int k, Fill fill, Gemm gemm) {
  std::vector<In> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  fill(seed, MatrixId::a, 0, 0, m, k, a.data());
  fill(seed, MatrixId::b, 0, 0, k, n, b.data());
  std::vector<Out> c(static_cast<size_t>(m * n));
  REQUIRE(gemm(m, n, k, a.data(), k, b.data(), n, c.data(), n, kernels::GemmOptions{}));
  return c;
}

} // namespace

TEST_CASE("agent::freivalds_check_s8 is exact: passes the product, catches any one wrong element") {
  const int m = 48, n = 40, k = 72;
  auto c = product<int8_t, int32_t>(7, m, n, k, fill_block_s8, kernels::gemm_s8);
  CHECK(freivalds_check_s8(7, m, n, k, c.data(), n).ok);

  SUBCASE("off by one") {
    c[17 * n + 23] += 1;
    auto r = freivalds_check_s8(7, m, n, k, c.data(), n);
    CHECK(!r.ok);
    CHECK(r.bad_rows == 1);
    CHECK(r.first_bad == 17);
  }
  SUBCASE("the sign bit flipped (off by 2^31)") {
    c[3] = static_cast<int32_t>(static_cast<uint32_t>(c[3]) ^ 0x80000000u);
    CHECK(!freivalds_check_s8(7, m, n, k, c.data(), n).ok);
  }
  SUBCASE("another seed's product fails") {
    CHECK(!freivalds_check_s8(8, m, n, k, c.data(), n).ok);
  }
  SUBCASE("two blocks swapped (a gather that misplaces blocks)") {
    for (int i = 0; i < m / 2; ++i) {
      for (int j = 0; j < n; ++j) {
        std::swap(c[i * n + j], c[(i + m / 2) * n + j]);
      }
    }
    auto r = freivalds_check_s8(7, m, n, k, c.data(), n);
    CHECK(r.bad_rows == m);
  }
}

TEST_CASE("agent::freivalds_check_f32/bf16 accept the fp32 kernel's rounding and catch errors") {
  const int m = 64, n = 96, k = 200;
  SUBCASE("fp32") {
    auto c = product<float, float>(3, m, n, k, fill_block_f32, kernels::gemm_f32);
    auto good = freivalds_check_f32(3, m, n, k, c.data(), n);
    CHECK(good.ok);
    CHECK(good.worst_ratio < 1.0);
    c[10 * n + 50] += 1.0f;
    auto bad = freivalds_check_f32(3, m, n, k, c.data(), n);
    CHECK(!bad.ok);
    CHECK(bad.first_bad == 10);
    CHECK(bad.bad_rows == 1);
  }
  SUBCASE("bf16") {
    auto c = product<kernels::bf16_t, float>(3, m, n, k, fill_block_bf16, kernels::gemm_bf16);
    CHECK(freivalds_check_bf16(3, m, n, k, c.data(), n).ok);
    // An fp32 product is not the bf16 product: the inputs differ after rounding to bf16.
    auto f = product<float, float>(3, m, n, k, fill_block_f32, kernels::gemm_f32);
    CHECK(!freivalds_check_bf16(3, m, n, k, f.data(), n).ok);
    c[m * n - 1] = std::numeric_limits<float>::quiet_NaN();
    auto nan = freivalds_check_bf16(3, m, n, k, c.data(), n);
    CHECK(!nan.ok);
    CHECK(nan.first_bad == m - 1);
  }
  SUBCASE("the portable kernel's summation order passes too") {
    std::vector<float> a(m * k), b(k * n), c(m * n);
    fill_block_f32(3, MatrixId::a, 0, 0, m, k, a.data());
    fill_block_f32(3, MatrixId::b, 0, 0, k, n, b.data());
    kernels::GemmOptions portable;
    portable.isa = kernels::GemmIsa::portable;
    REQUIRE(kernels::gemm_f32(m, n, k, a.data(), k, b.data(), n, c.data(), n, portable));
    CHECK(freivalds_check_f32(3, m, n, k, c.data(), n).ok);
  }
}
