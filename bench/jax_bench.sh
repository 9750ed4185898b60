#!/usr/bin/env bash
# JAX on a slice, measured as a user sees it (README "JAX on a slice, as on a TPU VM").
#
#   bench/jax_bench.sh [--runs N] [--parts launch,recovery]
#
# launch: the seeds' hello-world program (tests/jax/my_parallel_tutorial.py, the mesh shaped
#   for the job) on 4 workers (one v5litepod-16) and on 8 (two of them: 32 devices, a (4, 8)
#   mesh, and a 4096 x 4096 matrix: 8 processes of the 8192 one do not fit 24 GiB), started three
#   ways with the same environment: `tpuctl workload create`, a plain `ssh
#   &` loop and pdsh (-R ssh). Each worker's command is the very line `tpuctl ssh --dry-run`
#   would send it (the worker environment, PATH, PYTHONPATH), its output read by a line stamper
#   (bench/jax/stamp.sh) that notes when "Computation complete." appears: the seed prints it right
#   after dispatching the jitted product, so the time from the launch to the last worker's line
#   is launch + Python + JAX start-up + the distributed runtime + the data + the compile. The
#   jobs are stopped there (the product itself is not the launcher's cost). tpuctl's runs get
#   JAX_ENABLE_COMPILATION_CACHE=false, since the baselines have no cache. The three rotate
#   order every round; the table gives medians and each launcher's ratio to the faster baseline.
# recovery: tests/jax/train_orbax.py (save every 10 steps, 0.2 s steps) on one v5litepod-16 of
#   an 8-host pool, with the cluster's compilation cache and without (--env
#   JAX_ENABLE_COMPILATION_CACHE=false): the time from an eviction (a very-high workload that
#   exits at once) and from a host loss (its sshd and the job's processes SIGKILLed) to the
#   job's first step after it (the "first_step" event every worker's new process reports).
#   The host loss is repaired onto the pool's 4 other hosts: free ones, and, in a third round
#   with the cache, the same hosts held back as spares (`pool spares 4`). With neither, the
#   repair waits for hosts (nothing to time).
#
# Uses ${BUILD_DIR:-build}/cli/tpuctl; needs scripts/deps.sh --frameworks --bench (JAX, pdsh).
# Each part has its own scratch HOME and local pool (127.173.x); everything it started is
# stopped by PID (pool local-down, the stamped jobs by their marker). Markdown on stdout,
# progress on stderr. About 4 minutes per launch round and 8 per recovery round on 2 cores.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=3
parts=launch,recovery
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    --parts) parts=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "jax_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[0-9]+$ && $runs -ge 1 ]] || { echo "jax_bench.sh: --runs must be >= 1" >&2; exit 2; }
tpuctl=$root/${BUILD_DIR:-build}/cli/tpuctl
[[ -x $tpuctl ]] || (cd "$root" && scripts/build.sh --target tpuctl >&2)
command -v pdsh >/dev/null || { echo "jax_bench.sh: pdsh not found: run scripts/deps.sh --bench" >&2; exit 1; }
/opt/tpuctl/frameworks/bin/python3 -c 'import jax, orbax.checkpoint' 2>/dev/null ||
  { echo "jax_bench.sh: no JAX in /opt/tpuctl/frameworks: run scripts/deps.sh --frameworks" >&2; exit 1; }

scratch=
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
marker=
cleanup() {
  if [[ -n $marker ]]; then
    pkill -9 -f -- "$marker" 2>/dev/null || true
    kill_marked "BENCH_OUT=$marker"
  fi
  scratch_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { printf '[jax-bench %s] %s\n' "$(date +%T)" "$*" >&2; }
# SIGKILLs every process whose environment holds $1 (a run's BENCH_OUT=DIR: its jobs, whatever
# their command lines say).
kill_marked() {
  local pid
  for pid in $(grep -lzF -- "$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    kill -9 "$pid" 2>/dev/null || true
  done
}
fresh_home() {
  scratch=$(mktemp -d /tmp/tpuctl-jax-bench-XXXXXX)
  chmod 755 "$scratch"
  export HOME=$scratch XDG_STATE_HOME=$scratch/state XDG_CONFIG_HOME=$scratch/config
  unset TPUCTL_STATE TPUCTL_POOL
  marker=$scratch/run
  mkdir -p "$marker"
}

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "## JAX on a slice: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($cpu)"
echo
echo "$("$tpuctl" version 2>/dev/null | head -n 1);" \
  "$(/opt/tpuctl/frameworks/bin/python3 -c 'import jax; print("JAX", jax.__version__)'); $runs runs."
echo

# ------------------------------------------------------------------------------------ launch
# Waits until $2 stamp files exist in $1 (one per worker) or $3 seconds pass; prints the latest
# stamp (ms), or "-" on timeout.
wait_stamps() {
  local dir=$1 want=$2 until=$(($(now_ms) + $3 * 1000)) n
  while (($(now_ms) < until)); do
    n=$(find "$dir" -maxdepth 1 -name 'done.*' ! -name '*.tmp' 2>/dev/null | wc -l)
    if ((n >= want)); then
      for f in "$dir"/done.*; do [[ $f == *.tmp ]] || cat "$f"; done | sort -n | tail -n 1
      return 0
    fi
    sleep 0.05
  done
  echo "-"
}
# The seed's program with its mesh shaped for $1 devices and an $2 x $2 matrix, in the scratch
# directory.
program_for() {
  local devices=$1 size=$2 out=$scratch/my_parallel_tutorial_$1_$2.py
  sed "s/create_device_mesh((4, 4))/create_device_mesh((4, $((devices / 4))))/; s/(8192, 8192)/($size, $size)/" \
    "$root/tests/jax/my_parallel_tutorial.py" >"$out"
  echo "$out"
}

launch_part() {
  fresh_home
  log "launch: a local pool of 8 hosts"
  "$tpuctl" pool local-up --hosts 8 --address-base 127.173.1.2 -q >/dev/null
  # The local pool's own client key and known_hosts, for the baselines' ssh.
  local key known user
  key=$(echo "$XDG_STATE_HOME"/tpuctl/local-pools/*/client_ed25519)
  known=$(echo "$XDG_STATE_HOME"/tpuctl/local-pools/*/known_hosts)
  user=$(id -un)
  "$tpuctl" cluster create --cluster b4 --tpu-type v5litepod-16 -q >/dev/null
  declare -A took
  for size in 4 8; do
    local cluster=b$size program
    if [[ $size == 8 ]]; then
      "$tpuctl" cluster delete b4 --force -q >/dev/null
      "$tpuctl" cluster create --cluster b8 --tpu-type v5litepod-16 --num-slices 2 -q >/dev/null
    fi
    # 8 processes of the seed's 8192 x 8192 product need ~3.5 GB each: more than a 24 GiB host
    # holds. The 8-worker row runs it at 4096 x 4096.
    local matrix=8192
    [[ $size == 8 ]] && matrix=4096
    program=$(program_for $((size * 4)) $matrix)
    local stamp="bash $root/bench/jax/stamp.sh"
    local job="env OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1 python3 $program"
    # Each worker's line as tpuctl would send it: the environment, PATH and PYTHONPATH.
    local qr
    qr=$("$tpuctl" cluster describe "$cluster" --format json | python3 -c \
      'import json,sys; print(json.load(sys.stdin)["queued_resource"])')
    "$tpuctl" ssh "$qr" --worker=all --dry-run --format json \
      --command "$stamp \"\$BENCH_OUT\" $job" >"$scratch/plan.json"
    rm -f "$scratch"/run-*.sh
    python3 -c '
import json, sys
for w in json.load(open(sys.argv[1] + "/plan.json")):
    with open(sys.argv[1] + "/run-" + w["address"] + ".sh", "w") as f:
        f.write(w["command"] + "\n")' "$scratch"
    for round in $(seq "$runs"); do
      local order=(tpuctl ssh-loop pdsh)
      local shift_by=$(((round - 1) % 3))
      order=("${order[@]:shift_by}" "${order[@]:0:shift_by}")
      for how in "${order[@]}"; do
        local out=$marker/$size-$how-$round
        mkdir -p "$out"
        local t0 end
        t0=$(now_ms)
        case $how in
          tpuctl)
            "$tpuctl" workload create --cluster "$cluster" --workload "l$size-$round" --num-slices all \
              --env BENCH_OUT="$out" --env JAX_ENABLE_COMPILATION_CACHE=false \
              --command "$stamp \"\$BENCH_OUT\" $job" -q >/dev/null
            end=$(wait_stamps "$out" "$size" 300)
            "$tpuctl" workload delete "l$size-$round" --force -q >/dev/null 2>&1 || true
            ;;
          ssh-loop)
            local pids=()
            for f in "$scratch"/run-*.sh; do
              local addr=${f##*/run-}
              addr=${addr%.sh}
              ssh -n -i "$key" -o UserKnownHostsFile="$known" -o StrictHostKeyChecking=yes \
                -o BatchMode=yes -p 2222 "$user@$addr" "BENCH_OUT=$out; export BENCH_OUT; . $f" \
                >/dev/null 2>&1 &
              pids+=($!)
            done
            end=$(wait_stamps "$out" "$size" 300)
            kill_marked "BENCH_OUT=$out"
            kill "${pids[@]}" 2>/dev/null || true
            wait "${pids[@]}" 2>/dev/null || true
            ;;
          pdsh)
            local hosts
            hosts=$(cd "$scratch" && ls run-*.sh | sed 's/^run-//; s/\.sh$//' | paste -sd,)
            PDSH_SSH_ARGS_APPEND="-i $key -o UserKnownHostsFile=$known -o StrictHostKeyChecking=yes -o BatchMode=yes -p 2222" \
              pdsh -R ssh -l "$user" -f "$size" -w "$hosts" \
              "BENCH_OUT=$out; export BENCH_OUT; . $scratch/run-\$(echo \$SSH_CONNECTION | cut -d' ' -f3).sh" \
              >/dev/null 2>&1 &
            local pdsh_pid=$!
            end=$(wait_stamps "$out" "$size" 300)
            kill_marked "BENCH_OUT=$out"
            kill "$pdsh_pid" 2>/dev/null || true
            wait "$pdsh_pid" 2>/dev/null || true
            ;;
        esac
        # Nothing of this run may outlive it.
        kill_marked "BENCH_OUT=$out"
        while grep -qlzF -- "BENCH_OUT=$out" /proc/[0-9]*/environ 2>/dev/null; do sleep 0.2; done
        if [[ $end == - ]]; then
          log "launch: $how on $size workers did not reach every worker's first step"
          took[$size,$how]+=" -"
        else
          took[$size,$how]+=" $((end - t0))"
          log "launch: $how on $size workers: $((end - t0)) ms"
        fi
      done
    done
  done
  echo "### Launch: \`workload create\` to every worker's first step (the seeds' matmul dispatched)"
  echo
  echo "| workers (matrix) | tpuctl workload create | ssh loop | pdsh | tpuctl / faster baseline |"
  echo "|---|---|---|---|---|"
  for size in 4 8; do
    local label="4 (8192)"
    [[ $size == 8 ]] && label="8 (4096)"
    local t s p
    t=$(echo ${took[$size,tpuctl]} | median)
    s=$(echo ${took[$size,ssh-loop]} | median)
    p=$(echo ${took[$size,pdsh]} | median)
    local ratio
    ratio=$(awk -v t="$t" -v s="$s" -v p="$p" 'BEGIN {b = (s < p ? s : p); if (t == "-" || b <= 0) print "-"; else printf "%.3f", t / b}')
    echo "| $label | $(ms_cell ${took[$size,tpuctl]}) | $(ms_cell ${took[$size,ssh-loop]}) | $(ms_cell ${took[$size,pdsh]}) | $ratio |"
  done
  echo
  scratch_cleanup
}

# ---------------------------------------------------------------------------------- recovery
# The latest "first_step" event time (ms) of the workload's current attempt once every worker
# of attempt $2 reported one, else "-" after $3 seconds.
first_step_after() {
  local name=$1 attempt=$2 until=$(($(now_ms) + $3 * 1000)) t
  while (($(now_ms) < until)); do
    t=$("$tpuctl" workload describe "$name" --format json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
w = [x for x in d["workers"] if x["attempt"] == int(sys.argv[1]) and "first_step" in x["events"]]
print(max(x["events"]["first_step"]["time_ms"] for x in w) if d["attempt"] == int(sys.argv[1]) and len(w) == len(d["workers"]) else "")' "$attempt" 2>/dev/null || true)
    if [[ -n $t ]]; then echo "$t"; return 0; fi
    sleep 0.1
  done
  echo "-"
}

recovery_part() {
  declare -A took
  for round in $(seq "$runs"); do
    for cache in with without spare; do
      fresh_home
      "$tpuctl" pool local-up --hosts 8 --address-base 127.173.2.2 -q >/dev/null
      [[ $cache == spare ]] && "$tpuctl" pool spares 4 -q >/dev/null
      "$tpuctl" cluster create --cluster r --tpu-type v5litepod-16 -q >/dev/null
      local extra=()
      [[ $cache == without ]] && extra=(--env JAX_ENABLE_COMPILATION_CACHE=false)
      "$tpuctl" workload create --cluster r --workload train --checkpoint-dir "$scratch/ckpt" \
        --priority low "${extra[@]}" -q --command \
        "python3 $root/tests/jax/train_orbax.py --steps 100000 --save-every 10 --step-seconds 0.2" >/dev/null
      first_step_after train 0 300 >/dev/null
      sleep 3
      local t0 t1 next=1
      if [[ $cache != spare ]]; then
        # An eviction: a very-high workload that exits at once.
        t0=$(now_ms)
        "$tpuctl" workload create --cluster r --workload urgent --priority very-high -q \
          --command true >/dev/null
        t1=$(first_step_after train 1 300)
        [[ $t1 == - ]] && took[evict,$cache]+=" -" || took[evict,$cache]+=" $((t1 - t0))"
        log "recovery ($cache cache): eviction to first new step: $([[ $t1 == - ]] && echo - || echo $((t1 - t0))) ms"
        sleep 3
        next=2
      fi
      # A host loss: worker 1's sshd and the job's processes there, SIGKILLed at once.
      local host uid
      host=$("$tpuctl" workload describe train --format json | python3 -c \
        'import json,sys; print(json.load(sys.stdin)["workers"][1]["host"])')
      uid=$("$tpuctl" workload describe train --format json | python3 -c \
        'import json,sys; print(json.load(sys.stdin)["uid"])')
      t0=$(now_ms)
      kill -9 "$(cat "$XDG_STATE_HOME"/tpuctl/local-pools/*/hosts/"$host"/sshd.pid)"
      for pid in $(grep -l "TPUCTL_WORKLOAD_UID=$uid" /proc/[0-9]*/environ 2>/dev/null |
        cut -d/ -f3); do
        if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'TPU_WORKER_ID=1'; then
          kill -9 "$pid" 2>/dev/null || true
        fi
      done
      t1=$(first_step_after train $next 300)
      [[ $t1 == - ]] && took[loss,$cache]+=" -" || took[loss,$cache]+=" $((t1 - t0))"
      log "recovery ($cache cache): host loss to first new step: $([[ $t1 == - ]] && echo - || echo $((t1 - t0))) ms"
      "$tpuctl" cluster delete r --force -q >/dev/null 2>&1 || true
      scratch_cleanup
    done
  done
  echo "### Recovery: failure to the job's first new step (train_orbax.py, 4 workers)"
  echo
  echo "| failure | with the compilation cache | without | with the cache, onto spares |"
  echo "|---|---|---|---|"
  echo "| eviction (a very-high workload) | $(ms_cell ${took[evict,with]}) | $(ms_cell ${took[evict,without]}) | |"
  echo "| host loss (sshd and job SIGKILLed) | $(ms_cell ${took[loss,with]}) | $(ms_cell ${took[loss,without]}) | $(ms_cell ${took[loss,spare]}) |"
  echo
}

for part in ${parts//,/ }; do
  case $part in
    launch) launch_part ;;
    recovery) recovery_part ;;
    *) echo "jax_bench.sh: unknown part '$part' (launch, recovery)" >&2; exit 2 ;;
  esac
done
