#!/usr/bin/env bash
# Builds tpuctl with the benchmarks and runs the GEMM benchmark against OpenBLAS.
#   bench/run_gemm_bench.sh [--quick] [--reps N] [--threads 1,2]
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
exec "$build_dir/bench/gemm_bench" "$@"
