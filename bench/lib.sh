# Shell helpers the benchmark scripts share (sourced, never run).
# now_ms: wall clock in milliseconds. median / range: of the numbers on stdin (space or newline
# separated), "-" when there are none; range prints "lo-hi".
now_ms() { local t=$EPOCHREALTIME; echo $((${t/./} / 1000)); }
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
range() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {if (NR==0) print "-"; else print lo "-" hi}'; }
