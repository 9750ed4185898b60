#!/usr/bin/env bash
# Output of any size in bounded memory (issue 33, point 6), measured as a user runs it: a local
# pool of --hosts real sshd hosts (64: a v5p-512 slice, one worker per host), then
#   tpuctl ssh big --worker=all --output MODE --command 'yes ... | head -c MIB MiB'
# for MODE grouped, jsonl and prefixed (the line-by-line reference), every worker printing --mib
# MiB, and `--stdin` sending --stdin-mib MiB to every worker. For each: tpuctl's peak RSS
# (/usr/bin/time's maximum resident set size) and whether every byte arrived:
#   grouped   one group holding all the workers, its text equal (sha256) to what each printed
#   jsonl     one record per worker, each one's stdout equal (length and sha256) to it
#   prefixed  every line, from every worker (a count per worker)
#   stdin     every worker read all of it (`wc -c` on each)
# The target is a peak RSS under 128 MiB whatever the sizes (before this change: 1,353 MiB
# grouped and 1,456 MiB jsonl for 4 workers printing 200 MB). Spooled output goes to $TMPDIR:
# --hosts x --mib MiB of free space there at most.
#
#   bench/output_memory.sh [--hosts 64] [--mib 256] [--stdin-mib 1024] [--runs 1] [--tpuctl PATH]
#
# Prints markdown on stdout (medians, min-max over the runs), progress on stderr; stops every
# sshd it started (local-down, by PID). At 64 hosts x 256 MiB on a 2-core host: about 3 minutes a
# mode.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
hosts=64 mib=256 stdin_mib=1024 runs=1 tpuctl=
while [[ $# -gt 0 ]]; do
  case $1 in
    --hosts) hosts=${2:?}; shift 2 ;;
    --mib) mib=${2:?}; shift 2 ;;
    --stdin-mib) stdin_mib=${2:?}; shift 2 ;;
    --runs) runs=${2:?}; shift 2 ;;
    --tpuctl) tpuctl=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "output_memory.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for v in mib stdin_mib runs; do
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -ge 1 ]] || { echo "output_memory.sh: --${v//_/-} must be >= 1" >&2; exit 2; }
done
case $hosts in
  64) type=v5p-512 shape=8x8x4 ;;
  16) type=v5p-128 shape=4x4x4 ;;
  4) type=v5p-32 shape=2x2x4 ;;
  *) echo "output_memory.sh: --hosts must be 4, 16 or 64 (one v5p slice of that many hosts)" >&2; exit 2 ;;
esac
[[ -x /usr/bin/time ]] || { echo "output_memory.sh: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
if [[ -z $tpuctl ]]; then
  tpuctl=$root/${BUILD_DIR:-build}/cli/tpuctl
  [[ -x $tpuctl ]] || (cd "$root" && scripts/build.sh --target tpuctl >&2)
fi

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
scratch=
trap scratch_cleanup EXIT
trap 'exit 130' INT TERM
cell() { echo "$(echo "$@" | median) ($(echo "$@" | range))"; }
bytes=$((mib * 1024 * 1024))
command="yes tpuctl-output-line | head -c $bytes"
printed() { (yes tpuctl-output-line || true) | head -c "$bytes"; } # what each worker prints
want_sha=$(printed | sha256sum | cut -d' ' -f1)
# grouped and prefixed output end an unterminated last line with a newline (as clush -b and
# pdsh do), so the text they show, and its line count, include that newline.
want_lines=$(printed | wc -l)
if [[ $(printed | tail -c 1 | od -An -tx1) == *0a ]]; then
  shown_sha=$want_sha
else
  shown_sha=$( { printed; echo; } | sha256sum | cut -d' ' -f1)
  want_lines=$((want_lines + 1))
fi
# peak_rss_mib FILE: the maximum RSS /usr/bin/time -f %M wrote there (KiB), in MiB.
peak_rss_mib() { awk '{v = $1} END {printf "%.0f", v / 1024}' "$1"; }

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "## Output in bounded memory: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($cpu)"
echo
echo "$("$tpuctl" version 2>/dev/null | head -n 1); $hosts workers ($type) each printing $mib MiB;"
echo "--stdin of $stdin_mib MiB to each; $runs run(s). Peak RSS of tpuctl in MiB."
echo

grouped=() jsonl=() prefixed=() stdin=() verdicts=()
for run in $(seq "$runs"); do
  scratch=$(mktemp -d /tmp/tpuctl-outmem-XXXXXX)
  export HOME=$scratch XDG_STATE_HOME=$scratch/state XDG_CONFIG_HOME=$scratch/config
  export TMPDIR=$scratch
  unset TPUCTL_STATE TPUCTL_POOL
  echo "output_memory.sh: run $run: starting $hosts hosts" >&2
  "$tpuctl" pool local-up --hosts "$hosts" --generation v5p --shape "$shape" --address-base 127.0.195.2 --quiet >/dev/null
  "$tpuctl" qr create big --accelerator-type "$type" --quiet >/dev/null

  echo "output_memory.sh: run $run: grouped" >&2
  /usr/bin/time -f %M -o "$scratch/rss" "$tpuctl" ssh big --worker=all --output grouped \
    --command "$command" 2>"$scratch/err" >"$scratch/out.txt" || true
  grouped+=("$(peak_rss_mib "$scratch/rss")")
  head=$(head -n 3 "$scratch/out.txt" | sed -n 2p)
  got=$(tail -n +4 "$scratch/out.txt" | sha256sum | cut -d' ' -f1)
  ok=no
  [[ $got == "$shown_sha" && $head == *"($hosts)" ]] && ok=yes
  verdicts+=("grouped: one group of $hosts workers, every byte: $ok")
  rm -f "$scratch/out.txt"

  echo "output_memory.sh: run $run: jsonl" >&2
  /usr/bin/time -f %M -o "$scratch/rss" "$tpuctl" ssh big --worker=all --output jsonl \
    --command "$command" 2>"$scratch/err" | python3 -c '
import hashlib, json, sys
want, n, ok = sys.argv[1], 0, 0
for line in sys.stdin.buffer:
    d = json.loads(line)
    out = d["stdout"].encode()
    n += 1
    ok += out and hashlib.sha256(out).hexdigest() == want and d["exit_code"] == 0
print(n, ok)' "$want_sha" >"$scratch/check"
  jsonl+=("$(peak_rss_mib "$scratch/rss")")
  read -r n good <"$scratch/check"
  verdicts+=("jsonl: $n records, $good with every byte of their worker's stdout")

  echo "output_memory.sh: run $run: prefixed" >&2
  /usr/bin/time -f %M -o "$scratch/rss" "$tpuctl" ssh big --worker=all --command "$command" \
    2>"$scratch/err" | awk '{n[$1]++} END {for (k in n) print n[k]}' | sort -u >"$scratch/check"
  prefixed+=("$(peak_rss_mib "$scratch/rss")")
  verdicts+=("prefixed: lines per worker: $(tr '\n' ' ' <"$scratch/check")(want $want_lines)")

  echo "output_memory.sh: run $run: --stdin" >&2
  head -c $((stdin_mib * 1024 * 1024)) /dev/zero |
    /usr/bin/time -f %M -o "$scratch/rss" "$tpuctl" ssh big --worker=all --stdin --command 'wc -c' \
      --output grouped 2>"$scratch/err" >"$scratch/stdin.out"
  stdin+=("$(peak_rss_mib "$scratch/rss")")
  verdicts+=("stdin: $(sed -n 2p "$scratch/stdin.out" | sed 's/.*(\(.*\))/\1/') workers read $(sed -n 4p "$scratch/stdin.out") bytes (want $((stdin_mib * 1024 * 1024)))")

  "$tpuctl" qr delete big --force --quiet >/dev/null 2>&1 || true
  scratch_cleanup
done

echo "| mode | peak RSS MiB, median (min-max) |"
echo "|---|---|"
echo "| grouped | $(cell "${grouped[@]}") |"
echo "| jsonl | $(cell "${jsonl[@]}") |"
echo "| prefixed (reference) | $(cell "${prefixed[@]}") |"
echo "| --stdin ($stdin_mib MiB) | $(cell "${stdin[@]}") |"
echo
for v in "${verdicts[@]}"; do echo "- $v"; done
