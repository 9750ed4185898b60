#!/usr/bin/env bash
# stamp.sh OUTDIR COMMAND...: runs COMMAND, passing its output through, and when a line says
# "Computation complete." (the seeds' program, right after it dispatched its jitted product)
# writes the time (unix ms) to OUTDIR/done.$TPUCTL_PROCESS_ID. bench/jax_bench.sh gives every
# launcher's workers this same line, so the stamping costs each of them the same.
out=$1
shift
"$@" 2>&1 | while IFS= read -r line; do
  if [[ $line == *"Computation complete."* ]]; then
    t=$EPOCHREALTIME
    echo $((${t/./} / 1000)) >"$out/done.${TPUCTL_PROCESS_ID:-x}.tmp" &&
      mv "$out/done.${TPUCTL_PROCESS_ID:-x}.tmp" "$out/done.${TPUCTL_PROCESS_ID:-x}"
  fi
  printf '%s\n' "$line"
done
