// The GEMM on the inputs that break shortcuts: int8 constants where vpmaddubsw saturates, the
// K = 131072 int32 wrap, bf16 signed zeros, infinities, NaN and subnormals (no FTZ/DAZ); plus
// the weight-stationary API reused across many A matrices and argument validation.
#include <cmath>
#include <limits>

#include "tests/unit/kernels/test_gemm_helpers.hpp"

using namespace tpuctl::test::gemm;
using namespace tpuctl::kernels;
using tpuctl::Status;

TEST_SUITE_BEGIN("kernels");

namespace {

// Runs A (m x k) * B (k x n) under every option set and API, checking with the gate; returns
// the last result for extra assertions.
template <typename In, typename Out, typename FillA, typename FillB>
std::vector<Out> run_everywhere(int m, int n, int k, FillA fill_a, FillB fill_b) {
  std::vector<Out> last;
  for (const GemmOptions& o : option_sets<In>()) {
    for (Api api : {Api::plain, Api::packed}) {
      Operands<In, Out> ops(dense(m, n, k));
      for (int i = 0; i < m; ++i) {
        for (int p = 0; p < k; ++p) {
          ops.a_at(i, p) = fill_a(i, p);
        }
      }
      for (int p = 0; p < k; ++p) {
        for (int j = 0; j < n; ++j) {
          ops.b_at(p, j) = fill_b(p, j);
        }
      }
      expect_correct(ops, api, o);
      last.assign(ops.c(), ops.c() + static_cast<long>(m) * n);
    }
  }
  return last;
}

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

} // namespace

TEST_CASE("kernels::gemm_s8 is exact on the adversarial constants of kernels.md 6.3") {
  SUBCASE("all -128 x -128") {
    auto c = run_everywhere<int8_t, int32_t>(
        7, 19, 601, [](int, int) { return int8_t{-128}; }, [](int, int) { return int8_t{-128}; });
    CHECK(c[0] == 601 * 16384);
  }
  SUBCASE("all 127 x 127 (vpmaddubsw would saturate each pair at 32767)") {
    auto c = run_everywhere<int8_t, int32_t>(
        7, 19, 64, [](int, int) { return int8_t{127}; }, [](int, int) { return int8_t{127}; });
    CHECK(c[0] == 127 * 127 * 64);
  }
  SUBCASE("alternating 127 / -128 along k, in phase and out of phase") {
    auto alt = [](int p) { return p % 2 == 0 ? int8_t{127} : int8_t{-128}; };
    auto c = run_everywhere<int8_t, int32_t>(
        5, 17, 99, [&](int, int p) { return alt(p); },
        [&](int p, int j) { return j % 2 == 0 ? alt(p) : alt(p + 1); });
    // Column 0: 50 x 127^2 + 49 x 128^2; column 1: 99 products of 127 x -128.
    CHECK(c[0] == 50 * 127 * 127 + 49 * 128 * 128);
    CHECK(c[1] == 99 * 127 * -128);
  }
  SUBCASE("u8-255 x s8-127 pattern as raw bytes: 0xff is -1 in int8") {
    auto c = run_everywhere<int8_t, int32_t>(
        3, 18, 64, [](int, int) { return static_cast<int8_t>(-1); },
        [](int, int) { return int8_t{127}; });
    CHECK(c[0] == -127 * 64);
  }
}

TEST_CASE("kernels::gemm_s8 wraps like int32 at K = 131072, as the reference does") {
  // Every |sum| <= K x 16384 fits int32 for K <= 131071; with K = 131072 and all -128 inputs
  // the sum is 2^31, which wraps to INT32_MIN.
  int k = 131072;
  auto c = run_everywhere<int8_t, int32_t>(
      2, 17, k, [](int, int) { return int8_t{-128}; }, [](int, int) { return int8_t{-128}; });
  CHECK(c[0] == std::numeric_limits<int32_t>::min());
  CHECK(c[16] == std::numeric_limits<int32_t>::min());
  // K = 131075: the sum 131075 x 16384 is 2^31 + 49152, which wraps to -2^31 + 49152.
  auto d = run_everywhere<int8_t, int32_t>(
      1, 3, 131075, [](int, int) { return int8_t{-128}; }, [](int, int) { return int8_t{-128}; });
  CHECK(d[0] == std::numeric_limits<int32_t>::min() + 49152);
}

TEST_CASE("kernels::gemm_bf16 keeps signed zeros, infinities and NaN as IEEE sums do") {
  const bf16_t pos_inf = 0x7f80, neg_inf = 0xff80, nan = 0x7fc0, neg_zero = 0x8000;
  const bf16_t one = fp32_to_bf16(1.0f), two = fp32_to_bf16(2.0f);
  SUBCASE("-0 x 1 summed from +0 is +0, as in the fp64 reference") {
    auto c = run_everywhere<bf16_t, float>(
        3, 17, 5, [&](int, int) { return neg_zero; }, [&](int, int) { return one; });
    CHECK(c[0] == 0.0f);
    CHECK(!std::signbit(c[0]));
  }
  SUBCASE("an infinity in A makes its row infinite, with the sign of the product") {
    auto c = run_everywhere<bf16_t, float>(
        2, 17, 9, [&](int i, int p) { return i == 0 && p == 4 ? pos_inf : one; },
        [&](int, int j) { return j % 2 == 0 ? two : fp32_to_bf16(-2.0f); });
    CHECK(std::isinf(c[0]));
    CHECK(c[0] > 0);
    CHECK(std::isinf(c[1]));
    CHECK(c[1] < 0);
    CHECK(c[17] == 18.0f); // row 1 is finite: 9 x 1 x 2
  }
  SUBCASE("inf x 0 and +inf + -inf give NaN; a NaN input gives NaN") {
    auto c = run_everywhere<bf16_t, float>(
        3, 16, 4,
        [&](int i, int p) {
          if (i == 0) {
            return p == 0 ? pos_inf : one; // times a zero B column -> NaN
          }
          if (i == 1) {
            return p == 0 ? pos_inf : (p == 1 ? neg_inf : one);
          }
          return p == 2 ? nan : one;
        },
        [&](int, int j) { return j == 0 ? bf16_t{0} : one; });
    CHECK(std::isnan(c[0]));      // +inf x 0
    CHECK(std::isnan(c[16 + 3])); // +inf + -inf
    CHECK(std::isnan(c[32 + 5])); // NaN input
    CHECK(c[5] == std::numeric_limits<float>::infinity());
  }
}

TEST_CASE("kernels::gemm_bf16 keeps subnormals when it widens, flushes them on the dot paths") {
  // bf16 0x0001 is 2^-133, a subnormal in fp32 as well; 37 of them sum exactly to 37 x 2^-133.
  // 2^-70 x 2^-60 = 2^-130: normal inputs whose product is subnormal. The widening paths keep
  // both (IEEE); vdpbf16ps and tdpbf16ps read subnormal inputs as 0 and flush a subnormal step
  // result to 0 (gemm.hpp), and the gate's bound for them says so.
  const float tiny = std::ldexp(1.0f, -133);
  for (GemmIsa isa : dtype_paths(GemmDtype::bf16)) {
    CAPTURE(std::string(to_string(isa)));
    GemmOptions o;
    o.isa = isa;
    bool kept = bf16_subnormals(isa) == Subnormals::kept;
    Operands<bf16_t, float> sub(dense(2, 16, 37));
    sub.fill([] { return bf16_t{0x0001}; });
    for (int j = 0; j < 16; ++j) {
      for (int p = 0; p < 37; ++p) {
        sub.b_at(p, j) = fp32_to_bf16(1.0f);
      }
    }
    expect_correct(sub, Api::plain, o);
    CHECK(sub.c_at(0, 0) == (kept ? 37 * tiny : 0.0f));
    Operands<bf16_t, float> under(dense(1, 16, 3));
    under.fill([] { return fp32_to_bf16(std::ldexp(1.0f, -70)); });
    for (int p = 0; p < 3; ++p) {
      for (int j = 0; j < 16; ++j) {
        under.b_at(p, j) = fp32_to_bf16(std::ldexp(1.0f, -60));
      }
    }
    expect_correct(under, Api::packed, o);
    CHECK(under.c_at(0, 5) == (kept ? 3 * std::ldexp(1.0f, -130) : 0.0f));
  }
}

TEST_CASE("kernels::gemm_f32 keeps subnormals (no flush to zero) on every path") {
  // A normal times a small normal that lands in the subnormal range: 2^-100 x 2^-30 = 2^-130.
  auto d = run_everywhere<float, float>(
      1, 16, 1, [](int, int) { return std::ldexp(1.0f, -100); },
      [](int, int) { return std::ldexp(1.0f, -30); });
  CHECK(d[0] == std::ldexp(1.0f, -130));
  CHECK(std::fpclassify(d[0]) == FP_SUBNORMAL);
  // Subnormal inputs are read as themselves, not as zero (no DAZ).
  auto e = run_everywhere<float, float>(
      1, 16, 1, [](int, int) { return bits_to_float(0x00000010u); }, [](int, int) { return 4.0f; });
  CHECK(e[0] == bits_to_float(0x00000040u));
}

TEST_CASE("kernels::pack_b_* packs once and serves many A matrices (weight-stationary mode)") {
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> byte(-128, 127);
  int k = 300, n = 45;
  std::vector<int8_t> b(static_cast<size_t>(k * n));
  for (auto& x : b) {
    x = static_cast<int8_t>(byte(rng));
  }
  for (const GemmOptions& o : option_sets<int8_t>()) {
    auto packed = pack_b_s8(k, n, b.data(), n, o);
    REQUIRE(packed.has_value());
    CHECK(packed->k() == k);
    CHECK(packed->n() == n);
    CHECK(packed->dtype() == GemmDtype::int8);
    CHECK(packed->bytes() >= static_cast<size_t>(k * n)); // at least a byte per value
    CHECK(packed->isa() == *selected_isa(GemmDtype::int8, o));
    for (int m : {1, 6, 7, 64, 125}) {
      CAPTURE(m);
      std::vector<int8_t> a(static_cast<size_t>(m * k));
      for (auto& x : a) {
        x = static_cast<int8_t>(byte(rng));
      }
      std::vector<int32_t> c(static_cast<size_t>(m * n), 99);
      REQUIRE(gemm_s8_packed(m, a.data(), k, *packed, c.data(), n, o).has_value());
      CHECK(check_gemm_s8(m, n, k, a.data(), k, b.data(), n, c.data(), n).passed);
    }
  }
  // A packed B runs on the family it was packed for, whatever the best one is; options that
  // select another family are refused rather than read a layout they do not know.
  std::vector<float> bf(static_cast<size_t>(k * n), 0.5f), af(static_cast<size_t>(3 * k), 2.0f);
  GemmOptions portable;
  portable.isa = GemmIsa::portable;
  auto pf = pack_b_f32(k, n, bf.data(), n, portable);
  REQUIRE(pf.has_value());
  CHECK(pf->isa() == GemmIsa::portable);
  std::vector<float> cf(static_cast<size_t>(3 * n));
  REQUIRE(gemm_f32_packed(3, af.data(), k, *pf, cf.data(), n).has_value());
  CHECK(cf[0] == static_cast<float>(k));
  const auto best = *selected_isa(GemmDtype::fp32);
  if (best != GemmIsa::portable) {
    GemmOptions other;
    other.isa = best;
    Status st = gemm_f32_packed(3, af.data(), k, *pf, cf.data(), n, other);
    REQUIRE_FALSE(st.has_value());
    CHECK(st.error().kind == tpuctl::ErrorKind::usage);
    CHECK(st.error().message.find("packed for isa 'portable'") != std::string::npos);
  }
}

TEST_CASE("kernels::gemm validates its arguments and reports every problem") {
  std::vector<float> buf(64, 1.0f);
  SUBCASE("negative sizes") {
    Status st = gemm_f32(-1, 2, -3, buf.data(), 4, buf.data(), 4, buf.data(), 4);
    REQUIRE(!st.has_value());
    CHECK(st.error().kind == tpuctl::ErrorKind::usage);
    CHECK(st.error().message == "gemm_f32: m '-1' is negative: sizes must be 0 or more");
    REQUIRE(st.error().more.size() == 1);
    CHECK(st.error().more[0] == "gemm_f32: k '-3' is negative: sizes must be 0 or more");
  }
  SUBCASE("a leading dimension smaller than the row and a null C") {
    Status st = gemm_f32(2, 5, 3, buf.data(), 2, buf.data(), 5, nullptr, 5);
    REQUIRE(!st.has_value());
    auto all = st.error().all_messages();
    REQUIRE(all.size() == 2);
    CHECK(all[0] == "gemm_f32: lda '2' is smaller than k '3': a row of A holds k elements, so "
                    "pass lda >= k");
    CHECK(all[1] == "gemm_f32: C is null but holds 2 x 5 elements: pass its data");
  }
  SUBCASE("threads out of range") {
    GemmOptions o;
    o.threads = -2;
    Status st = gemm_f32(1, 1, 1, buf.data(), 1, buf.data(), 1, buf.data(), 1, o);
    REQUIRE(!st.has_value());
    CHECK(st.error().message.find("threads '-2' is out of range") != std::string::npos);
  }
  SUBCASE("a packed B of another dtype") {
    std::vector<int8_t> b8(16, 1);
    auto packed = pack_b_s8(4, 4, b8.data(), 4);
    REQUIRE(packed.has_value());
    Status st = gemm_f32_packed(1, buf.data(), 4, *packed, buf.data(), 4);
    REQUIRE(!st.has_value());
    CHECK(st.error().message ==
          "gemm_f32_packed: the packed B holds int8 values, not fp32: pack it with pack_b_f32");
  }
  SUBCASE("null inputs are fine when there is nothing to read") {
    CHECK(gemm_s8(0, 0, 5, nullptr, 5, nullptr, 0, nullptr, 0).has_value());
    std::vector<int32_t> c(4, 7);
    CHECK(gemm_s8(2, 2, 0, nullptr, 0, nullptr, 2, c.data(), 2).has_value());
    CHECK(c[3] == 0);
  }
}

TEST_SUITE_END();
