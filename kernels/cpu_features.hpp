// What this CPU and OS let the GEMM use, read once per process from CPUID and XCR0 (amx.md
// section 1), plus the Linux AMX tile-data permission (section 2). The compilers' builtins are
// not enough: GCC's __builtin_cpu_supports("amx-int8") is true in a process whose first tile
// instruction still traps (the permission is separate), and Clang 14 knows no AMX names.
#pragma once

#include <string>

namespace tpuctl::kernels {

struct CpuFeatures {
  bool avx2_fma = false;    // AVX2 and FMA, with the OS saving ymm state
  bool avx512 = false;      // AVX-512 F, BW, VL and DQ, with the OS saving zmm and opmask state
  bool avx512_bf16 = false; // avx512 plus AVX512_BF16 (vdpbf16ps)
  bool avx512_vnni = false; // avx512 plus AVX512_VNNI (vpdpbusd)
  bool amx = false; // AMX-TILE, INT8 and BF16 in CPUID, tile state in XCR0 and the palette of
                    // 8 tiles of 16 x 64 bytes; and this process may use tile data (amx_status)
};

// The features, computed once (thread-safe). AMX is only true after the permission request
// of amx_status() succeeded.
const CpuFeatures& cpu_features();

struct AmxStatus {
  bool usable = false;
  // Why not, when !usable: what CPUID, XCR0, the palette or the kernel said, e.g. "the CPU has no
  // AMX-TILE (CPUID.(7,0):EDX[24])" or "the kernel refused the tile-data permission:
  // arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed with errno 95 (Operation not
  // supported)". Empty when usable.
  std::string reason;
};

// Checks AMX once per process: CPUID bits, XCR0 bits 17 and 18, the 0x1D/0x1E palette leaves,
// then asks Linux for the tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM, then
// ARCH_GET_XCOMP_PERM must show bit 18). The permission holds for every thread of the process.
// Never fails: a refusal is a value, for callers to log.
const AmxStatus& amx_status();

} // namespace tpuctl::kernels
