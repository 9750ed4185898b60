// What this CPU and OS let the GEMM use, read once per process from CPUID and XCR0 (amx.md
// section 1), plus the Linux AMX tile-data permission (section 2). The compilers' builtins are
// not enough: GCC's __builtin_cpu_supports("amx-int8") is true in a process whose first tile
// instruction still traps (the permission is separate), and Clang 14 knows no AMX names.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tpuctl::kernels {

struct CpuFeatures {
  bool avx2_fma = false;    // AVX2 and FMA, with the OS saving ymm state
  bool avx512 = false;      // AVX-512 F, BW, VL and DQ, with the OS saving zmm and opmask state
  bool avx512_bf16 = false; // avx512 plus AVX512_BF16 (vdpbf16ps)
  bool avx512_vnni = false; // avx512 plus AVX512_VNNI (vpdpbusd)
  bool amx = false; // AMX-TILE, INT8 and BF16 in CPUID, tile state in XCR0 and the palette of
                    // 8 tiles of 16 x 64 bytes; and this process may use tile data (amx_status)
  // The units this CPU announces (CPUID) that the GEMM will not use, each with why: "amx" with
  // amx_status().reason (a refused permission, say), or a family whose instruction died of a
  // signal when tried (see detail::fault_signal). Those units are false above.
  std::vector<std::pair<std::string, std::string>> refused; // {family, reason}
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
// ARCH_GET_XCOMP_PERM must show bit 18), then runs tdpbssd and tdpbf16ps once in a child
// (detail::fault_signal). The permission holds for every thread of the process.
// Never fails: a refusal is a value, for callers to log.
const AmxStatus& amx_status();

namespace detail {
// Runs `loop(1)` once in a child process (fork), with the default action for SIGILL, SIGSEGV,
// SIGBUS and SIGFPE and no core dump, and returns the signal that killed it: 0 when it ran, -1
// when it could not be tried (fork refused, the child reaped by someone else). A hypervisor may
// announce a unit in CPUID, and let the guest's kernel enable its state, that still faults when
// used; cpu_features() and amx_status() try each extra unit's probe loop this way first.
int fault_signal(void (*loop)(long));
} // namespace detail

} // namespace tpuctl::kernels
