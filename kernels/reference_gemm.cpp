#include "kernels/reference_gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace tpuctl::kernels {

void reference_gemm_s8(int m, int n, int k, const int8_t* a, int lda, const int8_t* b, int ldb,
                       int32_t* c, int ldc) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int p = 0; p < k; ++p) {
        acc += static_cast<int64_t>(a[static_cast<long>(i) * lda + p]) *
               static_cast<int64_t>(b[static_cast<long>(p) * ldb + j]);
      }
      // Two's-complement narrowing, well defined through uint32_t.
      c[static_cast<long>(i) * ldc + j] = static_cast<int32_t>(static_cast<uint32_t>(acc));
    }
  }
}

namespace {

template <typename T, typename ToDouble>
void reference_f64(int m, int n, int k, const T* a, int lda, const T* b, int ldb, double* c,
                   int ldc, ToDouble to_double) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int p = 0; p < k; ++p) {
        acc += to_double(a[static_cast<long>(i) * lda + p]) *
               to_double(b[static_cast<long>(p) * ldb + j]);
      }
      c[static_cast<long>(i) * ldc + j] = acc;
    }
  }
}

// `slack`: an absolute term added to every bound (the flushes of a DAZ/FTZ path).
template <typename T, typename ToDouble>
GemmCheck check_against_gamma(int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                              const float* c, int ldc, ToDouble to_double, double slack = 0) {
  GemmCheck out;
  const double u = std::ldexp(1.0, -24);
  const double ku = static_cast<double>(k) * u;
  const double gamma = ku < 1 ? ku / (1 - ku) : INFINITY;
  std::vector<double> ref(static_cast<size_t>(m) * static_cast<size_t>(n));
  std::vector<double> absab(ref.size());
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        double x = to_double(a[static_cast<long>(i) * lda + p]);
        double y = to_double(b[static_cast<long>(p) * ldb + j]);
        acc += x * y;
        mag += std::fabs(x) * std::fabs(y);
      }
      ref[static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(j)] = acc;
      absab[static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(j)] = mag;
    }
  }
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      size_t idx = static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(j);
      double want = ref[idx];
      double got = c[static_cast<long>(i) * ldc + j];
      bool bad = false;
      double err = 0;
      if (!std::isfinite(want) || !std::isfinite(got)) {
        bool same_class =
            (std::isnan(want) && std::isnan(got)) ||
            (std::isinf(want) && std::isinf(got) && std::signbit(want) == std::signbit(got));
        // A finite exact sum can overflow fp32 legitimately; accept inf when |ref| > FLT_MAX.
        bool overflow_ok = std::isfinite(want) && std::isinf(got) &&
                           std::fabs(want) > 3.4028234663852886e38 * (1 - gamma) &&
                           std::signbit(want) == std::signbit(got);
        bad = !(same_class || overflow_ok);
      } else {
        err = std::fabs(got - want);
        double bound = gamma * absab[idx] + slack;
        if (err > bound) {
          bad = true;
        }
        if (bound > 0) {
          out.worst_bound_ratio = std::max(out.worst_bound_ratio, err / bound);
        } else if (err > 0) {
          out.worst_bound_ratio = INFINITY;
        }
        out.max_abs_error = std::max(out.max_abs_error, err);
      }
      if (bad) {
        if (out.mismatches == 0) {
          out.first_bad_row = i;
          out.first_bad_col = j;
        }
        ++out.mismatches;
        out.passed = false;
      }
    }
  }
  return out;
}

} // namespace

void reference_gemm_bf16_f64(int m, int n, int k, const bf16_t* a, int lda, const bf16_t* b,
                             int ldb, double* c, int ldc) {
  reference_f64(m, n, k, a, lda, b, ldb, c, ldc,
                [](bf16_t v) { return static_cast<double>(bf16_to_fp32(v)); });
}

void reference_gemm_f32_f64(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                            double* c, int ldc) {
  reference_f64(m, n, k, a, lda, b, ldb, c, ldc, [](float v) { return static_cast<double>(v); });
}

GemmCheck check_gemm_s8(int m, int n, int k, const int8_t* a, int lda, const int8_t* b, int ldb,
                        const int32_t* c, int ldc) {
  GemmCheck out;
  std::vector<int32_t> ref(static_cast<size_t>(m) * static_cast<size_t>(n));
  reference_gemm_s8(m, n, k, a, lda, b, ldb, ref.data(), n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      int64_t want = ref[static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(j)];
      int64_t got = c[static_cast<long>(i) * ldc + j];
      if (want != got) {
        if (out.mismatches == 0) {
          out.first_bad_row = i;
          out.first_bad_col = j;
        }
        ++out.mismatches;
        out.passed = false;
        out.max_abs_error =
            std::max(out.max_abs_error, static_cast<double>(std::llabs(want - got)));
        out.worst_bound_ratio = INFINITY;
      }
    }
  }
  return out;
}

GemmCheck check_gemm_bf16(int m, int n, int k, const bf16_t* a, int lda, const bf16_t* b, int ldb,
                          const float* c, int ldc, Subnormals subnormals) {
  if (subnormals == Subnormals::flushed) {
    // Subnormal inputs are zero; each of the at most 2k + 2 rounding steps of an output may
    // flush a subnormal result, an error below 2^-126 each.
    return check_against_gamma(
        m, n, k, a, lda, b, ldb, c, ldc,
        [](bf16_t v) {
          double x = bf16_to_fp32(v);
          return std::fabs(x) < std::ldexp(1.0, -126) ? 0.0 : x;
        },
        (2.0 * k + 2) * std::ldexp(1.0, -126));
  }
  return check_against_gamma(m, n, k, a, lda, b, ldb, c, ldc,
                             [](bf16_t v) { return static_cast<double>(bf16_to_fp32(v)); });
}

GemmCheck check_gemm_f32(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                         const float* c, int ldc) {
  return check_against_gamma(m, n, k, a, lda, b, ldb, c, ldc,
                             [](float v) { return static_cast<double>(v); });
}

} // namespace tpuctl::kernels
