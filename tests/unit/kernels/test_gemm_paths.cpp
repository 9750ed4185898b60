// Every kernel family on the ragged shapes of issue 19: each of m, n and k in {1, 7, 15, 16, 17,
// 63, 65, 127, 129} (around the 6 x 16, 12 x 32 and 32 x 32 tiles, the 4-, 16- and 64-byte k
// groups), full-range int8 including -128 bit-exact against the reference, bf16 and fp32 within
// their gates. Each family this host has runs forced through GemmOptions::isa (the switch of
// `tpuctl kernel run --isa`); the AMX paths also run on the C++ model of the tile instructions
// (gemm_amx_model.hpp), so their packing, blocking and VNNI layout are checked on any host.
#include <array>

#include "kernels/gemm_amx_model.hpp"
#include "kernels/gemm_driver.hpp"
#include "tests/unit/kernels/test_gemm_helpers.hpp"

using namespace tpuctl::test::gemm;
using namespace tpuctl::kernels;

TEST_SUITE_BEGIN("kernels");

namespace {

constexpr std::array<int, 9> k_ragged = {1, 7, 15, 16, 17, 63, 65, 127, 129};

// All 729 shapes for int8 (exactness is cheap to check); 81 for the float types, in which each
// value still meets each other value in every pair of dimensions.
std::vector<Shape> ragged_shapes(bool all) {
  std::vector<Shape> out;
  for (size_t i = 0; i < k_ragged.size(); ++i) {
    for (size_t j = 0; j < k_ragged.size(); ++j) {
      if (all) {
        for (int k : k_ragged) {
          out.push_back(dense(k_ragged[i], k_ragged[j], k));
        }
      } else {
        out.push_back(dense(k_ragged[i], k_ragged[(i + j) % 9], k_ragged[j]));
      }
    }
  }
  return out;
}

// Runs every shape on family `isa`, alternating the plain and packed calls and 1 or 2 threads.
template <typename In, typename Out, typename Gen>
void run_ragged(GemmIsa isa, Gen gen) {
  CAPTURE(std::string(to_string(isa)));
  int index = 0;
  for (const Shape& s : ragged_shapes(sizeof(In) == 1)) {
    GemmOptions o;
    o.isa = isa;
    o.threads = 1 + index % 2;
    Operands<In, Out> ops(s);
    ops.fill(gen);
    expect_correct(ops, index / 2 % 2 == 0 ? Api::plain : Api::packed, o);
    ++index;
  }
}

// The same shapes through the driver on the AMX tables bound to the tile model.
template <typename G, typename Gen>
void run_ragged_model(const detail::WideKernels<G>& table, Gen gen) {
  using In = typename G::AElem;
  using Out = typename G::C;
  const long faults = detail::amx_model_faults();
  int index = 0;
  for (const Shape& s : ragged_shapes(sizeof(In) == 1)) {
    CAPTURE(describe(s));
    Operands<In, Out> ops(s);
    ops.fill(gen);
    int threads = 1 + index % 2;
    if (index / 2 % 2 == 0) {
      detail::run_wide<G>(table, threads, s.m, s.n, s.k, ops.a(), s.lda, ops.b(), s.ldb, nullptr,
                          ops.c(), s.ldc);
    } else {
      std::vector<typename G::PackB> packed(detail::packed_b_bytes_wide<G>(s.k, s.n) /
                                            sizeof(typename G::PackB));
      detail::pack_b_full_wide<G>(table, threads, s.k, s.n, ops.b(), s.ldb, packed.data());
      detail::run_wide<G>(table, threads, s.m, s.n, s.k, ops.a(), s.lda, nullptr, 0, packed.data(),
                          ops.c(), s.ldc);
    }
    GemmCheck check = gate(s, ops.a(), ops.b(), ops.c(), GemmIsa::amx);
    CAPTURE(check.mismatches);
    CAPTURE(check.first_bad_row);
    CAPTURE(check.first_bad_col);
    CHECK(check.passed);
    CHECK(ops.outside_untouched());
    ++index;
  }
  CHECK(detail::amx_model_faults() == faults);
}

} // namespace

TEST_CASE("kernels::gemm_s8 is bit-exact on ragged shapes on every int8 family of this host") {
  Values v(1901);
  for (GemmIsa isa : dtype_paths(GemmDtype::int8)) {
    run_ragged<int8_t, int32_t>(isa, [&] { return v.s8(); });
  }
}

TEST_CASE("kernels::gemm_bf16 and gemm_f32 pass their gates on ragged shapes on every family") {
  Values v(1902);
  for (GemmIsa isa : dtype_paths(GemmDtype::bf16)) {
    run_ragged<bf16_t, float>(isa, [&] { return v.bf16(); });
  }
  for (GemmIsa isa : dtype_paths(GemmDtype::fp32)) {
    run_ragged<float, float>(isa, [&] { return v.f32(); });
  }
}

TEST_CASE("kernels: the AMX int8 path on the tile model is bit-exact on ragged shapes") {
  Values v(1903);
  run_ragged_model<detail::AmxS8>(detail::amx_model_s8_kernels(), [&] { return v.s8(); });
}

TEST_CASE("kernels: the AMX bf16 path on the tile model passes the flushed gate on ragged shapes") {
  Values v(1904);
  run_ragged_model<detail::AmxBf16>(detail::amx_model_bf16_kernels(), [&] { return v.bf16(); });
}

TEST_CASE("kernels: the AMX paths on the tile model cross k-blocks, row blocks and threads") {
  // k = 2101 crosses the 2048-int8 and 1024-bf16 k-blocks (and ends mid tile step); m = 140
  // crosses the 128-row A block; 70 columns leave a ragged 6-column panel.
  Values v(1905);
  for (const Shape& s : {dense(140, 70, 2101), Shape{33, 17, 1100, 1111, 19, 23, 3}}) {
    CAPTURE(describe(s));
    for (int threads : {1, 3}) {
      Operands<int8_t, int32_t> q(s);
      q.fill([&] { return v.s8(); });
      detail::run_wide<detail::AmxS8>(detail::amx_model_s8_kernels(), threads, s.m, s.n, s.k, q.a(),
                                      s.lda, q.b(), s.ldb, nullptr, q.c(), s.ldc);
      CHECK(gate(s, q.a(), q.b(), q.c(), GemmIsa::amx).passed);
      CHECK(q.outside_untouched());
      Operands<bf16_t, float> h(s);
      h.fill([&] { return v.bf16(); });
      detail::run_wide<detail::AmxBf16>(detail::amx_model_bf16_kernels(), threads, s.m, s.n, s.k,
                                        h.a(), s.lda, h.b(), s.ldb, nullptr, h.c(), s.ldc);
      CHECK(gate(s, h.a(), h.b(), h.c(), GemmIsa::amx).passed);
      CHECK(h.outside_untouched());
    }
  }
}

TEST_SUITE_END();
