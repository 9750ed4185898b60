#!/usr/bin/env bash
# Workloads that survive, measured as a user sees them: on a local pool of 12 real sshd hosts
# (2 x 6 v5e hosts), a cluster of 2 x v5litepod-16 (8 hosts) runs a long workload with
# --max-restarts 1 and 4 hosts stay free. One worker's host dies (its sshd and the workload's
# processes there SIGKILLed): the script reports the time from the kill to the failure being
# noticed (the workload RECOVERING) and to every worker running again (RUNNING, attempt 1) on
# the repaired slice. Then a spot cluster (requeue, the default) running a workload is preempted
# by a reserved request; the script reports the time from `qr delete` of the reserved request to
# the workload running again. Goodput is printed for both workloads.
#
#   bench/repair_bench.sh [--runs N]
#
# Uses ${BUILD_DIR:-build}/cli/tpuctl (building it if missing). Each run has its own scratch HOME
# (mktemp -d) and pool on 127.171.0.x (repair) and 127.172.0.x (preemption); the state of a
# workload is polled with `workload describe --format json` every 100 ms (which also restarts a
# monitor that is gone, as any workload command does). Prints markdown on stdout (medians and
# min-max of the runs), progress on stderr; stops every sshd (pool local-down, by PID) and kills
# every process of the workloads. About 1 minute per run on a 2-core host.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "repair_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[0-9]+$ && $runs -ge 1 ]] || { echo "repair_bench.sh: --runs must be >= 1" >&2; exit 2; }
tpuctl=$root/${BUILD_DIR:-build}/cli/tpuctl
[[ -x $tpuctl ]] || (cd "$root" && scripts/build.sh >&2)

scratch=
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
cleanup() { scratch_cleanup; }
trap cleanup EXIT
trap 'exit 130' INT TERM

goodput() {
  "$tpuctl" workload describe "$1" --format json | python3 -c '
import json, sys
g = json.load(sys.stdin)["goodput"]
print("%.1f%% of %.1f s (running %.1f, lost %.1f, recovering %.1f, queued %.1f, provisioning %.1f)" % (
    100 * g["goodput"], g["wall_ms"] / 1e3, g["running_ms"] / 1e3, g["lost_ms"] / 1e3,
    g["recovering_ms"] / 1e3, g["queued_ms"] / 1e3, g["provisioning_ms"] / 1e3))'
}
descendants() { # $1 and every process below it
  local kids pid
  echo "$1"
  kids=$(pgrep -P "$1" || true)
  for pid in $kids; do descendants "$pid"; done
}
fresh_home() {
  scratch=$(mktemp -d /tmp/tpuctl-repair-bench-XXXXXX)
  export HOME=$scratch XDG_STATE_HOME=$scratch/state XDG_CONFIG_HOME=$scratch/config
  unset TPUCTL_STATE TPUCTL_POOL
}

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "## Repair and preemption: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($cpu)"
echo
echo "$("$tpuctl" version 2>/dev/null | head -n 1), $runs runs."
echo

noticed=() repaired=() resumed=() failed=0
goodput_repair='-' goodput_resume='-'
for run in $(seq "$runs"); do
  ok=1
  # 1. Host loss: 12 hosts in 2 x 6, the cluster on 8 of them.
  fresh_home
  "$tpuctl" pool local-up --hosts 12 --shape 4x12 --address-base 127.171.0.2 >/dev/null
  "$tpuctl" cluster create --cluster demo --tpu-type v5litepod-16 --num-slices 2 >/dev/null
  "$tpuctl" workload create --cluster demo --workload train --max-restarts 1 --num-slices 2 \
    --command 'sleep 3600' >/dev/null
  wait_status train '^RUNNING 0 8 8$' 30 >/dev/null || ok=0
  sleep 2 # a little running time, so the lost attempt shows in goodput
  host=$("$tpuctl" workload describe train --format json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["workers"][5]["host"])')
  uid=$("$tpuctl" workload describe train --format json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["uid"])')
  pool_dir=$XDG_STATE_HOME/tpuctl/local-pools/local
  # The host dies: its sshd with every session it serves (the monitor's open connection too),
  # and the workload's processes there.
  listener=$(cat "$pool_dir/hosts/$host/sshd.pid")
  victims=$(descendants "$listener")
  killed=$(now_ms)
  kill -9 $victims 2>/dev/null || true
  for pid in $(grep -l --null-data -F "TPUCTL_WORKLOAD_UID=$uid" /proc/[0-9]*/environ 2>/dev/null |
    sed -n 's|/proc/\([0-9]*\)/environ|\1|p'); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "TPU_WORKER_ID=1" &&
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "MEGASCALE_SLICE_ID=1" &&
      kill -9 "$pid" 2>/dev/null || true
  done
  t_noticed=$(wait_status train '^RECOVERING ' 60) || ok=0
  t_running=$(wait_status train '^RUNNING 1 8 8$' 90) || ok=0
  if [[ $ok == 1 ]]; then
    noticed+=($((t_noticed - killed)))
    repaired+=($((t_running - killed)))
    sleep 1
    goodput_repair=$(goodput train)
  fi
  echo "repair_bench.sh: run $run: host $host killed; noticed after $((${t_noticed:-0} - killed)) ms, running again after $((${t_running:-0} - killed)) ms" >&2
  "$tpuctl" cluster delete demo --force --quiet >/dev/null 2>&1 || true
  cleanup

  # 2. Preemption: a spot cluster on the only v5litepod-16 block, preempted by a reserved one.
  fresh_home
  "$tpuctl" pool local-up --hosts 4 --address-base 127.172.0.2 >/dev/null
  "$tpuctl" cluster create --cluster cheap --tpu-type v5litepod-16 --spot >/dev/null
  "$tpuctl" workload create --cluster cheap --workload job --command 'sleep 3600' >/dev/null
  wait_status job '^RUNNING 0 4 4$' 30 >/dev/null || ok=0
  sleep 2
  "$tpuctl" qr create urgent --accelerator-type v5litepod-16 --reserved >/dev/null || ok=0
  wait_status job '^RECOVERING ' 30 >/dev/null || ok=0
  sleep 1
  "$tpuctl" qr delete urgent --force --quiet >/dev/null || ok=0
  freed=$(now_ms)
  t_resumed=$(wait_status job '^RUNNING 1 4 4$' 60) || ok=0
  if [[ $ok == 1 ]]; then
    resumed+=($((t_resumed - freed)))
    sleep 1
    goodput_resume=$(goodput job)
  fi
  [[ $ok == 1 ]] || failed=$((failed + 1))
  echo "repair_bench.sh: run $run: resumed $((${t_resumed:-0} - freed)) ms after the reserved request was deleted" >&2
  "$tpuctl" cluster delete cheap --force --quiet >/dev/null 2>&1 || true
  cleanup
done

echo "| measure | seconds: median (min-max) | target |"
echo "|---|---|---|"
echo "| host killed -> failure noticed (RECOVERING) | $(ms_cell "${noticed[@]}") | <= 16 |"
echo "| host killed -> every worker running again on the repaired slice | $(ms_cell "${repaired[@]}") | <= 30 |"
echo "| reserved request deleted -> the preempted cluster's workload running again | $(ms_cell "${resumed[@]}") | <= 10 |"
echo
echo "Failed runs: $failed of $runs. Goodput of the last run's workloads, measured a second after"
echo "they ran again: repaired \`train\` $goodput_repair; resumed \`job\` $goodput_resume."
