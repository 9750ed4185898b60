// This host's peak arithmetic throughput, measured by a short probe (kernels.md 6.4), so GEMM
// speed can be reported as a fraction of what the machine delivers right now (the shared host's
// throughput moves with its neighbours' load).
#pragma once

#include <vector>

#include "kernels/gemm.hpp"

namespace tpuctl::kernels {

enum class PeakKind {
  // 12 independent vfmadd231ps ymm chains: GFLOP/s (2 flop per lane per FMA). The fp32 and
  // bf16 GEMMs both run on this instruction, so it is their peak.
  fp32_fma,
  // 12 independent vpmaddwd + vpaddd ymm chains: Gop/s counted as 2 ops per int16 MAC, the
  // ceiling of the exact int8 GEMM (int8 sign-extended to int16; no saturating vpmaddubsw).
  int8_exact,
  // The AVX-512 units, measured only where the CPU has them (0 elsewhere): 12 vfmadd231ps zmm
  // chains (GFLOP/s), 12 vdpbf16ps zmm chains (GFLOP/s: 2 bf16 products of 2 flop per lane), 12
  // vpdpbusd zmm chains (Gop/s: 4 u8 x s8 MACs of 2 ops per lane).
  fp32_fma_avx512,
  bf16_dot_avx512,
  int8_vnni_avx512,
  // AMX, measured only where the process may use the tiles (cpu_features().amx): tdpbssd and
  // tdpbf16ps round-robin over four C tiles (tmm0-3) with the operands in tmm4-7, 16 x 16 x 64
  // int8 MACs (Gop/s, 2 ops each) or 16 x 16 x 32 bf16 MACs (GFLOP/s) per instruction.
  int8_amx,
  bf16_amx,
};

// "fp32_fma", "int8_exact", "fp32_fma_avx512", "bf16_dot_avx512", "int8_vnni_avx512",
// "int8_amx" or "bf16_amx".
const char* to_string(PeakKind kind);

// The ISA of the unit a probe measures: "avx2" (or "portable" without AVX2 + FMA), "avx512",
// "avx512-bf16", "avx512-vnni" or "amx".
const char* unit_isa(PeakKind kind);

// The unit whose peak bounds a `dtype` GEMM on kernel family `isa` (selected_isa's answer):
// the instruction its inner loop runs, e.g. int8 on avx512-vnni -> int8_vnni_avx512, bf16 on
// avx512 (widened) -> fp32_fma_avx512, anything on portable -> the base probes.
PeakKind peak_kind_for(GemmDtype dtype, GemmIsa isa);

// Whether this CPU can run the probe's instructions (fp32_fma and int8_exact: always, through
// the portable loops where AVX2 + FMA are missing).
bool host_has(PeakKind kind);

// Every probe this CPU can run, in the enum's order.
std::vector<PeakKind> host_units();

// What the probe runs on this host, e.g. "12 x vfmadd231ps ymm chains (inline asm)", or the
// portable C++ loop used when the CPU lacks AVX2 + FMA.
const char* probe_description(PeakKind kind);

// Runs the probe on `threads` threads at once for about `budget_seconds` in total and returns
// the best rate seen, in G(FL)OP/s summed over the threads; 0 for a unit the CPU lacks
// (host_has). Never fails; threads < 1 counts as 1.
double measure_peak_gops(PeakKind kind, int threads, double budget_seconds = 0.06);

// measure_peak_gops(kind, threads) measured once per process per (kind, threads) and cached.
// Thread-safe.
double host_peak_gops(PeakKind kind, int threads);

} // namespace tpuctl::kernels
