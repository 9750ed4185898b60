# Shell helpers the benchmark scripts share (sourced, never run).
# now_ms: wall clock in milliseconds. median / range: of the numbers on stdin (space or newline
# separated), "-" when there are none; range prints "lo-hi".
now_ms() { local t=$EPOCHREALTIME; echo $((${t/./} / 1000)); }
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
range() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {if (NR==0) print "-"; else print lo "-" hi}'; }
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
