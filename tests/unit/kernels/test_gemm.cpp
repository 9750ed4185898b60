// Property tests of the fast GEMM against the shared references and gates (kernels.md 6.3):
// random shapes with padded leading dimensions and misaligned bases, fixed awkward shapes, and
// the block and thread boundaries, for every dtype, both APIs, both kernel families.
#include <cmath>
#include <limits>

#include "tests/unit/kernels/test_gemm_helpers.hpp"

using namespace tpuctl::test::gemm;
using tpuctl::kernels::bf16_t;
using tpuctl::kernels::fp32_to_bf16;

TEST_SUITE_BEGIN("kernels");

namespace {

template <typename In, typename Out, typename Gen>
void run_random_shapes(unsigned seed, int count, int max_dim, Gen gen) {
  std::mt19937 shapes(seed);
  for (const GemmOptions& o : option_sets<In>()) {
    for (Api api : {Api::plain, Api::packed}) {
      for (int t = 0; t < count; ++t) {
        Operands<In, Out> ops(random_shape(shapes, max_dim));
        ops.fill(gen);
        expect_correct(ops, api, o);
      }
    }
  }
}

template <typename In, typename Out, typename Gen>
void run_shape(const Shape& s, Gen gen) {
  for (const GemmOptions& o : option_sets<In>()) {
    for (Api api : {Api::plain, Api::packed}) {
      Operands<In, Out> ops(s);
      ops.fill(gen);
      expect_correct(ops, api, o);
    }
  }
}

// Awkward fixed shapes: 1x1x1, primes, one dimension 1, the tile sizes +-1.
std::vector<Shape> awkward_shapes() {
  return {dense(1, 1, 1),
          dense(7, 7, 7),
          dense(127, 7, 13),
          dense(5, 131, 3),
          dense(1, 70, 70),
          dense(70, 1, 70),
          dense(70, 70, 1),
          dense(6, 16, 2),
          dense(5, 15, 3),
          dense(7, 17, 5),
          dense(12, 32, 9),
          dense(13, 33, 31),
          Shape{3, 5, 4, 9, 11, 13, 1},
          Shape{17, 3, 29, 31, 7, 5, 3}};
}

} // namespace

TEST_CASE("kernels::gemm_f32 matches the fp32 gate on random shapes, strides and offsets") {
  Values v(101);
  run_random_shapes<float, float>(11, 25, 70, [&] { return v.f32(); });
}

TEST_CASE("kernels::gemm_bf16 matches the bf16 gate on random shapes, strides and offsets") {
  Values v(202);
  run_random_shapes<bf16_t, float>(22, 25, 70, [&] { return v.bf16(); });
}

TEST_CASE("kernels::gemm_s8 equals the exact reference on random shapes, strides and offsets") {
  Values v(303);
  run_random_shapes<int8_t, int32_t>(33, 25, 70, [&] { return v.s8(); });
}

TEST_CASE("kernels::gemm is correct on 1x1x1, primes and sizes around the 6x16 tile") {
  Values v(404);
  for (const Shape& s : awkward_shapes()) {
    run_shape<float, float>(s, [&] { return v.f32(); });
    run_shape<bf16_t, float>(s, [&] { return v.bf16(); });
    run_shape<int8_t, int32_t>(s, [&] { return v.s8(); });
  }
}

TEST_CASE("kernels::gemm crosses k-blocks, row blocks and thread splits correctly") {
  // k > 512 crosses the int8 and fp32 k-blocks of the AVX2 family (odd k: the int8 pair
  // padding), k = 2101 those of the wide families (2048 bytes of a row: 512 fp32, 1024 bf16,
  // 2048 int8); m > 120 crosses a row block; 2 threads split along M (tall) or along N (wide
  // and short).
  Values v(505);
  for (const Shape& s : {dense(131, 37, 613), dense(7, 263, 301),
                         Shape{127, 129, 257, 260, 131, 140, 1}, dense(29, 45, 2101)}) {
    run_shape<float, float>(s, [&] { return v.f32(); });
    run_shape<bf16_t, float>(s, [&] { return v.bf16(); });
    run_shape<int8_t, int32_t>(s, [&] { return v.s8(); });
  }
}

TEST_CASE("kernels::gemm splits work over 2 to 4 threads on every path") {
  // Shapes large enough for several threads: the direct path (m <= 120, split along N), the
  // blocked path split along M (shared B blocks, barriers) and along N (8 threads, 21 row
  // units), N beyond one 4096-column block, and the packed path split both ways.
  Values v(707);
  const std::vector<Shape> shapes = {dense(20, 300, 200), dense(131, 37, 613), dense(121, 400, 100),
                                     dense(125, 4111, 9), Shape{7, 500, 301, 305, 509, 503, 2}};
  for (int threads : {2, 3, 8}) {
    for (const Shape& s : shapes) {
      for (Api api : {Api::plain, Api::packed}) {
        GemmOptions o;
        o.threads = threads;
        Operands<float, float> f(s);
        f.fill([&] { return v.f32(); });
        expect_correct(f, api, o);
        Operands<int8_t, int32_t> q(s);
        q.fill([&] { return v.s8(); });
        expect_correct(q, api, o);
      }
    }
  }
}

TEST_CASE("kernels::gemm with K = 0 overwrites C with zeros and leaves the padding alone") {
  for (tpuctl::kernels::GemmIsa isa : tpuctl::kernels::host_isas()) {
    GemmOptions o;
    o.isa = isa; // every path of every dtype (each capped at this family)
    for (Api api : {Api::plain, Api::packed}) {
      Shape s{4, 5, 0, 0, 7, 9, 2};
      Operands<float, float> f(s);
      expect_correct(f, api, o);
      CHECK(f.c_at(3, 4) == 0.0f);
      Operands<bf16_t, float> h(s);
      expect_correct(h, api, o);
      CHECK(h.c_at(0, 0) == 0.0f);
      Operands<int8_t, int32_t> q(s);
      expect_correct(q, api, o);
      CHECK(q.c_at(2, 3) == 0);
    }
  }
}

TEST_CASE("kernels::gemm with m = 0 or n = 0 writes nothing and succeeds") {
  for (Api api : {Api::plain, Api::packed}) {
    Operands<float, float> rows(Shape{0, 5, 3, 3, 5, 5, 0});
    CHECK(multiply(api, rows.s, rows.a(), rows.b(), rows.c(), {}).has_value());
    CHECK(rows.outside_untouched());
    Operands<int8_t, int32_t> cols(Shape{4, 0, 3, 3, 0, 1, 0});
    CHECK(multiply(api, cols.s, cols.a(), cols.b(), cols.c(), {}).has_value());
    CHECK(cols.outside_untouched());
  }
}

TEST_CASE("kernels::gemm fp32 results do not depend on the thread count") {
  // Each element is summed in the same order whatever the split, so results are bitwise equal.
  Values v(606);
  Operands<float, float> one(dense(97, 83, 301));
  one.fill([&] { return v.f32(); });
  Operands<float, float> two = one;
  GemmOptions o1, o2;
  o2.threads = 2;
  REQUIRE(multiply(Api::plain, one.s, one.a(), one.b(), one.c(), o1).has_value());
  REQUIRE(multiply(Api::plain, two.s, two.a(), two.b(), two.c(), o2).has_value());
  CHECK(std::memcmp(one.c_store.data(), two.c_store.data(), one.c_store.size() * sizeof(float)) ==
        0);
}

TEST_SUITE_END();
