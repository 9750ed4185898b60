// Seeded operands and Freivalds' check.
//
// Generator. A counter-based generator (in the spirit of Random123's Philox/Threefry, here the
// splitmix64 finalizer) turns a counter into a random word with no state carried from one draw
// to the next: key = mix(mix(seed + matrix * C1) + row * C2) once per row, then element =
// mix(key ^ col * C3). Because an element depends only on its coordinates, a process holding
// rows 64..127 of A computes exactly the values a process holding all of A has there, which is
// what lets every SPMD process generate its own shard and lets the checker regenerate A and B
// row by row without storing them.
//
// Check. Freivalds (1977): for a random vector x, C == A B implies C x == A (B x); a wrong C
// passes only if x happens to be orthogonal to the error. Computing B x (k x n), then A (B x)
// (m x k) and C x (m x n) costs O(mk + kn + mn) rather than the product's O(mnk).
//   int8: all arithmetic modulo 2^64 with odd x_j. C is exact in int32 (|a b| <= 2^14, k < 2^17),
//     and a single wrong element e changes (C x)_i by e x_j != 0 mod 2^64, so it is always caught.
//   fp32/bf16: double arithmetic and a per-row tolerance proportional to r = |A| (|B| |x|), which
//     bounds every rounding the fp32 GEMM may make (see the header for the formula).
#include "agent/seeded_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tpuctl::agent {

namespace {

constexpr uint64_t k_c1 = 0x9E3779B97F4A7C15ull;
constexpr uint64_t k_c2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t k_c3 = 0xD6E8FEB86659FD93ull;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t row_key(uint64_t seed, MatrixId which, uint64_t row) {
  return mix64(mix64(seed + static_cast<uint64_t>(which) * k_c1) + row * k_c2);
}

uint64_t at(uint64_t key, uint64_t col) {
  return mix64(key ^ (col * k_c3));
}

int8_t s8_from(uint64_t h) {
  return static_cast<int8_t>(static_cast<int>(h >> 56) - 128);
}

float f32_from(uint64_t h) {
  auto u = static_cast<int32_t>(h >> 40); // 24 bits
  return static_cast<float>(u - (1 << 23)) * (1.0f / static_cast<float>(1 << 23));
}

// x for the float checks: +-[1, 2), so an error e in C moves (C x)_i by at least |e|.
double x_from(uint64_t h) {
  double mag = 1.0 + static_cast<double>((h >> 40) & 0x7FFFFF) / static_cast<double>(1 << 23);
  return (h >> 63) != 0 ? -mag : mag;
}

// The float check, with `element` giving A's and B's values as doubles (exact).
template <typename Element>
ChecksumResult check_float(uint64_t seed, int m, int n, int k, const float* c, int ldc,
                           Element element) {
  std::vector<double> x(static_cast<size_t>(n)), ax(static_cast<size_t>(n));
  uint64_t xkey = row_key(seed, MatrixId::x, 0);
  for (int j = 0; j < n; ++j) {
    x[j] = x_from(at(xkey, static_cast<uint64_t>(j)));
    ax[j] = std::fabs(x[j]);
  }
  std::vector<double> y(static_cast<size_t>(k)), ya(static_cast<size_t>(k));
  for (int kk = 0; kk < k; ++kk) {
    uint64_t key = row_key(seed, MatrixId::b, static_cast<uint64_t>(kk));
    double s = 0, sa = 0;
    for (int j = 0; j < n; ++j) {
      double b = element(at(key, static_cast<uint64_t>(j)));
      s += b * x[j];
      sa += std::fabs(b) * ax[j];
    }
    y[kk] = s;
    ya[kk] = sa;
  }
  const double u32 = std::ldexp(1.0, -24);
  const double u64 = std::ldexp(1.0, -53);
  const double factor = std::min<double>(k, 8.0 * std::sqrt(static_cast<double>(k))) * 1.01 * u32 +
                        2.0 * (static_cast<double>(k) + n + 2) * u64;
  ChecksumResult r;
  for (int i = 0; i < m; ++i) {
    uint64_t key = row_key(seed, MatrixId::a, static_cast<uint64_t>(i));
    double z = 0, ra = 0;
    for (int kk = 0; kk < k; ++kk) {
      double a = element(at(key, static_cast<uint64_t>(kk)));
      z += a * y[kk];
      ra += std::fabs(a) * ya[kk];
    }
    double w = 0;
    const float* row = c + static_cast<size_t>(i) * static_cast<size_t>(ldc);
    for (int j = 0; j < n; ++j) {
      w += static_cast<double>(row[j]) * x[j];
    }
    double tol = factor * ra;
    double diff = std::fabs(w - z);
    bool good = diff <= tol; // false for NaN
    double ratio = tol > 0 ? diff / tol : (diff == 0 ? 0 : INFINITY);
    if (!good) {
      ratio = std::isnan(diff) ? INFINITY : ratio;
      ++r.bad_rows;
      if (r.first_bad < 0) {
        r.first_bad = i;
      }
    }
    r.worst_ratio = std::max(r.worst_ratio, ratio);
  }
  r.ok = r.bad_rows == 0;
  return r;
}

} // namespace

uint64_t element_hash(uint64_t seed, MatrixId which, uint64_t row, uint64_t col) {
  return at(row_key(seed, which, row), col);
}

int8_t s8_element(uint64_t seed, MatrixId which, uint64_t row, uint64_t col) {
  return s8_from(element_hash(seed, which, row, col));
}

float f32_element(uint64_t seed, MatrixId which, uint64_t row, uint64_t col) {
  return f32_from(element_hash(seed, which, row, col));
}

kernels::bf16_t bf16_element(uint64_t seed, MatrixId which, uint64_t row, uint64_t col) {
  return kernels::fp32_to_bf16(f32_element(seed, which, row, col));
}

void fill_block_s8(uint64_t seed, MatrixId which, int row0, int col0, int rows, int cols,
                   int8_t* out) {
  for (int i = 0; i < rows; ++i) {
    uint64_t key = row_key(seed, which, static_cast<uint64_t>(row0 + i));
    int8_t* dst = out + static_cast<size_t>(i) * static_cast<size_t>(cols);
    for (int j = 0; j < cols; ++j) {
      dst[j] = s8_from(at(key, static_cast<uint64_t>(col0 + j)));
    }
  }
}

void fill_block_f32(uint64_t seed, MatrixId which, int row0, int col0, int rows, int cols,
                    float* out) {
  for (int i = 0; i < rows; ++i) {
    uint64_t key = row_key(seed, which, static_cast<uint64_t>(row0 + i));
    float* dst = out + static_cast<size_t>(i) * static_cast<size_t>(cols);
    for (int j = 0; j < cols; ++j) {
      dst[j] = f32_from(at(key, static_cast<uint64_t>(col0 + j)));
    }
  }
}

void fill_block_bf16(uint64_t seed, MatrixId which, int row0, int col0, int rows, int cols,
                     kernels::bf16_t* out) {
  for (int i = 0; i < rows; ++i) {
    uint64_t key = row_key(seed, which, static_cast<uint64_t>(row0 + i));
    kernels::bf16_t* dst = out + static_cast<size_t>(i) * static_cast<size_t>(cols);
    for (int j = 0; j < cols; ++j) {
      dst[j] = kernels::fp32_to_bf16(f32_from(at(key, static_cast<uint64_t>(col0 + j))));
    }
  }
}

ChecksumResult freivalds_check_s8(uint64_t seed, int m, int n, int k, const int32_t* c, int ldc) {
  auto wide = [](int64_t v) { return static_cast<uint64_t>(v); }; // sign-extended, mod 2^64
  std::vector<uint64_t> x(static_cast<size_t>(n));
  uint64_t xkey = row_key(seed, MatrixId::x, 0);
  for (int j = 0; j < n; ++j) {
    x[j] = at(xkey, static_cast<uint64_t>(j)) | 1u;
  }
  std::vector<uint64_t> y(static_cast<size_t>(k));
  for (int kk = 0; kk < k; ++kk) {
    uint64_t key = row_key(seed, MatrixId::b, static_cast<uint64_t>(kk));
    uint64_t s = 0;
    for (int j = 0; j < n; ++j) {
      s += wide(s8_from(at(key, static_cast<uint64_t>(j)))) * x[j];
    }
    y[kk] = s;
  }
  ChecksumResult r;
  for (int i = 0; i < m; ++i) {
    uint64_t key = row_key(seed, MatrixId::a, static_cast<uint64_t>(i));
    uint64_t z = 0;
    for (int kk = 0; kk < k; ++kk) {
      z += wide(s8_from(at(key, static_cast<uint64_t>(kk)))) * y[kk];
    }
    uint64_t w = 0;
    const int32_t* row = c + static_cast<size_t>(i) * static_cast<size_t>(ldc);
    for (int j = 0; j < n; ++j) {
      w += wide(row[j]) * x[j];
    }
    if (w != z) {
      ++r.bad_rows;
      if (r.first_bad < 0) {
        r.first_bad = i;
      }
    }
  }
  r.ok = r.bad_rows == 0;
  r.worst_ratio = r.ok ? 0 : 1;
  return r;
}

ChecksumResult freivalds_check_f32(uint64_t seed, int m, int n, int k, const float* c, int ldc) {
  return check_float(seed, m, n, k, c, ldc,
                     [](uint64_t h) { return static_cast<double>(f32_from(h)); });
}

ChecksumResult freivalds_check_bf16(uint64_t seed, int m, int n, int k, const float* c, int ldc) {
  return check_float(seed, m, n, k, c, ldc, [](uint64_t h) {
    return static_cast<double>(kernels::bf16_to_fp32(kernels::fp32_to_bf16(f32_from(h))));
  });
}

} // namespace tpuctl::agent
