# A JAX job of collective steps, every worker at once: each step sums an array sharded over every
# device of every process (an all-reduce: no process finishes a step before all of them reach
# it), reports it (TPUCTL_EVENTS "step", as step N begins) and prints "step N". For the hang and
# straggler tests:
#   --hang-worker W --hang-step K   worker W (TPU_WORKER_ID of slice 0) sleeps for an hour before
#   [--hang-attempt A]              step K's collective (in attempt A only, when given): the
#                                   others wait in it, every process alive, no step made
#   --slow-worker W --slow-ms S     worker W computes S ms on the CPU before each collective:
#                                   every step waits for it (a straggler)
#   --steps N --step-seconds T      N steps (default: until stopped), T seconds apart at least
import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=10**9)
parser.add_argument("--step-seconds", type=float, default=0.2)
parser.add_argument("--hang-worker", type=int, default=-1)
parser.add_argument("--hang-step", type=int, default=-1)
parser.add_argument("--hang-attempt", type=int, default=-1, help="only in this attempt")
parser.add_argument("--slow-worker", type=int, default=-1)
parser.add_argument("--slow-ms", type=int, default=0)
args = parser.parse_args()
me = jax.process_index()


def event(**fields):
    path = os.environ.get("TPUCTL_EVENTS")
    if path:
        fields.setdefault("time_ms", int(time.time() * 1000))
        with open(path, "a") as f:
            f.write(json.dumps(fields) + "\n")


mesh = Mesh(mesh_utils.create_device_mesh((jax.device_count(),)), ("all",))
sharding = NamedSharding(mesh, P("all"))
n = jax.device_count() * 1024
x = jax.make_array_from_callback((n,), sharding, lambda i: np.ones(n, np.float32)[i])
total = jax.jit(lambda a: jnp.sum(a * a), out_shardings=NamedSharding(mesh, P()))

for step in range(args.steps):
    t0 = time.time()
    event(event="step", step=step)
    attempt = int(os.environ.get("TPUCTL_WORKLOAD_ATTEMPT", "0"))
    if me == args.hang_worker and step == args.hang_step and args.hang_attempt in (-1, attempt):
        time.sleep(3600)  # before the collective: every other process waits in it
    if me == args.slow_worker and args.slow_ms > 0:
        until = time.time() + args.slow_ms / 1000.0
        while time.time() < until:  # the CPU, not a sleep: a slower host
            pass
    value = float(total(x))
    assert value == n, value
    print(f"step {step}", flush=True)
    time.sleep(max(0.0, args.step_seconds - (time.time() - t0)))
print("done", flush=True)
