#!/usr/bin/env bash
# Builds tpuctl with the benchmarks and runs the GEMM benchmark against OpenBLAS and oneDNN.
#   bench/run_gemm_bench.sh [--quick | --targets] [--reps N] [--threads 1,2] [--avx2-host]
# --avx2-host runs the session an AVX2-only host would: tpuctl capped to its avx2 family
# (--isa avx2), OpenBLAS on its Haswell kernels, oneDNN capped by ONEDNN_MAX_CPU_ISA=AVX2; the
# targets printed are then the first kernel issue's (bench/README.md).
# Prints markdown (the format of bench/README.md's results) on stdout; progress on stderr.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.." # the checkout, also when run through a link
scripts/deps.sh --bench
build_dir=$(BUILD_DIR=${BUILD_DIR:-build-bench} scripts/build.sh --bench | tail -n 1)
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}
# After a call, OpenBLAS's worker threads spin (yielding) for 2^28 TSC cycles (~0.1 s) by
# default, so in an interleaved A/B run they still occupy the second core when tpuctl's turn
# comes and the scheduler may stack tpuctl's two threads on one core. 2^20 cycles (~0.4 ms)
# matches tpuctl's own 0.3 ms spin-then-sleep, so neither side runs in the other's shadow.
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-20}
# oneDNN runs on libgomp, whose threads spin after a parallel region for GOMP_SPINCOUNT rounds
# (300000 by default: milliseconds here), with the same effect on the next contender's threads.
# 3000 rounds still spans the gap between back-to-back calls of one sample. 30000 (used until
# 2026-11-26) was not short enough: in a harness that runs a 2-thread libgomp loop before each
# 4-call sample of tpuctl's int8 1024^3 (Zen 5, 2 vCPUs), tpuctl's own 2-thread / 1-thread ratio
# was 1.76-1.93 (median of 30 samples, 3 runs) after it and 1.93 in every run after 3000 or 0
# rounds; its 1-thread rate also rose from 936-964 to 977-987 Gop/s.
export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-3000}
# The development machines export OPENBLAS_CORETYPE=Haswell and OPENBLAS_L2_SIZE, which force
# OpenBLAS onto its AVX2 kernels at half its AVX-512 speed: the peer runs without them (only
# here: tests and CI keep what the machine sets). OPENBLAS_VERBOSE=2 prints the core it picked
# on stderr; the session header repeats it (openblas_get_corename) with oneDNN's kernels.
args=() caps=(-u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
for a in "$@"; do
  if [[ $a == --avx2-host ]]; then
    args+=(--isa avx2)
    caps=(-u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2)
  else
    args+=("$a")
  fi
done
exec env "${caps[@]}" OPENBLAS_VERBOSE=2 "$build_dir/bench/gemm_bench" "${args[@]}"
