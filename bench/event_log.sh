#!/usr/bin/env bash
# The store's size after N queued requests have come and gone (bench/event_log_bench.cpp: each
# request's create, three state changes and delete, with their events as tpuctl writes them),
# with the event log's retention as shipped (TPUCTL_EVENT_MAX 20000 a pool, 90 days) and without
# any (TPUCTL_EVENT_MAX=0 TPUCTL_EVENT_RETENTION=0), on SQLite and on a scratch one-member etcd.
#
#   bench/event_log.sh [--requests N]       (default 10000; needs scripts/build.sh --bench)
#
# Prints one JSON line per backend and mode, then a markdown table. Stops its etcd by PID.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
requests=10000
while [[ $# -gt 0 ]]; do
  case $1 in
    --requests) requests=${2:?}; shift 2 ;;
    *) echo "event_log.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bench=${EVENT_LOG_BENCH:-$root/${BUILD_DIR:-build}/bench/event_log_bench}
[[ -x $bench ]] || { echo "event_log.sh: $bench is missing: build it with scripts/build.sh --bench" >&2; exit 2; }
scratch=$(mktemp -d /tmp/tpuctl-evlog-XXXXXX)
etcd_pid=
cleanup() {
  # (wait reports etcd's TERM status: never let it stop the cleanup under set -e)
  if [[ -n $etcd_pid ]]; then
    kill "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT
# shellcheck source=bench/etcd_member.sh
source "$here/etcd_member.sh"
start_bench_etcd "$scratch" 127.0.194.1 23794 23804 ||
  { echo "event_log.sh: etcd did not start: $(tail -3 "$scratch/etcd.log")" >&2; exit 1; }
lines=()
for mode in retained unlimited; do
  mkdir -p "$scratch/$mode"
  if [[ $mode == unlimited ]]; then
    out=$(TPUCTL_EVENT_MAX=0 TPUCTL_EVENT_RETENTION=0 "$bench" --sqlite-dir "$scratch/$mode" --etcd "$etcd_endpoint" --requests "$requests")
  else
    out=$(env -u TPUCTL_EVENT_MAX -u TPUCTL_EVENT_RETENTION "$bench" --sqlite-dir "$scratch/$mode" --etcd "$etcd_endpoint" --requests "$requests")
  fi
  while IFS= read -r l; do
    echo "$l" >&2
    lines+=("$mode $l")
  done <<<"$out"
done
echo "| backend | retention | requests | events kept | store bytes | etcd live keys / bytes | etcd db bytes | seconds |"
echo "|---|---|---|---|---|---|---|---|"
for entry in "${lines[@]}"; do
  mode=${entry%% *}
  json=${entry#* }
  python3 - "$mode" "$json" <<'PY'
import json, sys
mode, j = sys.argv[1], json.loads(sys.argv[2])
live = f"{j['live_keys']} / {j['live_bytes']}" if j["backend"] == "etcd" else ""
store = j.get("store_bytes", "")
print(f"| {j['backend']} | {mode} | {j['requests']} | {j['events_kept']} | {store} | {live} | {j.get('etcd_db_bytes', '')} | {j['seconds']:.1f} |")
PY
done
