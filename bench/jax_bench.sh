#!/usr/bin/env bash
# JAX on a slice, measured as a user sees it (README "JAX on a slice, as on a TPU VM").
#
#   bench/jax_bench.sh [--runs N] [--parts launch,recovery,goodput,clean] [--goodput-minutes M]
#                      [--recovery-configs with,without,spare]
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
# goodput (not run by default: --parts goodput): train_orbax.py on 8 workers (two
#   v5litepod-16 of a 16-host pool, 4 spares) for --goodput-minutes (10) with an eviction, a host loss and a
#   straggler injected at fixed shares of the span; tpuctl's goodput and badput buckets against
#   the ground truth from the program's own journal (bench/jax/goodput_truth.py), within 2 % of
#   wall time, and the time from each failure to the first new step. One run.
# clean (not run by default: --parts clean): the same job for --goodput-minutes with nothing
#   injected, beside two busy loops that take both cores: how often a worker is flagged a
#   straggler (it should never be).
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
goodput_minutes=10
configs="with without spare"
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    --goodput-minutes) goodput_minutes=${2:?}; shift 2 ;;
    --recovery-configs) configs=${2//,/ }; shift 2 ;;
    --parts) parts=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
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

# The processes of worker $2 of workload $1 (its index in `workload describe`'s workers; their
# pids, one a line): those whose environment holds its uid, its TPU_WORKER_ID (numbered within
# its slice) and, on more than one slice, its MEGASCALE_SLICE_ID. With $3 = python: only the
# Python ones.
worker_pids() {
  local uid slice id pid env
  read -r uid slice id < <("$tpuctl" workload describe "$1" --format json | python3 -c '
import json, sys
d = json.load(sys.stdin)
w = d["workers"][int(sys.argv[1])]
print(d["uid"], w["slice"] if len(d["slices"]) > 1 else "-", w["worker"])' "$2")
  for pid in $(grep -l "TPUCTL_WORKLOAD_UID=$uid" /proc/[0-9]*/environ 2>/dev/null |
    cut -d/ -f3); do
    env=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null) || continue
    grep -qx "TPU_WORKER_ID=$id" <<<"$env" || continue
    [[ $slice == - ]] || grep -qx "MEGASCALE_SLICE_ID=$slice" <<<"$env" || continue
    [[ ${3:-} == python && $(cat "/proc/$pid/comm" 2>/dev/null) != python* ]] || echo "$pid"
  done
}
# A host loss: the sshd of worker $2 of workload $1 and the job's processes there, SIGKILLed at
# once (as a machine that dies).
lose_worker() {
  local host pid
  host=$("$tpuctl" workload describe "$1" --format json | python3 -c \
    'import json,sys; print(json.load(sys.stdin)["workers"][int(sys.argv[1])]["host"])' "$2")
  local pids
  pids=$(worker_pids "$1" "$2")
  kill -9 "$(cat "$XDG_STATE_HOME"/tpuctl/local-pools/*/hosts/"$host"/sshd.pid)"
  for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
}

recovery_part() {
  declare -A took
  for round in $(seq "$runs"); do
    for cache in $configs; do
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
      t0=$(now_ms)
      lose_worker train 1
      t1=$(first_step_after train $next 300)
      [[ $t1 == - ]] && took[loss,$cache]+=" -" || took[loss,$cache]+=" $((t1 - t0))"
      log "recovery ($cache cache): host loss to first new step: $([[ $t1 == - ]] && echo - || echo $((t1 - t0))) ms"
      # Where the time went: the monitor's log from the loss on (stderr).
      tail -n 25 "$XDG_STATE_HOME/tpuctl/logs/workload-train.log" 2>/dev/null | sed 's/^/    /' >&2 || true
      "$tpuctl" cluster delete r --force -q >/dev/null 2>&1 || true
      scratch_cleanup
    done
  done
  echo "### Recovery: failure to the job's first new step (train_orbax.py, 4 workers)"
  echo
  echo "| failure | with the compilation cache | without | with the cache, onto spares |"
  echo "|---|---|---|---|"
  echo "| eviction (a very-high workload) | $(ms_cell ${took[evict,with]:-}) | $(ms_cell ${took[evict,without]:-}) | |"
  echo "| host loss (sshd and job SIGKILLed) | $(ms_cell ${took[loss,with]:-}) | $(ms_cell ${took[loss,without]:-}) | $(ms_cell ${took[loss,spare]:-}) |"
  echo
}

# ----------------------------------------------------------------------------------- goodput
# Prints the workload's step goodput ($1) as JSON, with "end_ms": the middle of the describe.
steps_goodput() {
  local a b
  a=$(now_ms)
  "$tpuctl" workload describe "$1" --format json >"$scratch/describe.json"
  b=$(now_ms)
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
g = dict(d["goodput"]["steps"])
g.update(g.pop("badput"))
g["end_ms"] = (int(sys.argv[2]) + int(sys.argv[3])) // 2
g["stragglers"] = [i for i, x in enumerate(d["workers"]) if x.get("straggler")]
print(json.dumps(g))' "$scratch/describe.json" "$a" "$b"
}

goodput_part() {
  local minutes=${goodput_minutes}
  local span=$((minutes * 60))
  fresh_home
  # 16 hosts (4x4): two v5litepod-16 slices (2x2 hosts each) and a 2x2 block of spares.
  log "goodput: a local pool of 16 hosts (4 spares), 8 workers training for $minutes min"
  "$tpuctl" pool local-up --hosts 16 --address-base 127.173.3.2 -q >/dev/null
  "$tpuctl" pool spares 4 -q >/dev/null
  "$tpuctl" cluster create --cluster g --tpu-type v5litepod-16 --num-slices 2 -q >/dev/null
  local journal=$scratch/journal.jsonl
  "$tpuctl" workload create --cluster g --workload train --num-slices 2 --priority low \
    --checkpoint-dir "$scratch/ckpt" --straggler-interval 30s -q \
    --env "TRAIN_JOURNAL=$journal" --env "BENCH_OUT=$marker" --command \
    "python3 $root/tests/jax/train_orbax.py --steps 1000000 --save-every 10 --step-seconds 0.2" >/dev/null
  local start
  start=$(now_ms)
  first_step_after train 0 600 >/dev/null
  # The failures, at fixed shares of the span: an eviction, a host loss, a straggler.
  local evict_at=$((start + span * 200)) loss_at=$((start + span * 450))
  local slow_at=$((start + span * 650)) end_at=$((start + span * 1000))
  # Waits until $1 (ms), looking every 5 s for a worker flagged a straggler: before the
  # straggler is injected, any flag is a false one.
  local false_flags=0
  sleep_until() {
    while (($(now_ms) < $1)); do
      if [[ -n ${clean:-} ]] && steps_goodput train | python3 -c \
        'import json,sys; sys.exit(0 if json.load(sys.stdin)["stragglers"] else 1)'; then
        false_flags=$((false_flags + 1))
        log "goodput: a worker flagged before any straggler was injected"
      fi
      local d=$(($1 - $(now_ms)))
      ((d > 5000)) && d=5000
      ((d > 0)) && sleep "$(secs "$d")"
    done
    true
  }
  local clean=1
  sleep_until "$evict_at"
  log "goodput: eviction (a very-high workload on one slice)"
  local t_evict t_loss t_slow t_flag=- first
  t_evict=$(now_ms)
  "$tpuctl" workload create --cluster g --workload urgent --priority very-high -q \
    --command true >/dev/null
  first=$(first_step_after train 1 600)
  log "goodput: eviction to first new step: $(secs $((first - t_evict))) s"
  sleep_until "$loss_at"
  log "goodput: host loss (worker 5: its sshd and its processes)"
  t_loss=$(now_ms)
  lose_worker train 5
  first=$(first_step_after train 2 600)
  log "goodput: host loss to first new step: $(secs $((first - t_loss))) s"
  sleep_until "$slow_at"
  log "goodput: a straggler (worker 2's Python stopped 0.3 s of every 0.6 s, for up to 120 s)"
  local pid
  pid=$(worker_pids train 2 python | head -n 1)
  clean=
  t_slow=$(now_ms)
  while (($(now_ms) < t_slow + 120000)); do
    kill -STOP "$pid" 2>/dev/null || break
    sleep 0.3
    kill -CONT "$pid" 2>/dev/null || break
    sleep 0.3
    if [[ $t_flag == - ]] && steps_goodput train | python3 -c \
      'import json,sys; sys.exit(0 if 2 in json.load(sys.stdin)["stragglers"] else 1)'; then
      t_flag=$(now_ms)
      log "goodput: worker 2 named a straggler after $(secs $((t_flag - t_slow))) s"
    fi
  done
  kill -CONT "$pid" 2>/dev/null || true
  sleep_until "$end_at"
  local tp truth
  tp=$(steps_goodput train)
  truth=$(python3 "$here/jax/goodput_truth.py" "$journal" "$(echo "$tp" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["end_ms"])')")
  echo "### Goodput by steps against the program's own journal ($minutes min, 8 workers)"
  echo
  echo "tests/jax/train_orbax.py on two v5litepod-16 slices (8 workers, 4 spares held back),"
  echo "with an eviction at $((span / 5)) s, a host loss at $((span * 45 / 100)) s and a"
  echo "straggler from $((span * 65 / 100)) s. tpuctl's figures come from \`workload describe\`;"
  echo "the truth from process 0's journal of its own starts, steps, saves and restores"
  echo "(bench/jax/goodput_truth.py, Google's rules over the whole journal). Budget: 2 % of wall."
  echo
  python3 - "$tp" "$truth" "$t_evict" "$t_loss" "$t_slow" "$t_flag" "$false_flags" <<'PY'
import json, sys
tp, truth = json.loads(sys.argv[1]), json.loads(sys.argv[2])
t_evict, t_loss, t_slow = (int(x) for x in sys.argv[3:6])
t_flag, false_flags = sys.argv[6], int(sys.argv[7])
wall = truth["total_ms"]
rows = [("total", "total_ms"), ("productive", "productive_ms"),
        ("program startup", "program_startup_ms"),
        ("wasted progress from disruption", "wasted_progress_from_disruption_ms"),
        ("infrastructure recovery from disruption", "infrastructure_recovery_from_disruption_ms"),
        ("checkpoint save", "unproductive_checkpoint_save_ms"),
        ("checkpoint restore", "unproductive_checkpoint_restore_ms"), ("other", "other_ms")]
print("| | tpuctl | truth | difference, % of wall |")
print("|---|---|---|---|")
worst = 0.0
for label, key in rows:
    d = abs(tp[key] - truth[key]) * 100.0 / wall
    worst = max(worst, d)
    print(f"| {label} | {tp[key] / 1000:.1f} s | {truth[key] / 1000:.1f} s | {d:.2f} |")
print(f"| goodput | {tp['goodput'] * 100:.1f} % | {truth['goodput'] * 100:.1f} % | "
      f"{abs(tp['goodput'] - truth['goodput']) * 100:.2f} points |")
print(f"| disruptions | {tp['disruptions']} | {truth['disruptions']} | |")
print(f"| ideal step | {tp['ideal_step_ms']} ms | {truth['ideal_step_ms']} ms | |")
print()
firsts = truth["first_steps"]
after = lambda t: next((f - t for f in firsts if f > t), None)
fmt = lambda ms: "-" if ms is None else f"{ms / 1000:.1f} s"
print(f"Failure to the first new step (journal): eviction {fmt(after(t_evict))}, host loss "
      f"{fmt(after(t_loss))} (onto a spare). Straggler named after "
      f"{'not within 120 s' if t_flag == '-' else fmt(int(t_flag) - t_slow)} "
      f"(--straggler-interval 30s); looks every 5 s before it that found a worker flagged: "
      f"{false_flags}. Largest bucket difference: {worst:.2f} % of wall "
      f"({'within' if worst <= 2.0 else 'OVER'} the 2 % budget).")
print()
PY
  "$tpuctl" cluster delete g --force -q >/dev/null 2>&1 || true
  kill_marked "BENCH_OUT=$marker"
  scratch_cleanup
}

# ------------------------------------------------------------------------------------- clean
# A clean run on a loaded machine: train_orbax.py on 8 workers for --goodput-minutes with
# nothing injected, while two busy loops (every core of this 2-core host taken, at the same
# priority) load the machine alike for every worker; a look every 5 s at who is flagged.
clean_part() {
  local minutes=${goodput_minutes}
  fresh_home
  log "clean: a local pool of 8 hosts, 8 workers training for $minutes min beside 2 busy loops"
  "$tpuctl" pool local-up --hosts 8 --address-base 127.173.4.2 -q >/dev/null
  "$tpuctl" cluster create --cluster g --tpu-type v5litepod-16 --num-slices 2 -q >/dev/null
  "$tpuctl" workload create --cluster g --workload train --num-slices 2 \
    --checkpoint-dir "$scratch/ckpt" --straggler-interval 60s -q --env "BENCH_OUT=$marker" \
    --command "python3 $root/tests/jax/train_orbax.py --steps 1000000 --save-every 10 --step-seconds 0.2" >/dev/null
  first_step_after train 0 600 >/dev/null
  local loads=() i
  for i in 1 2; do
    BENCH_OUT=$marker sh -c 'while :; do :; done' &
    loads+=($!)
  done
  local until=$(($(now_ms) + minutes * 60000)) looks=0 flagged=0
  while (($(now_ms) < until)); do
    sleep 5
    looks=$((looks + 1))
    if steps_goodput train | python3 -c \
      'import json,sys; sys.exit(0 if json.load(sys.stdin)["stragglers"] else 1)'; then
      flagged=$((flagged + 1))
      log "clean: a worker flagged"
    fi
  done
  kill "${loads[@]}" 2>/dev/null || true
  wait "${loads[@]}" 2>/dev/null || true
  local events running
  events=$("$tpuctl" events --type STRAGGLER --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  running=$("$tpuctl" workload describe train --format json | python3 -c \
    'import json,sys; d=json.load(sys.stdin); print(d["state"], d["attempt"], d["goodput"]["steps"]["ideal_step_ms"])')
  echo "### A clean run on a loaded machine ($minutes min, 8 workers, --straggler-interval 60s)"
  echo
  echo "train_orbax.py on two v5litepod-16 slices, nothing injected, two busy loops taking both"
  echo "cores beside it the whole time. Looks at \`workload describe\` every 5 s: $looks; with a"
  echo "worker flagged: $flagged; STRAGGLER events: $events. The workload afterwards (state,"
  echo "attempt, ideal step ms): $running."
  echo
  "$tpuctl" cluster delete g --force -q >/dev/null 2>&1 || true
  kill_marked "BENCH_OUT=$marker"
  scratch_cleanup
}

for part in ${parts//,/ }; do
  case $part in
    launch) launch_part ;;
    recovery) recovery_part ;;
    goodput) goodput_part ;;
    clean) clean_part ;;
    *) echo "jax_bench.sh: unknown part '$part' (launch, recovery, goodput, clean)" >&2; exit 2 ;;
  esac
done
