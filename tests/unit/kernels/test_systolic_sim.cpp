// The cycle-stepped simulator: its products equal the reference GEMMs (int8 bit-exact, bf16
// within gate 1 and bit-exact against the systolic-order reference, gate 3), and its cycle
// counts equal the model's on many random shapes and array sizes. Small sizes only: speed is
// measured in bench/, never here.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "kernels/reference_gemm.hpp"
#include "kernels/systolic_sim.hpp"

using namespace tpuctl::kernels;

TEST_SUITE_BEGIN("kernels");

namespace {

struct Case {
  GemmShape g;
  ArrayShape a;
};

// Random shapes with M, N, K in [1, 40] and arrays up to 8x8, including 1xN and Nx1 arrays.
std::vector<Case> random_cases(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> size(1, 40), side(1, 8), pick(0, 9);
  std::vector<Case> out;
  for (int i = 0; i < count; ++i) {
    Case c{{size(rng), size(rng), size(rng)}, {side(rng), side(rng)}};
    int64_t p = pick(rng);
    if (p == 0) {
      c.a.rows = 1; // a single row
    } else if (p == 1) {
      c.a.cols = 1; // a single column
    }
    out.push_back(c);
  }
  return out;
}

std::vector<int8_t> random_s8(std::mt19937_64& rng, int64_t count) {
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> v(static_cast<size_t>(count));
  for (auto& x : v) {
    x = static_cast<int8_t>(d(rng));
  }
  return v;
}

std::vector<bf16_t> random_bf16(std::mt19937_64& rng, int64_t count) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<bf16_t> v(static_cast<size_t>(count));
  for (auto& x : v) {
    x = fp32_to_bf16(d(rng));
  }
  return v;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The same bits, except that any NaN equals any NaN.
bool same_float(float x, float y) {
  return (std::isnan(x) && std::isnan(y)) || bits(x) == bits(y);
}

struct Config {
  Dataflow dataflow;
  CycleMode mode;
};
const Config k_configs[] = {{Dataflow::ws, CycleMode::scalesim},
                            {Dataflow::ws, CycleMode::tpu},
                            {Dataflow::is, CycleMode::scalesim},
                            {Dataflow::is, CycleMode::tpu},
                            {Dataflow::os, CycleMode::scalesim}};

int64_t macs(const GemmShape& g) {
  return g.m * g.n * g.k;
}

} // namespace

TEST_CASE("kernels::simulate_gemm_s8 is exact and takes the model's cycles on random shapes") {
  std::mt19937_64 rng(7);
  for (const Case& c : random_cases(1, 100)) {
    const auto& g = c.g;
    auto a = random_s8(rng, g.m * g.k);
    auto b = random_s8(rng, g.k * g.n);
    for (const Config& cfg : k_configs) {
      CAPTURE(g.m);
      CAPTURE(g.n);
      CAPTURE(g.k);
      CAPTURE(c.a.rows);
      CAPTURE(c.a.cols);
      CAPTURE(to_string(cfg.dataflow));
      CAPTURE(to_string(cfg.mode));
      std::vector<int32_t> out(static_cast<size_t>(g.m * g.n), 12345);
      auto stats = simulate_gemm_s8(g, a.data(), g.k, b.data(), g.n, out.data(), g.n,
                                    {c.a, cfg.dataflow, cfg.mode});
      REQUIRE(stats);
      auto model = model_gemm(g, c.a, cfg.dataflow, cfg.mode);
      REQUIRE(model);
      CHECK(stats->cycles == model->cycles);
      CHECK(stats->folds == model->folds);
      CHECK(stats->hazards == 0);
      CHECK(stats->useful_macs == macs(g));
      CHECK(stats->pe_macs == model->folds * c.a.rows * c.a.cols * model->t);
      auto check = check_gemm_s8(static_cast<int>(g.m), static_cast<int>(g.n),
                                 static_cast<int>(g.k), a.data(), static_cast<int>(g.k), b.data(),
                                 static_cast<int>(g.n), out.data(), static_cast<int>(g.n));
      CHECK(check.passed);
      CHECK(check.mismatches == 0);
    }
  }
}

TEST_CASE("kernels::simulate_gemm_bf16 follows the systolic summation order bit for bit") {
  std::mt19937_64 rng(11);
  for (const Case& c : random_cases(2, 60)) {
    const auto& g = c.g;
    auto a = random_bf16(rng, g.m * g.k);
    auto b = random_bf16(rng, g.k * g.n);
    for (const Config& cfg : k_configs) {
      CAPTURE(g.m);
      CAPTURE(g.n);
      CAPTURE(g.k);
      CAPTURE(c.a.rows);
      CAPTURE(c.a.cols);
      CAPTURE(to_string(cfg.dataflow));
      CAPTURE(to_string(cfg.mode));
      std::vector<float> out(static_cast<size_t>(g.m * g.n), -1.0f);
      auto stats = simulate_gemm_bf16(g, a.data(), g.k, b.data(), g.n, out.data(), g.n,
                                      {c.a, cfg.dataflow, cfg.mode});
      REQUIRE(stats);
      auto model = model_gemm(g, c.a, cfg.dataflow, cfg.mode);
      REQUIRE(model);
      CHECK(stats->cycles == model->cycles);
      CHECK(stats->hazards == 0);
      // Gate 1 (any order) against the fp64 reference.
      auto gate1 = check_gemm_bf16(static_cast<int>(g.m), static_cast<int>(g.n),
                                   static_cast<int>(g.k), a.data(), static_cast<int>(g.k), b.data(),
                                   static_cast<int>(g.n), out.data(), static_cast<int>(g.n));
      CHECK(gate1.passed);
      // Gate 3: bit-exact against the scalar loop in the systolic order.
      std::vector<float> ref(out.size());
      systolic_order_gemm_bf16(g, a.data(), g.k, b.data(), g.n, ref.data(), g.n, c.a.rows,
                               cfg.dataflow);
      int64_t differ = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        differ += bits(out[i]) == bits(ref[i]) ? 0 : 1;
      }
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("kernels::systolic_order_gemm_bf16 adds tile partials, so the array height matters") {
  // One output, K = 4, products 1, 2^-24, 2^-24, 2^-24. Summed one by one, each 2^-24 is lost
  // to rounding (ties to even): 1. In tiles of 2 rows, the second tile's 2^-23 survives.
  const GemmShape g{1, 1, 4};
  const bf16_t a[4] = {fp32_to_bf16(1.0f), fp32_to_bf16(std::ldexp(1.0f, -24)),
                       fp32_to_bf16(std::ldexp(1.0f, -24)), fp32_to_bf16(std::ldexp(1.0f, -24))};
  const bf16_t b[4] = {fp32_to_bf16(1.0f), fp32_to_bf16(1.0f), fp32_to_bf16(1.0f),
                       fp32_to_bf16(1.0f)};
  const float tiled = 1.0f + std::ldexp(1.0f, -23);
  float ref = 0, sim = 0;
  SUBCASE("ws on two rows: tiles {1, 2^-24} and {2^-24, 2^-24}") {
    systolic_order_gemm_bf16(g, a, 4, b, 1, &ref, 1, 2, Dataflow::ws);
    CHECK(ref == tiled);
    REQUIRE(simulate_gemm_bf16(g, a, 4, b, 1, &sim, 1, {{2, 2}, Dataflow::ws}));
    CHECK(sim == tiled);
  }
  SUBCASE("ws on four rows: one tile, summed in order") {
    systolic_order_gemm_bf16(g, a, 4, b, 1, &ref, 1, 4, Dataflow::ws);
    CHECK(ref == 1.0f);
    REQUIRE(simulate_gemm_bf16(g, a, 4, b, 1, &sim, 1, {{4, 3}, Dataflow::ws, CycleMode::tpu}));
    CHECK(sim == 1.0f);
  }
  SUBCASE("os accumulates in place in k order whatever the array") {
    systolic_order_gemm_bf16(g, a, 4, b, 1, &ref, 1, 2, Dataflow::os);
    CHECK(ref == 1.0f);
    REQUIRE(simulate_gemm_bf16(g, a, 4, b, 1, &sim, 1, {{2, 2}, Dataflow::os}));
    CHECK(sim == 1.0f);
  }
}

TEST_CASE("kernels::simulate_gemm_bf16 keeps signed zeros, subnormals, infinities and NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  const float values[] = {0.0f,
                          -0.0f,
                          1.0f,
                          -2.5f,
                          std::ldexp(1.0f, -130), // subnormal in bf16 and fp32
                          -std::ldexp(1.0f, -127),
                          inf,
                          -inf,
                          std::numeric_limits<float>::quiet_NaN(),
                          -0.375f};
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<size_t> pick(0, std::size(values) - 1);
  const GemmShape g{9, 7, 11};
  std::vector<bf16_t> a(static_cast<size_t>(g.m * g.k)), b(static_cast<size_t>(g.k * g.n));
  for (auto& x : a) {
    x = fp32_to_bf16(values[pick(rng)]);
  }
  for (auto& x : b) {
    x = fp32_to_bf16(values[pick(rng) % 4]); // normal weights: the specials come from A
  }
  for (const Config& cfg : k_configs) {
    CAPTURE(to_string(cfg.dataflow));
    CAPTURE(to_string(cfg.mode));
    ArrayShape array{3, 4};
    std::vector<float> out(static_cast<size_t>(g.m * g.n)), ref(out.size());
    REQUIRE(simulate_gemm_bf16(g, a.data(), g.k, b.data(), g.n, out.data(), g.n,
                               {array, cfg.dataflow, cfg.mode}));
    systolic_order_gemm_bf16(g, a.data(), g.k, b.data(), g.n, ref.data(), g.n, array.rows,
                             cfg.dataflow);
    int64_t differ = 0, specials = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      differ += same_float(out[i], ref[i]) ? 0 : 1;
      specials += std::isfinite(ref[i]) ? 0 : 1;
    }
    CHECK(differ == 0);
    CHECK(specials > 0); // the case really exercises non-finite results
    auto gate1 = check_gemm_bf16(static_cast<int>(g.m), static_cast<int>(g.n),
                                 static_cast<int>(g.k), a.data(), static_cast<int>(g.k), b.data(),
                                 static_cast<int>(g.n), out.data(), static_cast<int>(g.n));
    CHECK(gate1.passed);
  }
}

TEST_CASE("kernels::simulate_gemm_s8 is exact on adversarial constants") {
  const GemmShape g{5, 6, 37};
  for (int pattern = 0; pattern < 3; ++pattern) {
    CAPTURE(pattern);
    std::vector<int8_t> a(static_cast<size_t>(g.m * g.k)), b(static_cast<size_t>(g.k * g.n));
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = pattern == 0 ? -128 : pattern == 1 ? 127 : (i % 2 ? 127 : -128);
    }
    for (size_t i = 0; i < b.size(); ++i) {
      b[i] = pattern == 0 ? -128 : pattern == 1 ? 127 : (i % 3 ? -128 : 127);
    }
    for (const Config& cfg : k_configs) {
      std::vector<int32_t> out(static_cast<size_t>(g.m * g.n));
      REQUIRE(simulate_gemm_s8(g, a.data(), g.k, b.data(), g.n, out.data(), g.n,
                               {{4, 4}, cfg.dataflow, cfg.mode}));
      CHECK(check_gemm_s8(5, 6, 37, a.data(), 37, b.data(), 6, out.data(), 6).passed);
    }
  }
  SUBCASE("all -128 gives 16384 * K") {
    std::vector<int8_t> a(static_cast<size_t>(g.m * g.k), -128),
        b(static_cast<size_t>(g.k * g.n), -128);
    std::vector<int32_t> out(static_cast<size_t>(g.m * g.n));
    REQUIRE(simulate_gemm_s8(g, a.data(), g.k, b.data(), g.n, out.data(), g.n, {{3, 2}}));
    CHECK(out[0] == 16384 * 37);
    CHECK(out.back() == 16384 * 37);
  }
}

TEST_CASE("kernels::simulate_gemm_s8 counts the published and hand-worked cycles") {
  auto run = [](GemmShape g, ArrayShape a, Dataflow d, CycleMode m = CycleMode::scalesim) {
    std::vector<int8_t> x(static_cast<size_t>(g.m * g.k), 1), w(static_cast<size_t>(g.k * g.n), 1);
    std::vector<int32_t> out(static_cast<size_t>(g.m * g.n));
    auto s = simulate_gemm_s8(g, x.data(), g.k, w.data(), g.n, out.data(), g.n, {a, d, m});
    REQUIRE(s);
    CHECK(s->hazards == 0);
    CHECK(out[0] == g.k);
    return s->cycles;
  };
  // The RTL-validated 4x4x4 os case (ISPASS 2020 Fig. 4): 10 cycles; SCALE-Sim prints 9.
  CHECK(run({4, 4, 4}, {4, 4}, Dataflow::os) == 10);
  // N x N x N on N x N: SCALE-Sim prints 4N - 3 for ws, so the count is 4N - 2.
  CHECK(run({4, 4, 4}, {4, 4}, Dataflow::ws) == 14);
  CHECK(run({8, 8, 8}, {8, 8}, Dataflow::ws) == 30);
  // The tpu cases worked by hand in test_systolic_model.cpp.
  CHECK(run({10, 4, 8}, {4, 4}, Dataflow::ws, CycleMode::tpu) == 30);
  CHECK(run({2, 4, 12}, {4, 4}, Dataflow::ws, CycleMode::tpu) == 20);
}

TEST_CASE("kernels::simulate_gemm_s8 honours leading dimensions and rejects short ones") {
  std::mt19937_64 rng(3);
  const GemmShape g{6, 5, 7};
  const int64_t lda = 9, ldb = 8, ldc = 11;
  auto a = random_s8(rng, g.m * lda);
  auto b = random_s8(rng, g.k * ldb);
  std::vector<int32_t> out(static_cast<size_t>(g.m * ldc), 77);
  REQUIRE(simulate_gemm_s8(g, a.data(), lda, b.data(), ldb, out.data(), ldc,
                           {{3, 2}, Dataflow::is, CycleMode::tpu}));
  CHECK(check_gemm_s8(6, 5, 7, a.data(), 9, b.data(), 8, out.data(), 11).passed);
  CHECK(out[5] == 77); // the padding between rows of C is untouched

  auto bad = simulate_gemm_s8(g, a.data(), 6, b.data(), ldb, out.data(), 4, {{3, 2}});
  REQUIRE(!bad);
  CHECK(bad.error().kind == tpuctl::ErrorKind::usage);
  REQUIRE(bad.error().all_messages().size() == 2);
  CHECK(bad.error().message.find("lda '6' is shorter than a row of A (7 elements)") == 0);

  auto tpu_os = simulate_gemm_s8(g, a.data(), lda, b.data(), ldb, out.data(), ldc,
                                 {{3, 2}, Dataflow::os, CycleMode::tpu});
  REQUIRE(!tpu_os);
  CHECK(tpu_os.error().kind == tpuctl::ErrorKind::usage);
}

TEST_SUITE_END();
