#!/usr/bin/env bash
# Load through the state store: C concurrent tpuctl invocations against one pool, SQLite and etcd.
#
#   bench/store_load.sh [--tpuctl PATH] [--hosts N] [--clients "1 8 32"] [--seconds S]
#                       [--backends "sqlite etcd"] [--keep]
#
# Per backend: a local pool of N real sshd hosts on loopback (tpuctl pool local-up, 127.0.190.2
# onwards, port 2222), filled by one ACTIVE slice ('fill', v5litepod-4N, provisioned over SSH).
# With every host claimed, new requests stay WAITING_FOR_RESOURCES, so the load is store and
# scheduler work only, never SSH. Then, for each C of --clients, C bash loops run for S seconds,
# each repeating: qr create lc<C>-<client>-<i> --accelerator-type v5litepod-4 --async,
# qr describe <id> --format json, qr list --format json, qr delete <id>. Every invocation's kind,
# exit status and latency are recorded. After each step: no host claimed twice, every claim's
# owner exists, nothing left but 'fill'.
#
# Store traffic: for etcd, grpc_server_handled_total from etcd's /metrics (tpuctl reaches etcd
# through its HTTP gateway, which calls the gRPC server in-process, so every Range, Txn and lease
# call is counted there), per method; for both backends, commits from the store revision of
# 'tpuctl state info' (SQLite: a counter bumped once per commit; etcd: the etcd revision, bumped
# once per write txn). SQLite reads are not counted anywhere.
#
# etcd (Debian: etcd-server) runs on 127.0.191.1:23791 (peer 23801) with its data in the scratch
# directory. Everything runs in a scratch directory (mktemp -d) with its own HOME,
# XDG_STATE_HOME and XDG_CONFIG_HOME; on exit the pool is stopped (pool local-down), etcd and any
# tpuctl left whose environment names the scratch directory are killed by PID, and the directory
# is removed (--keep keeps it). Needs jq and curl. Markdown on stdout, progress on stderr.
# Exit status: 0 clean, 1 when an invocation failed or a consistency check failed, 2 on a usage
# or set-up error. About 2 minutes with the defaults.
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
tpuctl_bin=$here/../build/cli/tpuctl
hosts=32
clients_list="1 8 32"
seconds=10
backends="sqlite etcd"
keep=0

usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --tpuctl) tpuctl_bin=${2:?}; shift 2 ;;
    --hosts) hosts=${2:?}; shift 2 ;;
    --clients) clients_list=${2:?}; shift 2 ;;
    --seconds) seconds=${2:?}; shift 2 ;;
    --backends) backends=${2:?}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage ;;
    *) echo "store_load.sh: unknown argument '$1'" >&2; usage ;;
  esac
done

die() { echo "store_load.sh: $*" >&2; exit 2; }
[[ $hosts =~ ^[0-9]+$ && $hosts -ge 1 && $hosts -le 200 ]] || die "--hosts must be 1..200, not '$hosts'"
[[ $seconds =~ ^[0-9]+$ && $seconds -ge 1 ]] || die "--seconds must be a whole number >= 1, not '$seconds'"
for c in $clients_list; do
  [[ $c =~ ^[0-9]+$ && $c -ge 1 ]] || die "--clients must be whole numbers >= 1, not '$c'"
done
for b in $backends; do
  [[ $b == sqlite || $b == etcd ]] || die "--backends takes sqlite and/or etcd, not '$b'"
done
[[ -x $tpuctl_bin ]] || die "no tpuctl at '$tpuctl_bin' (build it, or pass --tpuctl PATH)"
tpuctl_bin=$(cd "$(dirname "$tpuctl_bin")" && pwd)/$(basename "$tpuctl_bin")
for tool in jq curl; do
  command -v $tool >/dev/null || die "needs $tool"
done
if [[ " $backends " == *" etcd "* ]]; then
  command -v etcd >/dev/null || die "needs etcd for the etcd backend (apt-get install etcd-server), or pass --backends sqlite"
fi

# The fill slice: a v5e type of exactly --hosts hosts of 4 chips; its chip grid is the pool's shape.
fill_type=v5litepod-$((4 * hosts))
fill_json=$("$tpuctl_bin" topology describe "$fill_type" --format json 2>/dev/null) ||
  die "no v5e accelerator type of $hosts hosts ($fill_type); try --hosts 1, 4, 8, 16, 32 or 64"
[[ $(jq -r .hosts <<<"$fill_json") == "$hosts" ]] ||
  die "$fill_type has $(jq -r .hosts <<<"$fill_json") hosts, not $hosts; try --hosts 1, 4, 8, 16, 32 or 64"
shape=$(jq -r .topology <<<"$fill_json")

address_base=127.0.190.2
ssh_port=2222
etcd_host=127.0.191.1
etcd_client_port=23791
etcd_peer_port=23801
etcd_url=http://$etcd_host:$etcd_client_port

listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
listening $address_base $ssh_port && die "$address_base:$ssh_port is in use (a local pool left running?)"
if [[ " $backends " == *" etcd "* ]]; then
  listening $etcd_host $etcd_client_port && die "$etcd_host:$etcd_client_port is in use (an etcd left running?)"
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/tpuctl-store-load.XXXXXX")
export HOME=$scratch/home XDG_STATE_HOME=$scratch/state XDG_CONFIG_HOME=$scratch/config
unset TPUCTL_STATE TPUCTL_POOL
mkdir -p "$HOME" "$XDG_STATE_HOME" "$XDG_CONFIG_HOME" "$scratch/runs"

state_url=""     # the store of the backend being measured
pool_up=0        # a local pool is running in state_url
etcd_pid=""
client_pids=()

log() { echo "store_load: $*" >&2; }
details=() # per-step lines for the markdown after each backend's table
current_backend=""
note() { log "$current_backend: $*"; details+=("$*"); }
tp() { "$tpuctl_bin" --state "$state_url" "$@"; }

# tpuctl processes whose environment names the scratch directory (background drivers left over).
scratch_tpuctls() {
  local p pid exe
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ $pid == "$$" ]] && continue
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    [[ $(basename "$exe") == tpuctl* ]] || continue
    grep -qzF "XDG_STATE_HOME=$scratch/" "$p/environ" 2>/dev/null && echo "$pid"
  done
  return 0
}

cleanup() {
  local status=$? pid
  set +e
  trap - EXIT INT TERM
  for pid in "${client_pids[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in $(scratch_tpuctls); do
    kill "$pid" 2>/dev/null
  done
  if [[ $pool_up == 1 ]]; then
    tp -q pool local-down --force >/dev/null 2>&1 || log "pool local-down failed"
  fi
  # Any sshd of the pool still there (local-down failed, or was never reached): by PID.
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ $(readlink "$p/exe" 2>/dev/null) == */sshd ]] || continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$scratch/" && kill "$pid" 2>/dev/null
  done
  if [[ -n $etcd_pid ]]; then
    kill "$etcd_pid" 2>/dev/null
    wait "$etcd_pid" 2>/dev/null
  fi
  if [[ $keep == 1 ]]; then
    log "kept $scratch"
  else
    rm -rf "$scratch"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now_us() { local t=$EPOCHREALTIME; echo "${t/./}"; }

# One client: the create/describe/list/delete mix until the deadline (checked before each round,
# so a round that has begun always deletes what it created). Records "kind status microseconds".
client_loop() {
  trap - EXIT INT TERM
  local c=$1 k=$2 deadline=$3 rec=$4 errs=$5 i=0 id
  local tmp=$rec.stderr
  : >"$rec"
  : >"$errs"
  run() {
    local kind=$1 t0 t1 rc=0
    shift
    t0=${EPOCHREALTIME/./}
    "$tpuctl_bin" --state "$state_url" -q "$@" >/dev/null 2>"$tmp" || rc=$?
    t1=${EPOCHREALTIME/./}
    echo "$kind $rc $((t1 - t0))" >>"$rec"
    if [[ $rc != 0 ]]; then
      sed "s|^|$kind $id (exit $rc): |" "$tmp" >>"$errs"
      [[ -s $tmp ]] || echo "$kind $id (exit $rc): (no message)" >>"$errs"
    fi
    return $rc
  }
  while [[ ${EPOCHREALTIME/./} -lt $deadline ]]; do
    id=lc$c-$k-$i
    i=$((i + 1))
    if ! run create qr create "$id" --accelerator-type v5litepod-4 --async; then
      # It may exist all the same: remove it untimed, so the leftover check sees only real losses
      # (exit 0: the failed create had stored it; 4: it had not).
      local rc=0
      "$tpuctl_bin" --state "$state_url" -q qr delete "$id" >/dev/null 2>&1 || rc=$?
      echo "create $id: the untimed delete that followed exited $rc" >>"$errs"
      continue
    fi
    run describe qr describe "$id" --format json || true
    run list qr list --format json || true
    run delete qr delete "$id" || true
  done
  # The CPU time of this client's children (the tpuctl invocations), user + system, in ms.
  local user sys
  times >"$rec.times" # a builtin with a redirection: no subshell, so these are our children
  { read -r _; read -r user sys; } <"$rec.times"
  awk -v u="$user" -v s="$sys" 'BEGIN {
    split(u, a, "m"); split(s, b, "m"); sub(/s$/, "", a[2]); sub(/s$/, "", b[2])
    printf "%.0f\n", 1000 * (a[1] * 60 + a[2] + b[1] * 60 + b[2]) }' >"$rec.cpu"
}

# etcd's counters as "name value" lines, sorted: grpc:METHOD (grpc_server_handled_total summed
# per method), grpc-not-OK, proposals (raft proposals committed: write txns, whether their
# compares held or not, and lease grants and revokes), fsync-sum and fsync-count (WAL fsyncs).
etcd_metrics() {
  curl -sf "$etcd_url/metrics" |
    awk '/^grpc_server_handled_total\{/ {
           m = $0; sub(/.*grpc_method="/, "", m); sub(/".*/, "", m); n["grpc:" m] += $NF
           if ($0 !~ /grpc_code="OK"/) n["grpc-not-OK"] += $NF }
         /^etcd_server_proposals_committed_total / { n["proposals"] = $NF }
         /^etcd_disk_wal_fsync_duration_seconds_sum / { n["fsync-sum"] = $NF }
         /^etcd_disk_wal_fsync_duration_seconds_count / { n["fsync-count"] = $NF }
         END { for (m in n) printf "%s %.6f\n", m, n[m] }' | sort
}

revision() { tp --format json state info | jq -r .revision; }

# "busy total" jiffies of the whole machine (busy: not idle, not iowait), and a process's
# user + system jiffies.
machine_jiffies() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
process_jiffies() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# "problem" lines for the pool and its requests (none: consistent, nothing left but 'fill').
check_consistency() {
  local hosts_json qrs_json
  hosts_json=$(tp --format json pool hosts) || { echo "pool hosts failed"; return; }
  qrs_json=$(tp --format json qr list) || { echo "qr list failed"; return; }
  jq -rn --argjson h "$hosts_json" --argjson q "$qrs_json" --argjson n "$hosts" '
    ($q | map(.id)) as $ids
    | ([$q[] | .id as $id | (.nodes // [])[] | (.workers // [])[] | {host, id: $id}]) as $workers
    | ($h | map({key: .name, value: .}) | from_entries) as $by_name
    | ( $h[] | select(.state == "claimed" and (.claimed_by // "") == "")
        | "host \(.name) is claimed by nobody" ),
      ( $h[] | select((.claimed_by // "") != "" and .state != "claimed")
        | "host \(.name) has claimed_by \(.claimed_by) but state \(.state)" ),
      ( $h[] | select((.claimed_by // "") != "") | select(.claimed_by as $o | $ids | index($o) | not)
        | "host \(.name) is claimed by \(.claimed_by), which is not a queued resource" ),
      ( $workers | group_by(.host)[] | select((map(.id) | unique | length) > 1)
        | "host \(.[0].host) is a worker of \(map(.id) | unique | join(" and "))" ),
      ( $workers[] | select(($by_name[.host].claimed_by // "") != .id)
        | "host \(.host) is a worker of \(.id) but claimed by \($by_name[.host].claimed_by // "nobody")" ),
      ( if ([$q[] | select(.id == "fill" and .state == "ACTIVE")] | length) != 1
        then "fill is not ACTIVE: \([$q[] | select(.id == "fill") | .state] | join(","))" else empty end ),
      ( if ([$h[] | select(.claimed_by == "fill")] | length) != $n
        then "fill holds \([$h[] | select(.claimed_by == "fill")] | length) hosts, not \($n)" else empty end ),
      ( $q[] | select(.id != "fill") | "request \(.id) left behind (\(.state))" )'
}

# "kind n fail p50_us p99_us max_us" per command kind of the records on stdin (nearest-rank percentiles).
latency_stats() {
  sort -k1,1 -k3,3n | awk '
    function flush() { if (kind != "") printf "%s %d %d %d %d %d\n", kind, n, f, v[rank(0.50)], v[rank(0.99)], v[n] }
    function rank(p,  r) { r = int(p * n); if (r < p * n) r++; return r < 1 ? 1 : r }
    $1 != kind { flush(); kind = $1; n = 0; f = 0; delete v }
    { v[++n] = $3; if ($2 != 0) f++ }
    END { flush() }'
}

ms() { awk -v us="$1" 'BEGIN { printf "%.1f", us / 1000 }'; }
per_s() { awk -v n="$1" -v us="$2" 'BEGIN { printf "%.1f", (us > 0) ? n * 1e6 / us : 0 }'; }

failed=0
summary=()

start_etcd() {
  mkdir -p "$scratch/etcd"
  etcd --name store-load --data-dir "$scratch/etcd/data" \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "http://$etcd_host:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://$etcd_host:$etcd_peer_port" \
    --initial-cluster "store-load=http://$etcd_host:$etcd_peer_port" \
    --initial-cluster-state new >"$scratch/etcd/etcd.log" 2>&1 &
  etcd_pid=$!
  local i
  for i in $(seq 1 100); do
    if curl -sf "$etcd_url/health" 2>/dev/null | grep -q '"health":"true"'; then
      return 0
    fi
    kill -0 "$etcd_pid" 2>/dev/null || break
    sleep 0.2
  done
  tail -n 20 "$scratch/etcd/etcd.log" >&2
  die "etcd did not become healthy on $etcd_url"
}

stop_etcd() {
  kill "$etcd_pid" 2>/dev/null || true
  wait "$etcd_pid" 2>/dev/null || true
  etcd_pid=""
}

run_backend() {
  local backend=$1 c k deadline t_start t_end wall rev0 rev1 problems
  current_backend=$backend
  if [[ $backend == etcd ]]; then
    start_etcd
    state_url=etcd://$etcd_host:$etcd_client_port
  else
    state_url=sqlite:$XDG_STATE_HOME/tpuctl/state.db
  fi
  log "$backend: pool local-up --hosts $hosts --shape $shape at $address_base:$ssh_port"
  pool_up=1
  tp -q pool local-up --hosts "$hosts" --generation v5e --address-base "$address_base" \
    --port "$ssh_port" --shape "$shape" >/dev/null
  log "$backend: qr create fill --accelerator-type $fill_type (provisions over SSH)"
  local t0 t1
  t0=$(now_us)
  tp -q qr create fill --accelerator-type "$fill_type" --timeout 300s >/dev/null ||
    die "$backend: the fill slice did not become ACTIVE"
  t1=$(now_us)
  log "$backend: fill ACTIVE in $(ms $((t1 - t0))) ms"
  problems=$(check_consistency)
  [[ -z $problems ]] || die "$backend: inconsistent before any load: $problems"

  local table=()
  for c in $clients_list; do
    local dir=$scratch/runs/$backend/c$c
    mkdir -p "$dir"
    local g0="" g1=""
    # The revision first, etcd's counters second (and the reverse after the step): the
    # 'state info' calls are then outside the window the counters cover.
    rev0=$(revision)
    [[ $backend == etcd ]] && g0=$(etcd_metrics)
    local cpu0 cpu1 ecpu0=0 ecpu1=0
    cpu0=$(machine_jiffies)
    [[ -n $etcd_pid ]] && ecpu0=$(process_jiffies "$etcd_pid")
    log "$backend: $c client(s) for $seconds s"
    client_pids=()
    t_start=$(now_us)
    deadline=$((t_start + seconds * 1000000))
    for k in $(seq 1 "$c"); do
      client_loop "$c" "$k" "$deadline" "$dir/client-$k.rec" "$dir/client-$k.err" &
      client_pids+=($!)
    done
    for k in "${client_pids[@]}"; do
      wait "$k"
    done
    client_pids=()
    t_end=$(now_us)
    wall=$((t_end - t_start))
    cpu1=$(machine_jiffies)
    [[ -n $etcd_pid ]] && ecpu1=$(process_jiffies "$etcd_pid")
    [[ $backend == etcd ]] && g1=$(etcd_metrics)
    rev1=$(revision)

    cat "$dir"/client-*.rec >"$dir/all.rec"
    cat "$dir"/client-*.err >"$dir/all.err"
    local stats total fails cpu_ms
    cpu_ms=$(cat "$dir"/client-*.rec.cpu | awk '{ t += $1 } END { print t + 0 }')
    stats=$(latency_stats <"$dir/all.rec")
    total=$(wc -l <"$dir/all.rec")
    fails=$(awk '$2 != 0' "$dir/all.rec" | wc -l)
    local left
    left=$(scratch_tpuctls | wc -l)
    problems=$(check_consistency)

    # Latency columns in a fixed order.
    local cols="" maxes="" kind line
    for kind in create describe list delete; do
      line=$(awk -v k="$kind" '$1 == k' <<<"$stats")
      if [[ -n $line ]]; then
        read -r _ _ _ k50 k99 kmax <<<"$line"
        cols+=" $(ms "$k50") / $(ms "$k99") |"
        maxes+=" $kind $(ms "$kmax")"
      else
        cols+=" - |"
      fi
    done
    local store_col commits_col
    commits_col=$(per_s $((rev1 - rev0)) "$wall")
    if [[ $backend == etcd ]]; then
      # d[name] = after - before; write txns attempted = proposals - lease grants and revokes;
      # those that did not move the revision lost a compare (tpuctl re-read and retried them).
      local delta
      delta=$(join -a1 -a2 -e 0 -o 0,1.2,2.2 <(echo "$g0") <(echo "$g1") |
        awk -v commits=$((rev1 - rev0)) '
          { d[$1] = $3 - $2 }
          END {
            for (k in d) if (k ~ /^grpc:/ && d[k] > 0) { t += d[k]; s = s sprintf(" %s %d", substr(k, 6), d[k]) }
            w = d["proposals"] - d["grpc:LeaseGrant"] - d["grpc:LeaseRevoke"]
            printf "%d|gRPC calls:%s (not OK: %d); raft proposals %d: write txns %d, %d committed, %d lost a compare; WAL fsyncs %d, mean %.1f ms",
              t, s, d["grpc-not-OK"], d["proposals"], w, commits, w - commits,
              d["fsync-count"], (d["fsync-count"] > 0) ? 1000 * d["fsync-sum"] / d["fsync-count"] : 0 }')
      local grpc_total=${delta%%|*}
      store_col=$(per_s "$grpc_total" "$wall")
      note "$c clients: ${delta#*|}"
    else
      store_col="-"
    fi
    table+=("| $c | $total | $(per_s "$total" "$wall") | $fails |$cols $store_col | $commits_col |")
    note "$c clients: $total invocations in $(ms "$wall") ms (the last round ends after the $seconds s), $fails failed, $((rev1 - rev0)) commits; max latency ms:$maxes"
    local hz b0 b1 t0j t1j
    hz=$(getconf CLK_TCK)
    read -r b0 t0j <<<"$cpu0"
    read -r b1 t1j <<<"$cpu1"
    note "$c clients: tpuctl used $(awk -v t="$cpu_ms" -v n="$total" 'BEGIN { printf "%.1f CPU-s, %.1f ms per invocation", t / 1000, (n > 0) ? t / n : 0 }')"
    note "$c clients: machine CPU busy $(awk -v b=$((b1 - b0)) -v t=$((t1j - t0j)) 'BEGIN { printf "%.0f", (t > 0) ? 100 * b / t : 0 }')% of $(nproc) CPUs$([[ -n $etcd_pid ]] && echo "; etcd used $(awk -v j=$((ecpu1 - ecpu0)) -v hz="$hz" -v us="$wall" 'BEGIN { printf "%.2f CPU-s (%.0f%% of one CPU)", j / hz, 100 * j / hz * 1e6 / us }')")"

    if [[ $fails -gt 0 ]]; then
      failed=1
      summary+=("$backend, $c clients: $fails of $total invocations failed")
      echo "$backend, $c clients: first failures:" >&2
      head -n 5 "$dir/all.err" | sed 's/^/  /' >&2
      echo "  distinct messages (ids replaced by ID):" >&2
      sed -E 's/lc[0-9]+-[0-9]+-[0-9]+/ID/g' "$dir/all.err" | sort | uniq -c | sort -rn | head -n 10 | sed 's/^/  /' >&2
      local m
      # shellcheck disable=SC2016 # the backquotes are markdown
      while read -r m; do
        details+=("$c clients: failure: $m")
      done < <(sed -E 's/lc[0-9]+-[0-9]+-[0-9]+/ID/g' "$dir/all.err" | sort | uniq -c | sort -rn | head -n 5 |
        sed -E 's/^ *([0-9]+) (.*)/\1 x `\2`/')
    fi
    if [[ $left -gt 0 ]]; then
      note "$c clients: $left background tpuctl still running after the step"
    fi
    if [[ -n $problems ]]; then
      failed=1
      summary+=("$backend, $c clients: consistency: $(wc -l <<<"$problems") problem(s)")
      echo "$backend, $c clients: consistency problems:" >&2
      head -n 20 <<<"$problems" | sed 's/^/  /' >&2
      details+=("$c clients: consistency: $(head -n 3 <<<"$problems" | paste -sd ';' - | sed 's/;/; /g')")
      # Leftover requests would skew the next step: remove them.
      for id in $(tp --format 'value(id)' qr list | grep -v '^fill$' || true); do
        tp -q qr delete "$id" --force >/dev/null 2>&1 || true
      done
    fi
  done

  echo
  if [[ $backend == etcd ]]; then
    echo "### etcd ($(etcd --version | awk '/etcd Version/ {print $3}'), one member on loopback, default settings)"
  else
    echo "### SQLite (one file in the scratch directory)"
  fi
  echo
  echo "| clients | invocations | invocations/s | failures | create p50 / p99 ms | describe p50 / p99 ms | list p50 / p99 ms | delete p50 / p99 ms | store requests/s | commits/s |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${table[@]}"
  echo
  printf -- '- %s\n' "${details[@]}"
  details=()

  tp -q qr delete fill --force >/dev/null
  tp -q pool local-down --force >/dev/null
  pool_up=0
  [[ $backend == etcd ]] && stop_etcd
  return 0
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "## Store load, $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), load average at start $load_start"
echo "- tpuctl: $("$tpuctl_bin" version | head -n 1)"
echo "- pool: $hosts local sshd hosts (v5e, $shape chips), filled by one ACTIVE $fill_type; load requests v5litepod-4 (stay WAITING_FOR_RESOURCES)"
echo "- each step: C clients, each looping create --async / describe / list / delete for $seconds s; latency is the whole CLI invocation (fork, exec, open the store, work, exit)"
for b in $backends; do
  run_backend "$b"
done
echo
echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- store requests/s: etcd gRPC calls handled (grpc_server_handled_total, all methods) over the step's wall time; commits/s: store revision difference over the same time (SQLite reads are not counted)"
if [[ $failed != 0 ]]; then
  echo
  echo "**Failures:**"
  printf -- '- %s\n' "${summary[@]}"
  exit 1
fi
