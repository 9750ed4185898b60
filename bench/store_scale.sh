#!/usr/bin/env bash
# The state store at pod scale: a whole tpu7x-18432 pod (2,304 host records) added, claimed,
# read and released, store calls only, on SQLite and on a default one-member etcd, and the wall
# time of `tpuctl qr list` / `tpuctl pool describe` on such a pool held by one ACTIVE slice.
#
#   bench/store_scale.sh [--runs N] [--hosts N] [--keep]
#
# Builds bench/store_bench and tpuctl (scripts/deps.sh --bench, then cmake into build-bench/
# unless BUILD_DIR says otherwise), starts etcd (Debian's
# etcd-server, default limits) on 127.0.193.1:23793 (peer 23803) with its data in a mktemp -d
# scratch directory, runs store_bench against it and a SQLite file there, then kills etcd by
# its PID and removes the directory (--keep keeps it). Markdown on stdout (see bench/README.md,
# "State store at pod scale"), progress on stderr. About 1 minute with the defaults (5 runs).
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
runs=5
hosts=2304
keep=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    --hosts) hosts=${2:?}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "store_scale.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[0-9]+$ && $runs -ge 1 ]] || { echo "store_scale.sh: --runs must be >= 1" >&2; exit 2; }
[[ $hosts =~ ^[0-9]+$ && $hosts -ge 1 && $hosts -le 2304 ]] ||
  { echo "store_scale.sh: --hosts must be 1..2304 (a tpu7x pod)" >&2; exit 2; }
command -v etcd >/dev/null || { echo "store_scale.sh: etcd not found: run scripts/deps.sh" >&2; exit 2; }

# Only the two targets it runs (configuring the bench build needs OpenBLAS: deps.sh --bench).
root=$(cd "$here/.." && pwd)
build_dir=$root/${BUILD_DIR:-build-bench}
(cd "$root" && scripts/deps.sh --bench)
generator=()
command -v ninja >/dev/null && [[ ! -f $build_dir/CMakeCache.txt ]] && generator=(-G Ninja)
cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTPUCTL_BUILD_BENCH=ON >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target store_bench tpuctl >&2
bench=$build_dir/bench/store_bench
tpuctl=$build_dir/cli/tpuctl
scratch=$(mktemp -d /tmp/tpuctl-store-scale-XXXXXX)
etcd_pid=
cleanup() {
  if [[ -n $etcd_pid ]]; then
    kill -9 "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
  fi
  if [[ $keep == 1 ]]; then echo "store_scale.sh: kept $scratch" >&2; else rm -rf "$scratch"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=bench/etcd_member.sh
source "$here/etcd_member.sh"
start_bench_etcd "$scratch" 127.0.193.1 23793 23803 ||
  { echo "store_scale.sh: etcd did not start (see $scratch/etcd.log)" >&2; keep=1; exit 2; }
endpoint=$etcd_endpoint

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "## State store at pod scale: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($cpu)"
echo
echo "$("$tpuctl" version 2>/dev/null | head -n 1), etcd $(etcd --version | head -n 1 | awk '{print $3}'), $runs runs, medians (min-max)."
echo
mkdir -p "$scratch/sqlite"
HOME=$scratch XDG_STATE_HOME=$scratch/state XDG_CONFIG_HOME=$scratch/config \
  "$bench" --etcd "$endpoint" --sqlite-dir "$scratch/sqlite" --tpuctl "$tpuctl" \
  --runs "$runs" --hosts "$hosts" >"$scratch/out.txt"
grep -v '^{' "$scratch/out.txt"
echo >&2 "store_scale.sh: per-run figures (JSON lines):"
grep '^{' "$scratch/out.txt" >&2
exit 0
