// The preflight's kernel check: a 64x64x64 int8 GEMM through the fast kernels (the ones a
// workload on this host would use), compared element by element with the naive reference.
// The inputs come from a fixed linear congruential sequence spanning the whole int8 range, so
// extreme values (-128 * -128) are exercised and every run checks the same problem.
#include <cstdint>
#include <vector>

#include "agent/preflight.hpp"
#include "kernels/gemm.hpp"
#include "kernels/reference_gemm.hpp"

namespace tpuctl::agent {

KernelCheckResult run_kernel_check(bool corrupt) {
  KernelCheckResult r;
  r.ran = true;
  r.m = r.n = r.k = 64;
  kernels::GemmOptions options;
  r.isa = kernels::to_string(kernels::selected_isa(kernels::GemmDtype::int8, options)
                                 .value_or(kernels::GemmIsa::portable));
  std::vector<int8_t> a(static_cast<size_t>(r.m * r.k)), b(static_cast<size_t>(r.k * r.n));
  std::vector<int32_t> c(static_cast<size_t>(r.m * r.n));
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<int8_t>(static_cast<int>(state >> 24) - 128);
  };
  for (auto& x : a) {
    x = next();
  }
  for (auto& x : b) {
    x = next();
  }
  Status st = kernels::gemm_s8(r.m, r.n, r.k, a.data(), r.k, b.data(), r.n, c.data(), r.n, options);
  if (!st) {
    r.error = st.error().message;
    return r;
  }
  if (corrupt) {
    c[c.size() / 2] += 1;
  }
  auto check = kernels::check_gemm_s8(r.m, r.n, r.k, a.data(), r.k, b.data(), r.n, c.data(), r.n);
  r.mismatches = check.mismatches;
  r.ok = check.passed;
  return r;
}

} // namespace tpuctl::agent
