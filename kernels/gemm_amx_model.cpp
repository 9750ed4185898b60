// The AMX tables bound to the tile model (gemm_amx_model.hpp): the tile program, the packers
// and the blocking of the AMX paths, run on any host, so tests check everything but the
// intrinsic binding of gemm_amx.cpp.
#include "kernels/gemm_amx_model.hpp"

#include <atomic>

namespace tpuctl::kernels::detail {

namespace {

std::atomic<long> g_faults{0};

} // namespace

void amx::count_model_fault() {
  g_faults.fetch_add(1, std::memory_order_relaxed);
}

long amx_model_faults() {
  return g_faults.load(std::memory_order_relaxed);
}

const WideKernels<AmxS8>& amx_model_s8_kernels() {
  static const WideKernels<AmxS8> k_table = {amx::kernel<amx::TileModel, AmxS8, amx::DotS8>,
                                             amx::pack_a_s8, amx::pack_b_s8, nullptr};
  return k_table;
}

const WideKernels<AmxBf16>& amx_model_bf16_kernels() {
  static const WideKernels<AmxBf16> k_table = {amx::kernel<amx::TileModel, AmxBf16, amx::DotBf16>,
                                               amx::pack_a_bf16, amx::pack_b_bf16, nullptr};
  return k_table;
}

} // namespace tpuctl::kernels::detail
