#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test. Exit status: the tests'.
#   scripts/test.sh               all tests (unit + integration)
#   scripts/test.sh --sanitize    the same under AddressSanitizer + UBSan (build-sanitize/)
#   scripts/test.sh -L unit       extra arguments go to ctest (here: only the unit tests)
set -euo pipefail
cd "$(dirname "$0")/.."
build_args=()
ctest_args=()
for a in "$@"; do
  case "$a" in
    --sanitize) build_args+=(--sanitize) ;;
    *) ctest_args+=("$a") ;;
  esac
done
scripts/deps.sh
build_dir=$(scripts/build.sh "${build_args[@]}" | tail -n 1)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" "${ctest_args[@]}"
