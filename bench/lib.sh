# Shell helpers the benchmark scripts share (sourced, never run).
# now_ms: wall clock in milliseconds. median / range: of the numbers on stdin (space or newline
# separated), "-" when there are none; range prints "lo-hi".
now_ms() { local t=$EPOCHREALTIME; echo $((${t/./} / 1000)); }
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
range() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {if (NR==0) print "-"; else print lo "-" hi}'; }
# secs MS: milliseconds as seconds with one decimal ("-" stays "-"). ms_cell MS...: "median
# (min-max)" of the given milliseconds, in seconds.
secs() { awk -v ms="$1" 'BEGIN {if (ms=="-") print "-"; else printf "%.1f", ms/1000}'; }
ms_cell() {
  local m r
  m=$(echo "$@" | median)
  r=$(echo "$@" | range)
  echo "$(secs "$m") ($(secs "${r%-*}")-$(secs "${r#*-}"))"
}
# scratch_cleanup: the end of one scratch HOME ($scratch, with a local pool of $tpuctl's): the
# pool's sshd stopped, whatever still carries the directory in its command line killed by PID
# (a supervisor runs the agent from there), the directory removed. Set scratch= when none.
scratch_cleanup() {
  if [[ -n ${scratch:-} && -d $scratch ]]; then
    "$tpuctl" pool local-down --force >/dev/null 2>&1 || true
    for pid in $(pgrep -f -- "$scratch" || true); do
      kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$scratch"
  fi
  scratch=
}
# workload_status NAME: "STATE ATTEMPT RUNNING_WORKERS WORKERS" of workload NAME ($tpuctl's), or
# "? -1 0 0" when it cannot be read. wait_status NAME REGEX SECONDS: waits until that matches the
# extended REGEX, polling every 100 ms; prints the time (now_ms) it did, or says on stderr what it
# was instead and returns 1.
workload_status() {
  "$tpuctl" workload describe "$1" --format json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
w = d["workers"]
print(d["state"], d["attempt"], sum(1 for x in w if x["state"] == "RUNNING" and x["attempt"] == d["attempt"]), len(w))' ||
    echo "? -1 0 0"
}
wait_status() {
  local until=$(($(now_ms) + $3 * 1000)) s
  while (($(now_ms) < until)); do
    s=$(workload_status "$1")
    if [[ $s =~ $2 ]]; then now_ms; return 0; fi
    sleep 0.1
  done
  echo "$(basename "$0"): workload '$1' is '$s', not /$2/ after $3 s" >&2
  return 1
}
