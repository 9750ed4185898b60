#!/usr/bin/env bash
# The main job, from a fresh machine: installs dependencies, builds tpuctl, then walks through
# what it does. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
build_dir=$(scripts/build.sh | tail -n 1)
tpuctl="$build_dir/cli/tpuctl"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$tpuctl" version
step "$tpuctl" topology list --generation v5p
step "$tpuctl" topology describe v5p-128
step "$tpuctl" topology describe v5litepod-16 --format json
step "$tpuctl" topology mesh v6e-16 --shape 4,4 --axes data,model
step "$tpuctl" kernel simulate --m 3025 --n 96 --k 363 --array 32x32 --dataflow ws
step "$tpuctl" kernel run --m 257 --n 129 --k 1025 --dtype int8 --check
