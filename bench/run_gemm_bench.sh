#!/usr/bin/env bash
# Builds tpuctl with the benchmarks and runs the GEMM benchmark against OpenBLAS.
#   bench/run_gemm_bench.sh [--quick] [--reps N] [--threads 1,2]
# Prints markdown (the format of bench/README.md's results) on stdout; progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --bench
build_dir=$(BUILD_DIR=${BUILD_DIR:-build-bench} scripts/build.sh --bench | tail -n 1)
# Keep OpenBLAS from spinning threads of its own beyond what the benchmark asks for.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}
exec "$build_dir/bench/gemm_bench" "$@"
