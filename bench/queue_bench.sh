#!/usr/bin/env bash
# A cluster's workload queue, measured as a team running many jobs sees it, on local pools of
# real sshd hosts (v5e, one host per v5litepod-4 slice):
#  (a) throughput: 40 one-slice workloads of 2 s each, created one after another on a cluster
#      of 4 slices. Each job writes its own start and end times (and its slice): the makespan
#      (first create to last job's end) against the ideal 40 x 2 s / 4 slices, and the median
#      delay from a job ending to the next job starting on the same slice.
#  (b) preemption: 4 low-priority jobs that ignore SIGTERM fill the cluster (grace 5 s); a
#      very-high one is created: the time from its create to its job running, against grace + 3 s.
#  (c) repair: a 4-slice cluster of v5litepod-16 (16 hosts, 8 spare) runs a workload on every
#      slice; one worker's host dies. The time from the kill, and from the loss being noticed
#      (RECOVERING: the repair itself), to every worker running the next attempt, with the broken
#      slice alone placed again, against the repair as tpuctl made it before, in the same run: the
#      whole request sent back through the queue and every worker started over a new session
#      (TPUCTL_REPAIR_WHOLE_REQUEST=1 TPUCTL_RESTART_OVER_NEW_SESSIONS=1). Also shown: today's
#      fallback, the whole request requeued with the workers whose hosts did not change started
#      through the monitor's streams (TPUCTL_REPAIR_WHOLE_REQUEST=1 alone).
#
#   bench/queue_bench.sh [--runs N] [--parts abc]   (--parts: which of (a) (b) (c) to run)
#
# Uses ${BUILD_DIR:-build}/cli/tpuctl (building it if missing); each part of each run has its own
# scratch HOME and pool (127.175.0.x, 127.176.0.x, 127.177.0.x), stopped by `pool local-down`
# and by PID. Prints markdown on stdout (medians and min-max over the runs, the host named),
# progress on stderr. About 3.5 minutes per run on a 2-core host.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=3
parts=abc
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    --parts) parts=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "queue_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[0-9]+$ && $runs -ge 1 ]] || { echo "queue_bench.sh: --runs must be >= 1" >&2; exit 2; }
tpuctl=$root/${BUILD_DIR:-build}/cli/tpuctl
[[ -x $tpuctl ]] || (cd "$root" && scripts/build.sh >&2)

scratch=
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
cleanup() { scratch_cleanup; }
trap cleanup EXIT
trap 'exit 130' INT TERM
fresh_home() {
  scratch=$(mktemp -d /tmp/tpuctl-queue-bench-XXXXXX)
  export HOME=$scratch XDG_STATE_HOME=$scratch/state XDG_CONFIG_HOME=$scratch/config
  unset TPUCTL_STATE TPUCTL_POOL TPUCTL_REPAIR_WHOLE_REQUEST TPUCTL_RESTART_OVER_NEW_SESSIONS
  mkdir -p "$scratch/out"
}
wait_file() { # path, seconds
  local until=$(($(now_ms) + $2 * 1000))
  while (($(now_ms) < until)); do
    [[ -s $1 ]] && return 0
    sleep 0.05
  done
  return 1
}
cell() { # "median (min-max)" of the numbers given, with $1 decimals
  local d=$1 m r
  shift
  m=$(echo "$@" | median)
  r=$(echo "$@" | range)
  [[ $m == - ]] && { echo "-"; return; }
  printf "%.${d}f (%.${d}f-%.${d}f)" "$m" "${r%-*}" "${r#*-}"
}

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
flags=$(grep -o -w -m1 -e avx512f -e amx_tile /proc/cpuinfo | sort -u | tr '\n' ' ' || true)
echo "## The workload queue: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($cpu${flags:+; $flags})"
echo
echo "$("$tpuctl" version 2>/dev/null | head -n 1), $runs runs."
echo

jobs=40 slices=4 job_s=2
ideal=$((jobs * job_s / slices))
makespan=() delay=() preempt=() in_place=() whole=() in_place_kill=() whole_kill=() ratio=()
fallback=() fallback_ratio=()
failed=0
grace=5
for run in $(seq "$runs"); do
  ok=1
  # (a) 40 jobs of 2 s on 4 slices.
  if [[ $parts == *a* ]]; then
  fresh_home
  "$tpuctl" pool local-up --hosts $slices --address-base 127.175.0.2 >/dev/null
  "$tpuctl" cluster create --cluster q --tpu-type v5litepod-4 --num-slices $slices --quiet >/dev/null
  out=$scratch/out
  started=$(now_ms)
  for i in $(seq $jobs); do
    "$tpuctl" workload create --cluster q --workload "j$i" --env "OUT=$out" --command \
      's=$(date +%s.%N); sleep '"$job_s"'; echo "$TPU_NAME $s $(date +%s.%N)" > "$OUT/$TPUCTL_WORKLOAD"' \
      --quiet >/dev/null || ok=0
  done
  submitted=$(now_ms)
  "$tpuctl" workload list --wait-for-job-completion "j$jobs" --timeout 300 >/dev/null 2>&1 || true
  until=$(($(now_ms) + 120000))
  while (($(ls "$out" | wc -l) < jobs && $(now_ms) < until)); do sleep 0.2; done
  if (($(ls "$out" | wc -l) == jobs)); then
    # Per slice (TPU_NAME), the gap between a job ending and the next one starting there.
    span=$(cat "$out"/* | awk -v t0="$started" '$3 > last {last = $3} END {printf "%.3f", last - t0 / 1000}')
    med=$(cat "$out"/* | sort -k1,1 -k2,2g | awk '
      $1 == node {printf "%.3f\n", $2 - end} {node = $1; end = $3}' | median)
    makespan+=("$span")
    delay+=("$med")
    per_slice=$(cat "$out"/* | awk '{n[$1]++} END {for (k in n) printf "%d ", n[k]}')
    echo "queue_bench.sh: run $run: makespan $span s (ideal $ideal s), median slice handover $med s; $jobs creates took $(((submitted - started) / 1000)) s; jobs per slice: $per_slice" >&2
  else
    ok=0
    echo "queue_bench.sh: run $run: only $(ls "$out" | wc -l) of $jobs jobs ended" >&2
  fi
  "$tpuctl" cluster delete q --force --quiet >/dev/null 2>&1 || true
  cleanup
  fi

  # (b) a very-high job on a cluster full of low ones that ignore TERM.
  if [[ $parts == *b* ]]; then
  fresh_home
  "$tpuctl" pool local-up --hosts $slices --address-base 127.176.0.2 >/dev/null
  "$tpuctl" cluster create --cluster q --tpu-type v5litepod-4 --num-slices $slices --quiet >/dev/null
  for i in $(seq $slices); do
    "$tpuctl" workload create --cluster q --workload "low$i" --priority low -tgps $grace \
      --command "trap '' TERM; sleep 3600" --quiet >/dev/null || ok=0
  done
  for i in $(seq $slices); do wait_status "low$i" '^RUNNING 0 1 1$' 30 >/dev/null || ok=0; done
  out=$scratch/out
  t0=$(now_ms)
  "$tpuctl" workload create --cluster q --workload urgent --priority very-high --env "OUT=$out" \
    --command 'date +%s.%N > "$OUT/urgent"; sleep 3600' --quiet >/dev/null || ok=0
  if wait_file "$out/urgent" $((grace + 30)); then
    took=$(awk -v t="$(cat "$out/urgent")" -v t0="$t0" 'BEGIN {printf "%.2f", t - t0 / 1000}')
    preempt+=("$took")
    echo "queue_bench.sh: run $run: the very-high job ran $took s after its create (grace $grace s)" >&2
  else
    ok=0
  fi
  "$tpuctl" cluster delete q --force --quiet >/dev/null 2>&1 || true
  cleanup
  fi

  # (c) one slice of four repaired in place, against the whole request requeued.
  for mode in slice whole fallback; do
    [[ $parts == *c* ]] || continue
    fresh_home
    [[ $mode != slice ]] && export TPUCTL_REPAIR_WHOLE_REQUEST=1
    [[ $mode == whole ]] && export TPUCTL_RESTART_OVER_NEW_SESSIONS=1
    "$tpuctl" pool local-up --hosts 24 --shape 8x12 --address-base 127.177.0.2 >/dev/null
    "$tpuctl" cluster create --cluster demo --tpu-type v5litepod-16 --num-slices 4 --quiet >/dev/null
    "$tpuctl" workload create --cluster demo --workload train --num-slices all \
      --command 'sleep 3600' --quiet >/dev/null
    wait_status train '^RUNNING 0 16 16$' 60 >/dev/null || ok=0
    read -r host uid < <("$tpuctl" workload describe train --format json |
      python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["workers"][9]["host"], d["uid"])')
    pool_dir=$XDG_STATE_HOME/tpuctl/local-pools/local
    listener=$(cat "$pool_dir/hosts/$host/sshd.pid")
    killed=$(now_ms)
    kill -9 "$listener" $(pgrep -P "$listener" || true) 2>/dev/null || true
    for pid in $(grep -l --null-data -F "TPUCTL_WORKLOAD_UID=$uid" /proc/[0-9]*/environ 2>/dev/null |
      sed -n 's|/proc/\([0-9]*\)/environ|\1|p'); do
      env_of=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null || true)
      grep -qx "TPU_WORKER_ID=1" <<<"$env_of" && grep -qx "MEGASCALE_SLICE_ID=2" <<<"$env_of" &&
        kill -9 "$pid" 2>/dev/null || true
    done
    if noticed=$(wait_status train '^RECOVERING ' 60) && t=$(wait_status train '^RUNNING 1 16 16$' 120); then
      if [[ $mode == slice ]]; then
        in_place+=($((t - noticed)))
        in_place_kill+=($((t - killed)))
      elif [[ $mode == whole ]]; then
        whole+=($((t - noticed)))
        whole_kill+=($((t - killed)))
      else
        fallback+=($((t - noticed)))
      fi
      echo "queue_bench.sh: run $run: $mode repair: the loss noticed $((noticed - killed)) ms after the kill, every worker running again $((t - noticed)) ms later" >&2
    else
      ok=0
    fi
    "$tpuctl" cluster delete demo --force --quiet >/dev/null 2>&1 || true
    cleanup
  done
  if ((${#in_place[@]} == ${#whole[@]} && ${#whole[@]} > 0)); then
    ratio+=("$(awk -v a="${in_place[-1]}" -v b="${whole[-1]}" 'BEGIN {printf "%.3f", a / b}')")
  fi
  if ((${#in_place[@]} == ${#fallback[@]} && ${#fallback[@]} > 0)); then
    fallback_ratio+=("$(awk -v a="${in_place[-1]}" -v b="${fallback[-1]}" 'BEGIN {printf "%.3f", a / b}')")
  fi
  [[ $ok == 1 ]] || failed=$((failed + 1))
done

ms_to_s() { for v in "$@"; do awk -v v="$v" 'BEGIN {printf "%.3f ", v / 1000}'; done; }
echo "| measure | median (min-max) | target |"
echo "|---|---|---|"
span_ratio=()
for s in "${makespan[@]}"; do span_ratio+=("$(awk -v s="$s" -v i="$ideal" 'BEGIN {printf "%.3f", s / i}')"); done
echo "| (a) makespan of $jobs x ${job_s} s jobs on $slices slices, s | $(cell 1 "${makespan[@]}") | ideal $ideal |"
echo "| (a) makespan / ideal | $(cell 2 "${span_ratio[@]}") | <= 1.25 |"
echo "| (a) a job ending -> the next one starting on its slice, s | $(cell 2 "${delay[@]}") | <= 1 |"
echo "| (b) very-high create -> its job running (grace $grace s, victims ignore TERM), s | $(cell 1 "${preempt[@]}") | <= $((grace + 3)) |"
echo "| (c) host killed -> running again, the broken slice repaired alone, s | $(cell 1 $(ms_to_s "${in_place_kill[@]}")) | |"
echo "| (c) host killed -> running again, the whole request requeued (as before), s | $(cell 1 $(ms_to_s "${whole_kill[@]}")) | |"
echo "| (c) loss noticed -> running again (the repair), the broken slice alone, s | $(cell 2 $(ms_to_s "${in_place[@]}")) | |"
echo "| (c) loss noticed -> running again (the repair), the whole request as before, s | $(cell 2 $(ms_to_s "${whole[@]}")) | |"
echo "| (c) repair: one slice / the whole request as before | $(cell 2 "${ratio[@]}") | <= 0.6 |"
echo "| (c) loss noticed -> running again, today's fallback (whole request, streams kept), s | $(cell 2 $(ms_to_s "${fallback[@]}")) | |"
echo "| (c) repair: one slice / today's fallback | $(cell 2 "${fallback_ratio[@]}") | |"
echo
echo "Failed runs: $failed of $runs."
