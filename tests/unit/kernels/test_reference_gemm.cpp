#include <cmath>
#include <limits>
#include <vector>

#include <doctest/doctest.h>

#include "kernels/reference_gemm.hpp"

using namespace tpuctl::kernels;

TEST_SUITE_BEGIN("kernels");

TEST_CASE("kernels::fp32_to_bf16 rounds to nearest even and keeps specials") {
  CHECK(fp32_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_fp32(fp32_to_bf16(1.0f)) == 1.0f);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties go to even (1.0).
  CHECK(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  // 1 + 3*2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even): rounds up.
  CHECK(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(fp32_to_bf16(-0.0f) == 0x8000);
  CHECK(std::isinf(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::infinity()))));
  CHECK(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // The largest float rounds past the largest finite bf16: infinity, as IEEE says.
  CHECK(std::isinf(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::max()))));
}

TEST_CASE("kernels::reference_gemm_s8 is exact on adversarial constants") {
  SUBCASE("127 x 127 over K = 64 (where vpmaddubsw saturates)") {
    int k = 64;
    std::vector<int8_t> a(static_cast<size_t>(k), 127), b(static_cast<size_t>(k), 127);
    int32_t c = 0;
    reference_gemm_s8(1, 1, k, a.data(), k, b.data(), 1, &c, 1);
    CHECK(c == 127 * 127 * 64);
  }
  SUBCASE("-128 x -128 over K = 131072 wraps to INT32_MIN") {
    int k = 131072;
    std::vector<int8_t> a(static_cast<size_t>(k), -128), b(static_cast<size_t>(k), -128);
    int32_t c = 0;
    reference_gemm_s8(1, 1, k, a.data(), k, b.data(), 1, &c, 1);
    CHECK(c == std::numeric_limits<int32_t>::min());
  }
  SUBCASE("K = 0 gives zeros") {
    int32_t c[4] = {7, 7, 7, 7};
    reference_gemm_s8(2, 2, 0, nullptr, 0, nullptr, 2, c, 2);
    CHECK(c[0] == 0);
    CHECK(c[3] == 0);
  }
}

TEST_CASE("kernels::check_gemm_s8 finds a single wrong element") {
  int8_t a[6] = {1, 2, 3, 4, 5, 6}; // 2x3
  int8_t b[6] = {1, 0, 0, 1, 1, 1}; // 3x2
  int32_t c[4];
  reference_gemm_s8(2, 2, 3, a, 3, b, 2, c, 2);
  CHECK(c[0] == 4);
  CHECK(c[1] == 5);
  CHECK(check_gemm_s8(2, 2, 3, a, 3, b, 2, c, 2).passed);
  c[3] += 1;
  auto bad = check_gemm_s8(2, 2, 3, a, 3, b, 2, c, 2);
  CHECK(!bad.passed);
  CHECK(bad.mismatches == 1);
  CHECK(bad.first_bad_row == 1);
  CHECK(bad.first_bad_col == 1);
}

TEST_CASE("kernels::check_gemm_bf16 accepts reordered sums and rejects a real error") {
  int m = 3, n = 4, k = 300;
  std::vector<bf16_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = fp32_to_bf16(std::sin(static_cast<float>(i) * 0.37f));
  }
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = fp32_to_bf16(std::cos(static_cast<float>(i) * 0.11f));
  }
  // fp32 accumulation in reverse order: a legitimate different rounding.
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float acc = 0;
      for (int p = k - 1; p >= 0; --p) {
        acc += bf16_to_fp32(a[static_cast<size_t>(i * k + p)]) *
               bf16_to_fp32(b[static_cast<size_t>(p * n + j)]);
      }
      c[static_cast<size_t>(i * n + j)] = acc;
    }
  }
  auto ok = check_gemm_bf16(m, n, k, a.data(), k, b.data(), n, c.data(), n);
  CHECK(ok.passed);
  CHECK(ok.worst_bound_ratio < 0.1);
  c[5] += 0.5f; // far beyond gamma_300 * (|A||B|) (about 0.003 here)
  CHECK(!check_gemm_bf16(m, n, k, a.data(), k, b.data(), n, c.data(), n).passed);
}

TEST_SUITE_END();
