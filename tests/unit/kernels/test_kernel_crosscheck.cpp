// The two halves of the systolic kernel must agree: the cycle-stepped MXU simulator (the model
// of what a TPU computes) and the fast CPU GEMM (what workers run). int8 bit-exactly, on many
// random shapes, every dataflow, every int8 kernel family of the host; bf16 within gate 1 of
// kernels.md 6.3 for both, and the simulator bit-exact against the systolic summation order (gate
// 3).
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "kernels/gemm.hpp"
#include "kernels/reference_gemm.hpp"
#include "kernels/systolic_sim.hpp"
#include "tests/unit/kernels/test_gemm_helpers.hpp"

using namespace tpuctl::kernels;

TEST_SUITE_BEGIN("kernels");

TEST_CASE("kernels: the fast int8 GEMM and the MXU simulator agree bit-exactly") {
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> dim(1, 37), arr(1, 8), val(-128, 127), df(0, 2);
  for (int round = 0; round < 60; ++round) {
    int m = dim(rng), n = dim(rng), k = dim(rng);
    std::vector<int8_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (auto& x : a) {
      x = static_cast<int8_t>(val(rng));
    }
    for (auto& x : b) {
      x = static_cast<int8_t>(val(rng));
    }
    if (round % 10 == 0) { // adversarial: the extremes everywhere
      std::fill(a.begin(), a.end(), int8_t{-128});
      std::fill(b.begin(), b.end(), static_cast<int8_t>(round % 20 ? 127 : -128));
    }
    SimConfig config{ArrayShape{arr(rng), arr(rng)}, static_cast<Dataflow>(df(rng)),
                     CycleMode::scalesim};
    std::vector<int32_t> sim(static_cast<size_t>(m * n)), fast(sim.size());
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    REQUIRE(simulate_gemm_s8(GemmShape{m, n, k}, a.data(), k, b.data(), n, sim.data(), n, config));
    for (GemmIsa isa : tpuctl::test::gemm::dtype_paths(GemmDtype::int8)) {
      CAPTURE(std::string(to_string(isa)));
      REQUIRE(gemm_s8(m, n, k, a.data(), k, b.data(), n, fast.data(), n, GemmOptions{2, isa}));
      CHECK(sim == fast);
    }
  }
}

TEST_CASE("kernels: the fast bf16 GEMM and the MXU simulator both pass gate 1") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> dim(1, 33), arr(1, 8);
  std::uniform_real_distribution<float> val(-2.0f, 2.0f);
  for (int round = 0; round < 30; ++round) {
    int m = dim(rng), n = dim(rng), k = dim(rng);
    std::vector<bf16_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (auto& x : a) {
      x = fp32_to_bf16(val(rng));
    }
    for (auto& x : b) {
      x = fp32_to_bf16(val(rng));
    }
    int rows = arr(rng);
    SimConfig config{ArrayShape{rows, arr(rng)}, Dataflow::ws, CycleMode::scalesim};
    std::vector<float> sim(static_cast<size_t>(m * n)), fast(sim.size()), order(sim.size());
    REQUIRE(
        simulate_gemm_bf16(GemmShape{m, n, k}, a.data(), k, b.data(), n, sim.data(), n, config));
    REQUIRE(gemm_bf16(m, n, k, a.data(), k, b.data(), n, fast.data(), n, GemmOptions{}));
    CHECK(check_gemm_bf16(m, n, k, a.data(), k, b.data(), n, sim.data(), n).passed);
    CHECK(check_gemm_bf16(m, n, k, a.data(), k, b.data(), n, fast.data(), n,
                          bf16_subnormals(*selected_isa(GemmDtype::bf16)))
              .passed);
    systolic_order_gemm_bf16(GemmShape{m, n, k}, a.data(), k, b.data(), n, order.data(), n, rows,
                             Dataflow::ws);
    CHECK(sim == order); // gate 3: bit-exact in the systolic summation order
  }
}

TEST_SUITE_END();
