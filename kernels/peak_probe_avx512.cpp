// The AVX-512 peak probes (peak_probe.hpp): 12 independent zmm chains of one instruction each,
// in inline asm like the AVX2 probes (peak_probe.cpp says why), using zmm0-15 only so that this
// baseline x86-64 file needs no -mavx512 flags: the assembler takes the mnemonics whatever the
// compiler targets, and peak_probe.cpp runs these only after cpu_features() said yes.
//   vfmadd231ps zmm   16 fp32 lanes x 2 flop                      = 32 flop per instruction
//   vdpbf16ps zmm     16 fp32 lanes x 2 bf16 products x 2 flop    = 64 flop
//   vpdpbusd zmm      16 int32 lanes x 4 u8*s8 products x 2 ops   = 128 ops
#include <cstdint>

#include "kernels/peak_probe_loops.hpp"

namespace tpuctl::kernels::detail {

#if defined(__x86_64__)

#define TPUCTL_ZMM_CHAINS(op)                                                                      \
  op " %%zmm14, %%zmm15, %%zmm0\n\t" op " %%zmm14, %%zmm15, %%zmm1\n\t" op                         \
     " %%zmm14, %%zmm15, %%zmm2\n\t" op " %%zmm14, %%zmm15, %%zmm3\n\t" op                         \
     " %%zmm14, %%zmm15, %%zmm4\n\t" op " %%zmm14, %%zmm15, %%zmm5\n\t" op                         \
     " %%zmm14, %%zmm15, %%zmm6\n\t" op " %%zmm14, %%zmm15, %%zmm7\n\t" op                         \
     " %%zmm14, %%zmm15, %%zmm8\n\t" op " %%zmm14, %%zmm15, %%zmm9\n\t" op                         \
     " %%zmm14, %%zmm15, %%zmm10\n\t" op " %%zmm14, %%zmm15, %%zmm11\n\t"

#define TPUCTL_ZMM_ZERO                                                                            \
  "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"                                                              \
  "vpxord %%zmm1, %%zmm1, %%zmm1\n\t"                                                              \
  "vpxord %%zmm2, %%zmm2, %%zmm2\n\t"                                                              \
  "vpxord %%zmm3, %%zmm3, %%zmm3\n\t"                                                              \
  "vpxord %%zmm4, %%zmm4, %%zmm4\n\t"                                                              \
  "vpxord %%zmm5, %%zmm5, %%zmm5\n\t"                                                              \
  "vpxord %%zmm6, %%zmm6, %%zmm6\n\t"                                                              \
  "vpxord %%zmm7, %%zmm7, %%zmm7\n\t"                                                              \
  "vpxord %%zmm8, %%zmm8, %%zmm8\n\t"                                                              \
  "vpxord %%zmm9, %%zmm9, %%zmm9\n\t"                                                              \
  "vpxord %%zmm10, %%zmm10, %%zmm10\n\t"                                                           \
  "vpxord %%zmm11, %%zmm11, %%zmm11\n\t"

#define TPUCTL_ZMM_CLOBBERS                                                                        \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",         \
      "xmm11", "xmm14", "xmm15", "cc", "memory"

void zmm_fma_loop(long iterations) {
  static const float k_one = 1.0f, k_tiny = 1e-7f;
  __asm__ volatile("vbroadcastss %[one], %%zmm14\n\t"
                   "vbroadcastss %[tiny], %%zmm15\n\t" TPUCTL_ZMM_ZERO
                   "1:\n\t" TPUCTL_ZMM_CHAINS("vfmadd231ps") "dec %[n]\n\t"
                                                             "jnz 1b\n\t"
                                                             "vzeroupper\n\t"
                   : [n] "+r"(iterations)
                   : [one] "m"(k_one), [tiny] "m"(k_tiny)
                   : TPUCTL_ZMM_CLOBBERS);
}

// A loop of `op` chains on zmm14/zmm15 broadcast from one 32-bit pattern.
#define TPUCTL_ZMM_DWORD_LOOP(name, op, pattern)                                                   \
  void name(long iterations) {                                                                     \
    static const uint32_t k_pattern = pattern;                                                     \
    __asm__ volatile("vpbroadcastd %[p], %%zmm14\n\t"                                              \
                     "vpbroadcastd %[p], %%zmm15\n\t" TPUCTL_ZMM_ZERO                              \
                     "1:\n\t" TPUCTL_ZMM_CHAINS(op) "dec %[n]\n\t"                                 \
                                                    "jnz 1b\n\t"                                   \
                                                    "vzeroupper\n\t"                               \
                     : [n] "+r"(iterations)                                                        \
                     : [p] "m"(k_pattern)                                                          \
                     : TPUCTL_ZMM_CLOBBERS);                                                       \
  }

TPUCTL_ZMM_DWORD_LOOP(zmm_bf16_loop, "vdpbf16ps", 0x3f803f80u) // two bf16 1.0 per lane
TPUCTL_ZMM_DWORD_LOOP(zmm_vnni_loop, "vpdpbusd", 0x01010101u)  // four bytes of 1 per lane

#else

void zmm_fma_loop(long) {}
void zmm_bf16_loop(long) {}
void zmm_vnni_loop(long) {}

#endif

} // namespace tpuctl::kernels::detail
