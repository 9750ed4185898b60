#!/usr/bin/env bash
# Builds tpuctl with the benchmarks and runs the GEMM benchmark against OpenBLAS and oneDNN.
#   bench/run_gemm_bench.sh [--quick | --targets] [--reps N] [--threads 1,2]
# Prints markdown (the format of bench/README.md's results) on stdout; progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --bench
build_dir=$(BUILD_DIR=${BUILD_DIR:-build-bench} scripts/build.sh --bench | tail -n 1)
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}
# After a call, OpenBLAS's worker threads spin (yielding) for 2^28 TSC cycles (~0.1 s) by
# default, so in an interleaved A/B run they still occupy the second core when tpuctl's turn
# comes and the scheduler may stack tpuctl's two threads on one core. 2^20 cycles (~0.4 ms)
# matches tpuctl's own 0.3 ms spin-then-sleep, so neither side runs in the other's shadow.
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-20}
# oneDNN runs on libgomp, whose threads spin after a parallel region for GOMP_SPINCOUNT rounds
# (300000 by default: milliseconds here), with the same effect on the next contender's threads;
# 30000 rounds is about the 0.3-0.4 ms of tpuctl's pool and of OpenBLAS above.
export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-30000}
# The development machines export OPENBLAS_CORETYPE=Haswell and OPENBLAS_L2_SIZE, which force
# OpenBLAS onto its AVX2 kernels at half its AVX-512 speed: the peer runs without them (only
# here: tests and CI keep what the machine sets). OPENBLAS_VERBOSE=2 prints the core it picked
# on stderr; the session header repeats it (openblas_get_corename) with oneDNN's kernels.
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_VERBOSE=2 \
  "$build_dir/bench/gemm_bench" "$@"
