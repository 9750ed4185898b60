#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test. Exit status: the tests'.
#   scripts/test.sh               all tests (unit + integration), then the fuzz smoke
#   scripts/test.sh --sanitize    every test under AddressSanitizer + UBSan (build-sanitize/)
#   scripts/test.sh --tsan        the threaded tests under ThreadSanitizer (build-tsan/): the
#                                 fan-out engine, the reconciler and drivers, the SPMD rendezvous
#                                 and ring, concurrent SQLite stores, the GEMM's threads, chaos
#   scripts/test.sh -L unit       extra arguments go to ctest (here: only the unit tests; the
#                                 fuzz smoke runs only when no argument is given)
# The fuzz smoke (bench/fuzz.sh, clang build in build-fuzz/) replays every fuzz target's corpus
# and fixed crashes, then tries TPUCTL_FUZZ_RUNS new inputs on each (default 3000; 0 skips it).
# Fuzzing for minutes is bench/fuzz.sh's job, not the test suite's.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.." # the checkout, also when run through a link
k_tsan_tests='fanout|rendezvous|ring_allgather|spmd|sqlite_store|qr_cli|provisioning|workload_cli|agent_preflight|gemm_support|chaos'
build_args=()
ctest_args=()
mode=plain
prev=
selected=
for a in "$@"; do
  case "$a" in
    --sanitize) build_args+=(--sanitize); mode=sanitize ;;
    --tsan) build_args+=(--tsan); mode=tsan ;;
    *) ctest_args+=("$a") ;;
  esac
  [[ $prev == -R ]] && selected=$a
  prev=$a
done
if [[ $mode == tsan && ${#ctest_args[@]} -eq 0 ]]; then
  selected=$k_tsan_tests
fi
# A sanitizer build compiles only the test files it will run (-R REGEX): those builds are slow.
if [[ $mode != plain && -n $selected ]]; then
  build_args+=(--test-files "$selected")
fi
scripts/deps.sh --frameworks
build_dir=$(scripts/build.sh "${build_args[@]}" | tail -n 1)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1}
if [[ $mode == tsan && ${#ctest_args[@]} -eq 0 ]]; then
  ctest_args=(-R "$k_tsan_tests")
fi
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" "${ctest_args[@]}"
if [[ $mode == plain && ${#ctest_args[@]} -eq 0 && ${TPUCTL_FUZZ_RUNS:-3000} != 0 ]]; then
  bench/fuzz.sh --runs "${TPUCTL_FUZZ_RUNS:-3000}"
fi
