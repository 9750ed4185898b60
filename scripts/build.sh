#!/usr/bin/env bash
# Configures and builds tpuctl into $BUILD_DIR (default build/). Used by test.sh and demo.sh.
#   scripts/build.sh [--sanitize | --tsan] [--bench]
#     --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer, in build-sanitize/
#     --tsan       ThreadSanitizer, in build-tsan/
# (The libFuzzer build has its own script: bench/fuzz.sh, in build-fuzz/.)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
args=(-DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo})
for a in "$@"; do
  case "$a" in
    --sanitize) args+=(-DTPUCTL_SANITIZE=ON); build_dir=${BUILD_DIR:-build-sanitize} ;;
    --tsan) args+=(-DTPUCTL_TSAN=ON); build_dir=${BUILD_DIR:-build-tsan} ;;
    --bench) args+=(-DTPUCTL_BUILD_BENCH=ON) ;;
    *) echo "build.sh: unknown option '$a' (use --sanitize, --tsan or --bench)" >&2; exit 2 ;;
  esac
done
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" "${generator[@]}" "${args[@]}" >/dev/null
else
  cmake -S . -B "$build_dir" "${args[@]}" >/dev/null
fi
cmake --build "$build_dir" -j"$(nproc)"
echo "$build_dir"
