// Internal to kernels/: the probe loops of peak_probe.cpp that live in their own files.
// Each runs `iterations` rounds of 12 independent register-only chains; the caller has checked
// that the CPU has the instructions.
#pragma once

namespace tpuctl::kernels::detail {

void zmm_fma_loop(long iterations);  // AVX-512F
void zmm_bf16_loop(long iterations); // AVX-512 BF16
void zmm_vnni_loop(long iterations); // AVX-512 VNNI

} // namespace tpuctl::kernels::detail
