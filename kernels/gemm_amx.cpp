// The AMX binding (this file alone is compiled with -mamx-tile -mamx-int8 -mamx-bf16 and the
// AVX-512 flags; gemm.cpp reaches it only when cpu_features().amx, i.e. after Linux granted
// the tile-data permission): the tile program of gemm_amx_program.hpp on the tile registers,
// and the AMX peak probe loops. Each kernel call loads the tile configuration on the calling
// thread and releases the tiles at its end (tile state is per thread; amx.md section 3), so
// every worker thread configures its own tiles and no tile state outlives a call.
#include "kernels/gemm_amx_program.hpp"
#include "kernels/peak_probe_loops.hpp"

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AMX_BF16__)

#include <immintrin.h>

namespace tpuctl::kernels::detail {

namespace {

// GCC's tile intrinsics are macros that paste the tile number into the instruction text, so
// each use is spelled out with literal numbers (the ones the program uses).
struct HardwareTiles {
  void configure(const amx::TileConfig& cfg) { _tile_loadconfig(&cfg); }
  template <int T>
  void zero();
  template <int T>
  void load(const void* p, long stride);
  template <int T>
  void store(void* p, long stride);
  template <int C, int A, int B>
  void dpbssd();
  template <int C, int A, int B>
  void dpbf16ps();
  void release() { _tile_release(); }
};

#define TPUCTL_C_TILE(T)                                                                           \
  template <>                                                                                      \
  void HardwareTiles::zero<T>() {                                                                  \
    _tile_zero(T);                                                                                 \
  }                                                                                                \
  template <>                                                                                      \
  void HardwareTiles::store<T>(void* p, long stride) {                                             \
    _tile_stored(T, p, stride);                                                                    \
  }
#define TPUCTL_OPERAND_TILE(T)                                                                     \
  template <>                                                                                      \
  void HardwareTiles::load<T>(const void* p, long stride) {                                        \
    _tile_loadd(T, p, stride);                                                                     \
  }
TPUCTL_C_TILE(0)
TPUCTL_C_TILE(1)
TPUCTL_C_TILE(2)
TPUCTL_C_TILE(3)
TPUCTL_OPERAND_TILE(4)
TPUCTL_OPERAND_TILE(5)
TPUCTL_OPERAND_TILE(6)
TPUCTL_OPERAND_TILE(7)
#undef TPUCTL_C_TILE
#undef TPUCTL_OPERAND_TILE

#define TPUCTL_DOT(C, A, B)                                                                        \
  template <>                                                                                      \
  void HardwareTiles::dpbssd<C, A, B>() {                                                          \
    _tile_dpbssd(C, A, B);                                                                         \
  }                                                                                                \
  template <>                                                                                      \
  void HardwareTiles::dpbf16ps<C, A, B>() {                                                        \
    _tile_dpbf16ps(C, A, B);                                                                       \
  }
TPUCTL_DOT(0, 4, 6)
TPUCTL_DOT(1, 4, 7)
TPUCTL_DOT(2, 5, 6)
TPUCTL_DOT(3, 5, 7)
#undef TPUCTL_DOT

// Operand tiles for the probes: any values (zeros) give the same timing.
alignas(64) char g_zeros[16 * 64] = {};

template <typename Dot>
void probe_loop(long iterations, Dot dot) {
  HardwareTiles t;
  t.configure(amx::full_config());
  t.zero<0>();
  t.zero<1>();
  t.zero<2>();
  t.zero<3>();
  t.load<4>(g_zeros, 64);
  t.load<5>(g_zeros, 64);
  t.load<6>(g_zeros, 64);
  t.load<7>(g_zeros, 64);
  for (long i = 0; i < iterations; ++i) {
    dot.template run<0, 4, 6>(t);
    dot.template run<1, 4, 7>(t);
    dot.template run<2, 5, 6>(t);
    dot.template run<3, 5, 7>(t);
  }
  t.release();
}

} // namespace

const WideKernels<AmxS8>* amx_s8_kernels() {
  static const WideKernels<AmxS8> k_table = {amx::kernel<HardwareTiles, AmxS8, amx::DotS8>,
                                             amx::pack_a_s8, amx::pack_b_s8, nullptr};
  return &k_table;
}

const WideKernels<AmxBf16>* amx_bf16_kernels() {
  static const WideKernels<AmxBf16> k_table = {amx::kernel<HardwareTiles, AmxBf16, amx::DotBf16>,
                                               amx::pack_a_bf16, amx::pack_b_bf16, nullptr};
  return &k_table;
}

void amx_int8_loop(long iterations) {
  probe_loop(iterations, amx::DotS8{});
}

void amx_bf16_loop(long iterations) {
  probe_loop(iterations, amx::DotBf16{});
}

} // namespace tpuctl::kernels::detail

#else // a build without AMX code (not x86-64)

namespace tpuctl::kernels::detail {
const WideKernels<AmxS8>* amx_s8_kernels() {
  return nullptr;
}
const WideKernels<AmxBf16>* amx_bf16_kernels() {
  return nullptr;
}
void amx_int8_loop(long) {}
void amx_bf16_loop(long) {}
} // namespace tpuctl::kernels::detail

#endif
