#!/usr/bin/env bash
# Provisioning at pod scale, as a user runs it: `tpuctl qr create` to ACTIVE on a local pool of
# real sshd hosts (v5p, 4 chips per host), from nothing (no agent on any host) and with the agents
# in place, and `qr delete --force`, each next to one `pool ssh --command true` round over the
# same hosts in the same run, on SQLite and on a one-member etcd.
#
#   bench/provision_bench.sh [--runs N] [--sizes "64 128 256"] [--stores "sqlite etcd"]
#
# Uses ${BUILD_DIR:-build}/cli/tpuctl (building it if missing). For each store and size: a
# scratch HOME (mktemp -d), `pool local-up --hosts N` on 127.<150+i>.0.2..., then per run: the
# round, the agents removed from every host, create (from nothing), delete, create (in place),
# delete. Every command must exit 0 and every create end ACTIVE, or the run counts as failed.
# Prints markdown on stdout (medians, min-max, and per-run ratios to the round, median of those),
# progress on stderr; stops every sshd (pool local-down) and etcd (by PID) and removes the scratch
# directories. About 3 minutes for the defaults (3 runs) on a 2-core host.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=3
sizes="64 128 256"
stores="sqlite etcd"
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    --sizes) sizes=${2:?}; shift 2 ;;
    --stores) stores=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "provision_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[0-9]+$ && $runs -ge 1 ]] || { echo "provision_bench.sh: --runs must be >= 1" >&2; exit 2; }
for n in $sizes; do
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 256 ]] ||
    { echo "provision_bench.sh: sizes must be 1..256 hosts (got '$n')" >&2; exit 2; }
done
for s in $stores; do
  [[ $s == sqlite || $s == etcd ]] || { echo "provision_bench.sh: stores are sqlite, etcd (got '$s')" >&2; exit 2; }
done
if [[ " $stores " == *" etcd "* ]]; then
  command -v etcd >/dev/null || { echo "provision_bench.sh: etcd not found: run scripts/deps.sh" >&2; exit 2; }
fi
# shellcheck source=bench/etcd_member.sh
source "$here/etcd_member.sh"
build_dir=$root/${BUILD_DIR:-build}
tpuctl=$build_dir/cli/tpuctl
[[ -x $tpuctl ]] || (cd "$root" && scripts/build.sh >&2)

scratch=
etcd_pid=
cleanup() {
  if [[ -n $scratch && -d $scratch ]]; then
    HOME=$scratch XDG_STATE_HOME=$scratch/state XDG_CONFIG_HOME=$scratch/config \
      "$tpuctl" pool local-down --force >/dev/null 2>&1 || true
  fi
  if [[ -n $etcd_pid ]]; then
    kill -9 "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
    etcd_pid=
  fi
  if [[ -n $scratch ]]; then rm -rf "$scratch"; scratch=; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { local t=$EPOCHREALTIME; echo $((${t/./} / 1000)); }
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
rmedian() { median | awk '{if ($1=="-") print "-"; else printf "%.2f\n", $1}'; }
range() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {print lo "-" hi}'; }
seconds() { awk -v ms="$1" 'BEGIN {if (ms=="-") print "-"; else printf "%.2f", ms/1000}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "## Provisioning at pod scale: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($cpu)"
echo
echo "$("$tpuctl" version 2>/dev/null | head -n 1), agent binary $(stat -c %s "$tpuctl") bytes, $runs runs per row."
echo "Seconds: median (min-max). Rounds: per run, the time over that run's \`pool ssh --command true\`"
echo "round, median of the runs."
echo
echo "| store | hosts | type | pool ssh round | from nothing (push / preflight) | rounds | in place (push / preflight) | rounds | qr delete --force | rounds | failed runs |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"

block=150
for store in $stores; do
  for n in $sizes; do
    scratch=$(mktemp -d /tmp/tpuctl-provision-bench-XXXXXX)
    export HOME=$scratch XDG_STATE_HOME=$scratch/state XDG_CONFIG_HOME=$scratch/config
    unset TPUCTL_STATE
    if [[ $store == etcd ]]; then
      start_bench_etcd "$scratch" 127.0.194.1 23795 23805 ||
        { echo "provision_bench.sh: etcd did not start: $(tail -n 3 "$scratch/etcd.log")" >&2; exit 2; }
      export TPUCTL_STATE=etcd://$etcd_endpoint
    fi
    type=v5p-$((8 * n))
    echo "provision_bench.sh: $store, $n hosts ($type)" >&2
    "$tpuctl" pool local-up --hosts "$n" --generation v5p --address-base "127.$block.0.2" >/dev/null
    block=$((block + 1))
    rounds=() fresh=() fresh_push=() fresh_pre=() placed=() placed_push=() placed_pre=() deletes=()
    r_fresh=() r_placed=() r_delete=()
    failed=0
    for run in $(seq "$runs"); do
      ok=1
      t0=$(now_ms); "$tpuctl" pool ssh --command true >/dev/null 2>&1 || ok=0; round=$(( $(now_ms) - t0 ))
      rm -rf "$XDG_STATE_HOME"/tpuctl/local-pools/local/hosts/*/work/agent
      t0=$(now_ms)
      "$tpuctl" qr create big --accelerator-type "$type" --format json >"$scratch/c1.json" 2>"$scratch/c1.err" || ok=0
      c1=$(( $(now_ms) - t0 ))
      t0=$(now_ms); "$tpuctl" qr delete big --force --quiet >/dev/null 2>&1 || ok=0; d1=$(( $(now_ms) - t0 ))
      t0=$(now_ms)
      "$tpuctl" qr create big --accelerator-type "$type" --format json >"$scratch/c2.json" 2>"$scratch/c2.err" || ok=0
      c2=$(( $(now_ms) - t0 ))
      t0=$(now_ms); "$tpuctl" qr delete big --force --quiet >/dev/null 2>&1 || ok=0; d2=$(( $(now_ms) - t0 ))
      read -r s1 p1 f1 < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t=d["provisioning"]["report"]["timings"]; print(d["state"], t["push_ms"], t["preflight_ms"])' "$scratch/c1.json" 2>/dev/null || echo "? 0 0")
      read -r s2 p2 f2 < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t=d["provisioning"]["report"]["timings"]; print(d["state"], t["push_ms"], t["preflight_ms"])' "$scratch/c2.json" 2>/dev/null || echo "? 0 0")
      [[ $s1 == ACTIVE && $s2 == ACTIVE ]] || ok=0
      echo "provision_bench.sh:   run $run: round ${round} ms, from nothing ${c1} ms ($s1), in place ${c2} ms ($s2), delete ${d1}/${d2} ms" >&2
      if [[ $ok == 0 ]]; then
        failed=$((failed + 1))
        tail -n 3 "$scratch/c1.err" "$scratch/c2.err" >&2 || true
        continue
      fi
      rounds+=("$round"); fresh+=("$c1"); fresh_push+=("$p1"); fresh_pre+=("$f1")
      placed+=("$c2"); placed_push+=("$p2"); placed_pre+=("$f2"); deletes+=("$d1" "$d2")
      r_fresh+=("$(ratio "$c1" "$round")"); r_placed+=("$(ratio "$c2" "$round")")
      r_delete+=("$(ratio "$d1" "$round")" "$(ratio "$d2" "$round")")
    done
    "$tpuctl" pool local-down --force >/dev/null 2>&1 || true
    cell() { echo "$(seconds "$(echo "$@" | median)") ($(seconds "$(echo "$@" | range | cut -d- -f1)")-$(seconds "$(echo "$@" | range | cut -d- -f2)"))"; }
    if [[ ${#rounds[@]} -gt 0 ]]; then
      echo "| $store | $n | $type | $(cell "${rounds[@]}") | $(cell "${fresh[@]}") ($(seconds "$(echo "${fresh_push[@]}" | median)") / $(seconds "$(echo "${fresh_pre[@]}" | median)")) | $(echo "${r_fresh[@]}" | rmedian) | $(cell "${placed[@]}") ($(seconds "$(echo "${placed_push[@]}" | median)") / $(seconds "$(echo "${placed_pre[@]}" | median)")) | $(echo "${r_placed[@]}" | rmedian) | $(cell "${deletes[@]}") | $(echo "${r_delete[@]}" | rmedian) | $failed of $runs |"
    else
      echo "| $store | $n | $type | - | - | - | - | - | - | - | $failed of $runs |"
    fi
    cleanup
  done
done
