#!/usr/bin/env bash
# Configures and builds tpuctl into $BUILD_DIR (default build/). Used by test.sh and demo.sh.
#   scripts/build.sh [--sanitize | --tsan] [--bench] [--test-files REGEX] [--target T]
#     --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer, in build-sanitize/
#     --tsan       ThreadSanitizer, in build-tsan/
#     --test-files only the test files whose path under tests/ matches REGEX (default: all)
#     --target     build only that target (the demo: tpuctl, not the tests it never runs)
# (The libFuzzer build has its own script: bench/fuzz.sh, in build-fuzz/.)
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.." # the checkout, also when run through a link
build_dir=${BUILD_DIR:-build}
args=(-DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo})
test_files=
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sanitize) args+=(-DTPUCTL_SANITIZE=ON); build_dir=${BUILD_DIR:-build-sanitize} ;;
    --tsan) args+=(-DTPUCTL_TSAN=ON); build_dir=${BUILD_DIR:-build-tsan} ;;
    --bench) args+=(-DTPUCTL_BUILD_BENCH=ON) ;;
    --test-files) test_files=${2:?--test-files needs a regex}; shift ;;
    --target) targets+=(--target "${2:?--target needs a target}"); shift ;;
    *) echo "build.sh: unknown option '$1' (use --sanitize, --tsan, --bench, --test-files or --target)" >&2; exit 2 ;;
  esac
  shift
done
args+=("-DTPUCTL_TEST_FILES=$test_files")
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# One build of a build directory at a time: the README's test runs scripts/demo.sh (which builds)
# while other tests, or a second copy of the suite, may do the same on this directory.
mkdir -p "$build_dir"
exec 9>"$build_dir/.build.lock"
flock 9
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" "${generator[@]}" "${args[@]}" >/dev/null
else
  cmake -S . -B "$build_dir" "${args[@]}" >/dev/null
fi
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}"
echo "$build_dir"
