// Internal to kernels/: the probe loops of peak_probe.cpp that live in their own files.
// Each runs `iterations` rounds of independent register-only chains; the caller has checked
// that the CPU has the instructions (and, for AMX, that Linux granted the tile permission).
#pragma once

namespace tpuctl::kernels::detail {

void zmm_fma_loop(long iterations);  // AVX-512F: 12 vfmadd231ps
void zmm_bf16_loop(long iterations); // AVX-512 BF16: 12 vdpbf16ps
void zmm_vnni_loop(long iterations); // AVX-512 VNNI: 12 vpdpbusd
void amx_int8_loop(long iterations); // AMX: 4 tdpbssd on tmm0-3 (gemm_amx.cpp)
void amx_bf16_loop(long iterations); // AMX: 4 tdpbf16ps on tmm0-3 (gemm_amx.cpp)

} // namespace tpuctl::kernels::detail
