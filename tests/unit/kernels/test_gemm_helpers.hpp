// Shared by the GEMM unit tests: random shapes with padded leading dimensions and misaligned
// bases, one call per (dtype, API) through the public functions, and the reference gates.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kernels/gemm.hpp"
#include "kernels/reference_gemm.hpp"

namespace tpuctl::test::gemm {

using kernels::bf16_t;
using kernels::GemmCheck;
using kernels::GemmOptions;

enum class Api { plain, packed };

template <typename In>
constexpr kernels::GemmDtype dtype_of() {
  return sizeof(In) == 1 ? kernels::GemmDtype::int8
                         : (sizeof(In) == 2 ? kernels::GemmDtype::bf16 : kernels::GemmDtype::fp32);
}

inline const char* to_string(Api api) {
  return api == Api::plain ? "plain" : "packed";
}

// Random operand values: fp32 in [-1, 1], bf16 rounded from [-4, 4], full-range int8.
struct Values {
  std::mt19937 rng;
  explicit Values(unsigned seed) : rng(seed) {}
  float f32() { return std::uniform_real_distribution<float>(-1, 1)(rng); }
  bf16_t bf16() { return kernels::fp32_to_bf16(std::uniform_real_distribution<float>(-4, 4)(rng)); }
  int8_t s8() { return static_cast<int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng)); }
};

struct Shape {
  int m = 1, n = 1, k = 1;
  int lda = 1, ldb = 1, ldc = 1;
  int offset = 0; // elements before each base pointer (misaligns it)
};

inline std::string describe(const Shape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
         " lda=" + std::to_string(s.lda) + " ldb=" + std::to_string(s.ldb) +
         " ldc=" + std::to_string(s.ldc) + " offset=" + std::to_string(s.offset);
}

// Tight leading dimensions, no offset.
inline Shape dense(int m, int n, int k) {
  return Shape{m, n, k, k, n, n, 0};
}

// Sizes in [1, max_dim] (k sometimes 0), leading dimensions up to 5 larger, offset 0..3.
inline Shape random_shape(std::mt19937& rng, int max_dim) {
  std::uniform_int_distribution<int> dim(1, max_dim), pad(0, 5), off(0, 3), zero_k(0, 19);
  Shape s;
  s.m = dim(rng);
  s.n = dim(rng);
  s.k = zero_k(rng) == 0 ? 0 : dim(rng);
  s.lda = s.k + pad(rng);
  s.ldb = s.n + pad(rng);
  s.ldc = s.n + pad(rng);
  s.offset = off(rng);
  return s;
}

inline float sentinel(float) {
  return -12345.5f;
}
inline int32_t sentinel(int32_t) {
  return 0x5eed5eed;
}

// Operands stored with `offset` spare elements in front and leading-dimension padding.
template <typename In, typename Out>
struct Operands {
  Shape s;
  std::vector<In> a_store, b_store;
  std::vector<Out> c_store;
  In* a() { return a_store.data() + s.offset; }
  In* b() { return b_store.data() + s.offset; }
  Out* c() { return c_store.data() + s.offset; }

  // Each buffer ends right after its last element (the last row is not padded to ld), so an
  // out-of-bounds read or write shows up under AddressSanitizer.
  explicit Operands(const Shape& shape) : s(shape) {
    a_store.assign(tight(s.m, s.k, s.lda), In{});
    b_store.assign(tight(s.k, s.n, s.ldb), In{});
    c_store.assign(tight(s.m, s.n, s.ldc), sentinel(Out{}));
  }
  size_t tight(int rows, int cols, int ld) const {
    long used = rows > 0 && cols > 0 ? static_cast<long>(rows - 1) * ld + cols : 0;
    return static_cast<size_t>(s.offset + std::max(used, 1L));
  }
  In& a_at(int i, int p) { return a()[static_cast<long>(i) * s.lda + p]; }
  In& b_at(int p, int j) { return b()[static_cast<long>(p) * s.ldb + j]; }
  Out& c_at(int i, int j) { return c()[static_cast<long>(i) * s.ldc + j]; }

  template <typename Gen>
  void fill(Gen gen) {
    for (int i = 0; i < s.m; ++i) {
      for (int p = 0; p < s.k; ++p) {
        a_at(i, p) = gen();
      }
    }
    for (int p = 0; p < s.k; ++p) {
      for (int j = 0; j < s.n; ++j) {
        b_at(p, j) = gen();
      }
    }
  }

  // True when no element outside the m x n result (padding, spare front, end) was written.
  bool outside_untouched() const {
    Out sent = sentinel(Out{});
    for (size_t idx = 0; idx < c_store.size(); ++idx) {
      long rel = static_cast<long>(idx) - s.offset;
      bool inside = rel >= 0 && rel < static_cast<long>(s.m) * s.ldc && rel % s.ldc < s.n;
      if (!inside && std::memcmp(&c_store[idx], &sent, sizeof(Out)) != 0) {
        return false;
      }
    }
    return true;
  }
};

inline Status multiply(Api api, const Shape& s, const float* a, const float* b, float* c,
                       const GemmOptions& o) {
  if (api == Api::plain) {
    return kernels::gemm_f32(s.m, s.n, s.k, a, s.lda, b, s.ldb, c, s.ldc, o);
  }
  auto packed = kernels::pack_b_f32(s.k, s.n, b, s.ldb, o);
  if (!packed) {
    return packed.error();
  }
  return kernels::gemm_f32_packed(s.m, a, s.lda, *packed, c, s.ldc, o);
}

inline Status multiply(Api api, const Shape& s, const bf16_t* a, const bf16_t* b, float* c,
                       const GemmOptions& o) {
  if (api == Api::plain) {
    return kernels::gemm_bf16(s.m, s.n, s.k, a, s.lda, b, s.ldb, c, s.ldc, o);
  }
  auto packed = kernels::pack_b_bf16(s.k, s.n, b, s.ldb, o);
  if (!packed) {
    return packed.error();
  }
  return kernels::gemm_bf16_packed(s.m, a, s.lda, *packed, c, s.ldc, o);
}

inline Status multiply(Api api, const Shape& s, const int8_t* a, const int8_t* b, int32_t* c,
                       const GemmOptions& o) {
  if (api == Api::plain) {
    return kernels::gemm_s8(s.m, s.n, s.k, a, s.lda, b, s.ldb, c, s.ldc, o);
  }
  auto packed = kernels::pack_b_s8(s.k, s.n, b, s.ldb, o);
  if (!packed) {
    return packed.error();
  }
  return kernels::gemm_s8_packed(s.m, a, s.lda, *packed, c, s.ldc, o);
}

// The gate of the dtype for a result of kernel family `isa` (bf16: its subnormal policy).
inline GemmCheck gate(const Shape& s, const float* a, const float* b, const float* c,
                      kernels::GemmIsa) {
  return kernels::check_gemm_f32(s.m, s.n, s.k, a, s.lda, b, s.ldb, c, s.ldc);
}
inline GemmCheck gate(const Shape& s, const bf16_t* a, const bf16_t* b, const float* c,
                      kernels::GemmIsa isa) {
  return kernels::check_gemm_bf16(s.m, s.n, s.k, a, s.lda, b, s.ldb, c, s.ldc,
                                  kernels::bf16_subnormals(isa));
}
inline GemmCheck gate(const Shape& s, const int8_t* a, const int8_t* b, const int32_t* c,
                      kernels::GemmIsa) {
  return kernels::check_gemm_s8(s.m, s.n, s.k, a, s.lda, b, s.ldb, c, s.ldc);
}

// Multiplies through the public API and checks the result with the shared gate and that
// nothing outside C's m x n elements was written.
template <typename In, typename Out>
void expect_correct(Operands<In, Out>& ops, Api api, const GemmOptions& o) {
  CAPTURE(describe(ops.s));
  CAPTURE(std::string(to_string(api)));
  CAPTURE(o.threads);
  CAPTURE(std::string(kernels::to_string(o.isa)));
  Status st = multiply(api, ops.s, ops.a(), ops.b(), ops.c(), o);
  REQUIRE(st.has_value());
  GemmCheck check =
      gate(ops.s, ops.a(), ops.b(), ops.c(), kernels::selected_isa(dtype_of<In>(), o).value());
  CAPTURE(check.mismatches);
  CAPTURE(check.first_bad_row);
  CAPTURE(check.first_bad_col);
  CAPTURE(check.max_abs_error);
  CHECK(check.passed);
  CHECK(ops.outside_untouched());
}

// The kernel families this host runs `dtype` on, each once (forced through GemmOptions::isa,
// the switch of `tpuctl kernel run --isa`): e.g. portable, avx2, avx512-vnni for int8 here.
inline std::vector<kernels::GemmIsa> dtype_paths(kernels::GemmDtype dtype) {
  std::vector<kernels::GemmIsa> out;
  for (kernels::GemmIsa cap : kernels::host_isas()) {
    GemmOptions o;
    o.isa = cap;
    kernels::GemmIsa isa = kernels::selected_isa(dtype, o).value();
    if (std::find(out.begin(), out.end(), isa) == out.end()) {
      out.push_back(isa);
    }
  }
  return out;
}

// The option sets every property of an `In` GEMM runs under: each of its kernel families on
// this host, 1 and 2 threads.
template <typename In>
std::vector<GemmOptions> option_sets() {
  std::vector<GemmOptions> sets;
  for (kernels::GemmIsa isa : dtype_paths(dtype_of<In>())) {
    for (int threads : {1, 2}) {
      GemmOptions o;
      o.threads = threads;
      o.isa = isa;
      sets.push_back(o);
    }
  }
  return sets;
}

} // namespace tpuctl::test::gemm
