// The plain C++ model of the AMX tile instructions the kernels use (Intel SDM; amx.md section
// 3). gemm_amx_model.cpp binds the tile program of gemm_amx_program.hpp to it; tests also use it
// directly. Baseline C++: it never runs a tile instruction.
//
// The model keeps eight tiles of 16 rows x 64 bytes and the loaded configuration, and checks what
// the hardware checks: palette 1, each tile within 16 rows x 64 bytes, and for a dot product
// rows(C) = rows(A), colsb(C) = colsb(B), colsb(A) / 4 = rows(B), three distinct tiles. A
// violation (a #GP or #UD on hardware) is counted in amx_model_faults() (gemm_wide.hpp) and the
// instruction does nothing.
//   TDPBSSD   C[m][n] += sum over k < colsb(A)/4, i < 4 of A[m][4k+i] * B[k][4n+i], signed
//             bytes, exact products, 32-bit wrap-around sums.
//   TDPBF16PS two fp32 partial sums per output from zero, of the even and of the odd members
//             of each bf16 pair over the instruction's k, added together, then added to C;
//             every addition rounds to nearest even, inputs are read with DAZ and results
//             flushed with FTZ (amx.md's reading of the SDM pseudocode). bf16 x bf16 products
//             are exact in fp32 but for underflow.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/bf16.hpp"
#include "kernels/gemm_amx_program.hpp"

namespace tpuctl::kernels::detail::amx {

// Counts one refused instruction (gemm_amx_model.cpp).
void count_model_fault();

inline float flush(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

class TileModel {
public:
  void configure(const TileConfig& cfg) {
    bool valid = cfg.palette == 1;
    for (int t = 0; t < 8; ++t) {
      valid = valid && cfg.rows[t] <= 16 && cfg.colsb[t] <= 64;
    }
    if (!valid) {
      fault();
      return;
    }
    m_cfg = cfg;
    std::memset(m_data, 0, sizeof m_data);
  }
  template <int T>
  void zero() {
    std::memset(m_data[T], 0, sizeof m_data[T]);
  }
  template <int T>
  void load(const void* p, long stride) {
    zero<T>();
    for (int r = 0; r < m_cfg.rows[T]; ++r) {
      std::memcpy(m_data[T][r], static_cast<const char*>(p) + r * stride, m_cfg.colsb[T]);
    }
  }
  template <int T>
  void store(void* p, long stride) const {
    for (int r = 0; r < m_cfg.rows[T]; ++r) {
      std::memcpy(static_cast<char*>(p) + r * stride, m_data[T][r], m_cfg.colsb[T]);
    }
  }
  template <int C, int A, int B>
  void dpbssd() {
    if (!shapes_ok(C, A, B)) {
      return;
    }
    for (int m = 0; m < m_cfg.rows[C]; ++m) {
      for (int n = 0; n < m_cfg.colsb[C] / 4; ++n) {
        uint32_t acc = static_cast<uint32_t>(word<int32_t>(C, m, n));
        for (int k = 0; k < m_cfg.colsb[A] / 4; ++k) {
          for (int i = 0; i < 4; ++i) {
            int32_t x = static_cast<int8_t>(m_data[A][m][4 * k + i]);
            int32_t y = static_cast<int8_t>(m_data[B][k][4 * n + i]);
            acc += static_cast<uint32_t>(x * y);
          }
        }
        set_word(C, m, n, static_cast<int32_t>(acc));
      }
    }
  }
  template <int C, int A, int B>
  void dpbf16ps() {
    if (!shapes_ok(C, A, B)) {
      return;
    }
    for (int m = 0; m < m_cfg.rows[C]; ++m) {
      for (int n = 0; n < m_cfg.colsb[C] / 4; ++n) {
        float even = 0.0f, odd = 0.0f;
        for (int k = 0; k < m_cfg.colsb[A] / 4; ++k) {
          even = flush(even + flush(bf16(A, m, 2 * k) * bf16(B, k, 2 * n)));
          odd = flush(odd + flush(bf16(A, m, 2 * k + 1) * bf16(B, k, 2 * n + 1)));
        }
        set_word(C, m, n, flush(word<float>(C, m, n) + flush(even + odd)));
      }
    }
  }
  void release() { m_cfg = TileConfig{}; }

private:
  static void fault() { count_model_fault(); }

  bool shapes_ok(int c, int a, int b) const {
    bool ok = m_cfg.palette == 1 && c != a && c != b && a != b && m_cfg.rows[c] == m_cfg.rows[a] &&
              m_cfg.colsb[c] == m_cfg.colsb[b] && m_cfg.colsb[a] / 4 == m_cfg.rows[b] &&
              m_cfg.rows[c] > 0 && m_cfg.colsb[c] > 0;
    if (!ok) {
      fault();
    }
    return ok;
  }
  template <typename T>
  T word(int t, int r, int i) const {
    T v;
    std::memcpy(&v, &m_data[t][r][4 * i], 4);
    return v;
  }
  template <typename T>
  void set_word(int t, int r, int i, T v) {
    std::memcpy(&m_data[t][r][4 * i], &v, 4);
  }
  // Element e (a bf16) of row r of tile t, as fp32 with DAZ.
  float bf16(int t, int r, int e) const {
    uint16_t bits;
    std::memcpy(&bits, &m_data[t][r][2 * e], 2);
    return flush(bf16_to_fp32(bits));
  }

  TileConfig m_cfg;
  unsigned char m_data[8][16][64] = {};
};

} // namespace tpuctl::kernels::detail::amx
