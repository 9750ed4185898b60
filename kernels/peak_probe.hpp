// This host's peak arithmetic throughput, measured by a short probe (kernels.md 6.4), so GEMM
// speed can be reported as a fraction of what the machine delivers right now (the shared host's
// throughput moves with its neighbours' load).
#pragma once

namespace tpuctl::kernels {

enum class PeakKind {
  // 12 independent vfmadd231ps ymm chains: GFLOP/s (2 flop per lane per FMA). The fp32 and
  // bf16 GEMMs both run on this instruction, so it is their peak.
  fp32_fma,
  // 12 independent vpmaddwd + vpaddd ymm chains: Gop/s counted as 2 ops per int16 MAC, the
  // ceiling of the exact int8 GEMM (int8 sign-extended to int16; no saturating vpmaddubsw).
  int8_exact,
};

// "fp32_fma" or "int8_exact".
const char* to_string(PeakKind kind);

// What the probe runs on this host, e.g. "12 x vfmadd231ps ymm chains (inline asm)", or the
// portable C++ loop used when the CPU lacks AVX2 + FMA.
const char* probe_description(PeakKind kind);

// Runs the probe on `threads` threads at once for about `budget_seconds` in total and returns
// the best rate seen, in G(FL)OP/s summed over the threads. Never fails; threads < 1 counts as 1.
double measure_peak_gops(PeakKind kind, int threads, double budget_seconds = 0.06);

// measure_peak_gops(kind, threads) measured once per process per (kind, threads) and cached.
// Thread-safe.
double host_peak_gops(PeakKind kind, int threads);

} // namespace tpuctl::kernels
