#!/usr/bin/env bash
# One big workload on one box, measured as a user sees it: a local pool of --hosts real sshd
# hosts (256: a v5p-2048 cluster, one worker per host), one workload (`sleep`) on every worker.
# Every time is reported as a ratio to one SSH round of the same run: the median of three
# `tpuctl pool ssh --command true` over every host. Per run:
#   launch     workload create -> it returned with every worker RUNNING      (target <= 1.5 rounds)
#   watch      --watch-minutes of that workload: no worker LOST (5 of 5 runs), and the monitor's
#              CPU (user + system of its process, from /proc) as % of one core  (target <= 2 %)
#   delete     workload delete                                               (target <= 1 round)
#   loss       a second workload; one host's sshd, its sessions and the workload's processes
#              there SIGKILLed -> a worker LOST in `workload describe` (seconds; target <= 16)
#   cluster    cluster delete --force                                        (target <= 1 round)
#   down       pool local-down                                               (target <= 1 round)
#   load       seconds until the 1-minute load average is under 4, next to the least an idle
#              machine needs from the load average at the last command (60 ln(L/4))
#   calm       seconds from the last command until the machine is calm: the tasks running or
#              waiting for the disk (/proc/stat procs_running + procs_blocked; the median of 10
#              samples a second) under 4 for 5 s in a row (target <= 30; up to 120 s). The
#              1-minute load average is reported then too: it decays as exp(-t/60), so a round of
#              256 key exchanges in the last command keeps it above 4 for a minute or more after
#              the machine is idle, whatever the tool does.
# and the leftovers: processes started through the pool's servers (SSH_CONNECTION to one of its
# addresses) still running after local-down (target 0).
#
#   bench/workload_scale.sh [--hosts N] [--runs N] [--watch-minutes M] [--tpuctl PATH]
#                           [--steps-per-second S]
#
# --steps-per-second S: the workload prints MaxText's `completed step: N` S times a second on
# every worker instead of sleeping (the monitor learns process 0's steps for goodput, every
# worker's agent reads its log), and the watch row measures what that costs the monitor.
#
# --tpuctl measures another build (the figures before a change: build it from that commit).
# Uses ${BUILD_DIR:-build}/cli/tpuctl by default (building it if missing). Each run has its own
# scratch HOME and pool on 127.173.x.y. Prints markdown on stdout (medians, min-max), progress on
# stderr; stops every sshd (local-down, by PID) and kills what is left of the runs by PID.
# At 256 hosts on a 2-core host: about 3 minutes per run plus the watch.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
hosts=256 runs=5 watch_minutes=10 tpuctl= steps_per_second=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --hosts) hosts=${2:?}; shift 2 ;;
    --runs) runs=${2:?}; shift 2 ;;
    --watch-minutes) watch_minutes=${2:?}; shift 2 ;;
    --tpuctl) tpuctl=${2:?}; shift 2 ;;
    --steps-per-second) steps_per_second=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "workload_scale.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for v in hosts runs watch_minutes; do
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -ge 1 ]] || { echo "workload_scale.sh: --${v//_/-} must be >= 1" >&2; exit 2; }
done
case $hosts in
  256) type=v5p-2048 gen=v5p ;;
  128) type=v5p-1024 gen=v5p ;;
  64) type=v5p-512 gen=v5p ;;
  16) type=v5p-128 gen=v5p ;;
  *) echo "workload_scale.sh: --hosts must be 16, 64, 128 or 256 (one v5p slice of that many hosts)" >&2; exit 2 ;;
esac
if [[ -z $tpuctl ]]; then
  tpuctl=$root/${BUILD_DIR:-build}/cli/tpuctl
  [[ -x $tpuctl ]] || (cd "$root" && scripts/build.sh --target tpuctl >&2)
fi

scratch=
cleanup() {
  if [[ -n $scratch && -d $scratch ]]; then
    "$tpuctl" pool local-down --force >/dev/null 2>&1 || true
    for pid in $(grep -l -F "$scratch" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null |
      sed -n 's|/proc/\([0-9]*\)/.*|\1|p' | sort -u); do
      [[ $pid == "$$" ]] || kill -9 "$pid" 2>/dev/null || true
    done
    for pid in $(through_pool); do kill -9 "$pid" 2>/dev/null || true; done
    rm -rf "$scratch"
  fi
  scratch=
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
cell() { echo "$(echo "$@" | median) ($(echo "$@" | range))"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# Runs `$@` (output dropped, stderr kept in $scratch/last.err): $ms its milliseconds, $rc its
# exit status.
timed() {
  local t0
  t0=$(now_ms)
  rc=0
  "$@" >/dev/null 2>"$scratch/last.err" || rc=$?
  ms=$(($(now_ms) - t0))
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
through_pool() { # pids of the processes started through the pool's servers (any tpuctl build)
  { grep -l -z -E '^SSH_CONNECTION=[^ ]+ [0-9]+ 127[.]173[.]' /proc/[0-9]*/environ 2>/dev/null || true; } |
    sed -n 's|/proc/\([0-9]*\)/environ|\1|p'
}
state_of() {
  "$tpuctl" workload describe "$1" --format json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
w = d["workers"]
print(d["state"], d["restarts"], sum(1 for x in w if x["state"] == "RUNNING"), sum(1 for x in w if x["state"] == "LOST"))' ||
    echo "? 0 0 0"
}

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
tick=$(getconf CLK_TCK)
echo "## One workload on $hosts local sshd hosts: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($cpu)"
echo
echo "$("$tpuctl" version 2>/dev/null | head -n 1), $runs runs, a ${watch_minutes}-minute watch each."
echo

round=() launch=() watch_lost=() monitor_cpu=() del=() loss=() cdel=() down=() calm=() load30=() left=()
la_under4=() la_idle=()
for run in $(seq "$runs"); do
  scratch=$(mktemp -d /tmp/tpuctl-wscale-XXXXXX)
  export HOME=$scratch XDG_STATE_HOME=$scratch/state XDG_CONFIG_HOME=$scratch/config
  unset TPUCTL_STATE TPUCTL_POOL
  pool_dir=$XDG_STATE_HOME/tpuctl/local-pools/local
  "$tpuctl" pool local-up --hosts "$hosts" --generation "$gen" --address-base 127.173.0.2 --quiet >/dev/null
  r=()
  for i in 1 2 3; do timed "$tpuctl" pool ssh --command true; r+=("$ms"); done
  one=$(echo "${r[@]}" | median)
  round+=("$one")
  "$tpuctl" cluster create --cluster big --tpu-type "$type" --quiet >/dev/null
  long_command='sleep 100000'
  if ((steps_per_second > 0)); then
    # Without a process per step (256 workers x `sleep` S times a second would be thousands of
    # forks a second on the watching machine, which a pod spreads over its hosts): bash waits
    # with a builtin read on a FIFO it holds open itself.
    long_command="exec bash -c 'f=/tmp/tpuctl-steps-\$\$; mkfifo \$f; exec 3<>\$f; rm -f \$f; i=0; while :; do echo \"completed step: \$i\"; i=\$((i+1)); read -t $(awk -v s="$steps_per_second" 'BEGIN {printf "%.3f", 1/s}') -u 3 || :; done'"
  fi
  timed "$tpuctl" workload create --cluster big --workload long --command "$long_command"
  t=$ms
  s=$(state_of long)
  [[ $rc == 0 && $s == "RUNNING 0 $hosts 0" ]] || echo "workload_scale.sh: run $run: after create: '$s' (exit $rc): $(cat "$scratch/last.err")" >&2
  launch+=("$(ratio "$t" "$one")")

  # The watch: the monitor's CPU over the whole of it, and no LOST at its end.
  monitor=
  for _ in $(seq 100); do
    monitor=$(pgrep -f -- "--log-file $XDG_STATE_HOME/tpuctl/logs/workload-long.log workload monitor" | head -n 1 || true)
    [[ -n $monitor ]] && break
    sleep 0.1
  done
  c0=$(cpu_ticks "${monitor:-0}") w0=$(now_ms)
  sleep $((watch_minutes * 60))
  c1=$(cpu_ticks "${monitor:-0}") w1=$(now_ms)
  monitor_cpu+=("$(awk -v c=$((c1 - c0)) -v t="$tick" -v ms=$((w1 - w0)) 'BEGIN {printf "%.2f", 100 * c / t / (ms / 1000)}')")
  s=$(state_of long)
  if [[ $s == "RUNNING 0 $hosts 0" ]]; then watch_lost+=(0); else watch_lost+=(1); fi
  echo "workload_scale.sh: run $run: round $one ms; after the watch: $s (monitor pid ${monitor:-none})" >&2
  timed "$tpuctl" workload delete long
  del+=("$(ratio "$ms" "$one")")

  # A real loss: the last host dies with everything on it.
  "$tpuctl" workload create --cluster big --workload victim --command 'sleep 100000' >/dev/null
  sleep 5
  host=$("$tpuctl" workload describe victim --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["workers"][-1]["host"])')
  listener=$(cat "$pool_dir/hosts/$host/sshd.pid")
  victims="$listener $(pgrep -P "$listener" | tr '\n' ' ' || true)"
  for p in $(pgrep -P "$listener" || true); do victims="$victims $(pgrep -P "$p" | tr '\n' ' ' || true)"; done
  uid=$("$tpuctl" workload describe victim --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["uid"])')
  for pid in $({ grep -l -z -F "TPUCTL_WORKLOAD_UID=$uid" /proc/[0-9]*/environ 2>/dev/null || true; } | sed -n 's|/proc/\([0-9]*\)/environ|\1|p'); do
    grep -q -z -x -F "TPU_WORKER_ID=$((hosts - 1))" "/proc/$pid/environ" 2>/dev/null && victims="$victims $pid"
  done
  killed=$(now_ms)
  kill -9 $victims 2>/dev/null || true
  noticed=
  until_ms=$((killed + 90000))
  while (($(now_ms) < until_ms)); do
    s=$(state_of victim)
    # Noticed: a worker LOST (the monitor then stops the others and fails the workload).
    if [[ $s == FAILED* || ! $s =~ \ 0$ ]]; then noticed=$(now_ms); break; fi
    sleep 0.2
  done
  [[ -n $noticed ]] && loss+=("$(awk -v ms=$((noticed - killed)) 'BEGIN {printf "%.1f", ms / 1000}')")
  echo "workload_scale.sh: run $run: host $host killed; $s after $((${noticed:-$(now_ms)} - killed)) ms" >&2

  timed "$tpuctl" cluster delete big --force
  cdel+=("$(ratio "$ms" "$one")")
  timed "$tpuctl" pool local-down --force
  down+=("$(ratio "$ms" "$one")")
  last=$(now_ms)
  la_last=$(awk '{print $1}' /proc/loadavg)
  left+=("$(through_pool | wc -l)")
  # The machine is calm once, for 5 s in a row, the median over each second of the tasks that
  # run or wait for the disk (procs_running + procs_blocked, 10 samples a second) is under 4.
  quiet= streak=0 since=
  while (($(now_ms) < last + 120000)) && ((streak < 5)); do
    n=$(for _ in $(seq 10); do
      awk '/^procs_(running|blocked)/ {s += $2} END {print s - 1}' /proc/stat # less this awk
      sleep 0.1
    done | median)
    if awk -v n="$n" 'BEGIN {exit !(n < 4)}'; then
      ((streak == 0)) && since=$(now_ms)
      streak=$((streak + 1))
    else
      streak=0
    fi
  done
  ((streak >= 5)) && quiet=$since
  calm+=("$(awk -v ms=$((${quiet:-$((last + 120000))} - last)) 'BEGIN {printf "%.0f", ms / 1000}')")
  load30+=("$(awk '{print $1}' /proc/loadavg)")
  # The 1-minute load average itself: the kernel's exponential average (time constant 60 s)
  # falls from L to 4 in no less than 60 ln(L/4) s even on an idle machine; next to that bound.
  while (($(now_ms) < last + 300000)) && awk '{exit !($1 >= 4)}' /proc/loadavg; do sleep 1; done
  la_under4+=("$(awk -v ms=$(($(now_ms) - last)) 'BEGIN {printf "%.0f", ms / 1000}')")
  la_idle+=("$(awk -v l="$la_last" 'BEGIN {printf "%.0f", (l > 4) ? 60 * log(l / 4) : 0}')")
  echo "workload_scale.sh: run $run: launch ${launch[-1]}, delete ${del[-1]}, cluster delete ${cdel[-1]}, local-down ${down[-1]} rounds; monitor ${monitor_cpu[-1]} % of a core; load under 4 after ${calm[-1]} s; ${left[-1]} left" >&2
  cleanup
done

echo "| measure | median (min - max) | target |"
echo "|---|---|---|"
echo "| one SSH round (\`pool ssh --command true\`, $hosts hosts), ms | $(cell "${round[@]}") | |"
echo "| workload create -> every worker RUNNING, rounds | $(cell "${launch[@]}") | <= 1.5 |"
echo "| runs with a false LOST during the watch | $(echo "${watch_lost[@]}" | tr ' ' '\n' | awk '{s+=$1} END {print s}') of $runs | 0 |"
echo "| monitor CPU over the watch, % of one core | $(cell "${monitor_cpu[@]}") | <= 2 |"
echo "| workload delete, rounds | $(cell "${del[@]}") | <= 1 |"
echo "| a host killed -> a worker LOST, s | $(cell "${loss[@]}") | <= 16 |"
echo "| cluster delete --force, rounds | $(cell "${cdel[@]}") | <= 1 |"
echo "| pool local-down, rounds | $(cell "${down[@]}") | <= 1 |"
echo "| last command -> runnable tasks under 4 (5 s in a row), s | $(cell "${calm[@]}") | <= 30 |"
echo "| 1-minute load average then | $(cell "${load30[@]}") | |"
echo "| last command -> 1-minute load average under 4, s | $(cell "${la_under4[@]}") | <= 30 |"
echo "| ... an idle machine's decay from the load average at the last command, s | $(cell "${la_idle[@]}") | |"
echo "| processes left with the pool's tag after local-down | $(cell "${left[@]}") | 0 |"
