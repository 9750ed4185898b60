# Runs the seeds' program (my_parallel_tutorial.py, beside this file) unmodified, on every worker
# at once, then checks what it computed: every process compares each distinct block of `result`
# it holds with the same block of x @ x.T computed by NumPy in this one process, element by
# element (fp32, tolerances for a different summation order). Prints one line per process:
#   checked process P of N: B blocks, R x C elements each, largest error F of its tolerance
# and exits 1 (naming the block) when any element differs.
import os
import runpy
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
program = runpy.run_path(os.path.join(here, "my_parallel_tutorial.py"), run_name="__main__")

import jax  # noqa: E402  (already imported and started by the program)

result = program["result"]
x = np.asarray(program["x"])  # the same random matrix on every process (same key)
seen = set()
worst = 0.0  # the largest error as a share of its element's tolerance
for shard in result.addressable_shards:
    key = tuple((s.start, s.stop) for s in shard.index)
    if key in seen:
        continue  # a block replicated on several of this process's devices
    seen.add(key)
    rows, cols = shard.index
    want = x[rows] @ x[cols].T
    got = np.asarray(shard.data)
    error = np.abs(got - want)
    tolerance = 1e-2 + 1e-4 * np.abs(want)
    worst = max(worst, float((error / tolerance).max()))
    bad = error > tolerance
    if bad.any():
        i, j = np.argwhere(bad)[0]
        print(f"MISMATCH process {jax.process_index()}: block {key} element ({i}, {j}): "
              f"{got[i, j]} != {want[i, j]}", flush=True)
        sys.exit(1)
shape = next(iter(result.addressable_shards)).data.shape
print(f"checked process {jax.process_index()} of {jax.process_count()}: {len(seen)} blocks, "
      f"{shape[0]} x {shape[1]} elements each, largest error {worst:.2f} of its tolerance",
      flush=True)
