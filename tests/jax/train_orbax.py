# A small model trained with optax on synthetic data, its train state sharded over every device
# of every process and checkpointed with a real Orbax CheckpointManager, as a JAX job on a TPU
# slice is: run it on every worker at once (tpuctl workload create ... --checkpoint-dir DIR).
#
#   python3 train_orbax.py --steps 400 --save-every 10 [--step-seconds 0.05] [--dir DIR]
#
# The checkpoint directory is --dir, else TPUCTL_CHECKPOINT_DIR (what `workload create
# --checkpoint-dir` exports); every worker must see the same one. It resumes from the latest
# complete checkpoint (Orbax never lists a half-written one), saves every --save-every steps,
# and on SIGTERM (a delete, an eviction, a preemption: tpuctl's stop) saves the step Orbax's
# preemption sync point agrees on with every other process, then exits 143, as xpk's jobs do.
# What it did, one line each, for tests and people:
#   resumed from step N | starting from step 0
#   step N loss L
#   saved step N
#   preempted: saved step N
#   done: N steps
# It also reports to tpuctl (TPUCTL_EVENTS, the worker's event file): a "step" event as each
# step begins, a "first_step" event for this process's first, and a "checkpoint" event for each
# save and restore with its blocking seconds. With --journal FILE (or TRAIN_JOURNAL), process 0
# also appends the same to FILE, with a "start" line for when this process started (from
# /proc/self/stat): the ground truth bench/jax/goodput_truth.py reads (bench/jax_bench.sh).
import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from jax.experimental import mesh_utils
from jax.sharding import NamedSharding, PartitionSpec as P

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=400)
parser.add_argument("--save-every", type=int, default=10)
parser.add_argument("--step-seconds", type=float, default=0.0, help="extra time per step")
parser.add_argument("--dir", default=os.environ.get("TPUCTL_CHECKPOINT_DIR", ""))
parser.add_argument("--journal", default=os.environ.get("TRAIN_JOURNAL", ""))
args = parser.parse_args()
if not args.dir:
    sys.exit("train_orbax.py: give --dir, or run it with workload create --checkpoint-dir")


def process_start_ms():
    """When this process started, on the wall clock: its start in clock ticks since boot
    (/proc/self/stat field 22) placed by the wall clock's offset from the boot clock."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    boot_ms = (time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)) * 1000
    return int(boot_ms + ticks * 1000 / os.sysconf("SC_CLK_TCK"))


def event(kind, **fields):
    path = os.environ.get("TPUCTL_EVENTS")
    fields["event"] = kind
    fields.setdefault("time_ms", int(time.time() * 1000))
    line = json.dumps(fields) + "\n"
    if path:
        with open(path, "a") as f:
            f.write(line)
    if journal:
        with open(journal, "a") as f:
            f.write(line)


journal = ""
started_ms = process_start_ms()


processes, local = jax.process_count(), jax.local_device_count()
if args.journal and jax.process_index() == 0:
    journal = args.journal
    event("start", time_ms=started_ms,
          attempt=int(os.environ.get("TPUCTL_WORKLOAD_ATTEMPT", "0")))
mesh = jax.sharding.Mesh(mesh_utils.create_device_mesh((processes, local)), ("data", "model"))
replicated = NamedSharding(mesh, P())
shardings = {
    "w1": NamedSharding(mesh, P(None, "model")),
    "b1": NamedSharding(mesh, P("model")),
    "w2": NamedSharding(mesh, P("model", None)),
    "b2": replicated,
}
width = 64 * local


def init_params():
    k1, k2 = jax.random.split(jax.random.key(0))
    params = {
        "w1": jax.random.normal(k1, (32, width)) * 0.1,
        "b1": jnp.zeros((width,)),
        "w2": jax.random.normal(k2, (width, 8)) * 0.1,
        "b2": jnp.zeros((8,)),
    }
    return jax.tree.map(jax.device_put, params, shardings)


def sharding_of(path, leaf):
    """The parameters and their optimizer moments sharded by name, the rest (counters)
    replicated: a restored state has the shardings of a fresh one."""
    key = getattr(path[-1], "key", None)
    return shardings.get(key, replicated) if leaf.ndim else replicated


optimizer = optax.adam(1e-2)


def fresh_state():
    params = init_params()
    state = {"params": params, "opt": optimizer.init(params), "step": jnp.zeros((), jnp.int32)}
    return jax.tree_util.tree_map_with_path(
        lambda path, leaf: jax.device_put(leaf, sharding_of(path, leaf)), state)


# The state's shapes, dtypes and shardings without computing it (Orbax's way to restore): a
# restart spends nothing on an initialisation the checkpoint replaces.
abstract_state = jax.tree_util.tree_map_with_path(
    lambda path, leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype,
                                            sharding=sharding_of(path, leaf)),
    jax.eval_shape(fresh_state))
batch_sharding = NamedSharding(mesh, P("data"))
target_w = np.linspace(-1.0, 1.0, 32 * 8, dtype=np.float32).reshape(32, 8)


def batch_for(step):
    # The same global batch on every process for a step, so a resumed run repeats a step exactly.
    rng = np.random.default_rng(step)
    x = rng.standard_normal((16 * processes, 32), dtype=np.float32)
    y = x @ target_w
    return (jax.make_array_from_callback(x.shape, batch_sharding, lambda i: x[i]),
            jax.make_array_from_callback(y.shape, batch_sharding, lambda i: y[i]))


@jax.jit
def train_step(state, x, y):
    def loss_fn(p):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(state["params"])
    updates, opt = optimizer.update(grads, state["opt"], state["params"])
    return {"params": optax.apply_updates(state["params"], updates), "opt": opt,
            "step": state["step"] + 1}, loss


manager = ocp.CheckpointManager(
    os.path.abspath(args.dir),
    options=ocp.CheckpointManagerOptions(save_interval_steps=args.save_every, max_to_keep=3))
latest = manager.latest_step()
start = 0
if latest is not None:
    t0 = time.time()
    state = manager.restore(latest, args=ocp.args.StandardRestore(abstract_state))
    event("checkpoint", action="restore", step=latest, seconds=time.time() - t0)
    start = latest + 1
    print(f"resumed from step {latest}", flush=True)
else:
    state = fresh_state()
    print("starting from step 0", flush=True)

for step in range(start, args.steps):
    t0 = time.time()
    event("step", step=step, time_ms=int(t0 * 1000))  # the step begins: Google's step_start_time
    if step == start:
        event("first_step", step=step)  # this process's first step: a restart's cost ends here
    x, y = batch_for(step)
    state, loss = train_step(state, x, y)
    loss = float(loss)
    if args.step_seconds:
        time.sleep(args.step_seconds)
    print(f"step {step} loss {loss:.6f}", flush=True)
    t_save = time.time()
    if manager.save(step, args=ocp.args.StandardSave(state)):
        # The blocking part of an asynchronous save: badput (UNPRODUCTIVE_CHECKPOINT_SAVE_TIME).
        event("checkpoint", action="save", step=step, seconds=time.time() - t_save)
        print(f"saved step {step}", flush=True)
    if manager.reached_preemption(step):
        manager.wait_until_finished()
        print(f"preempted: saved step {step}", flush=True)
        sys.exit(143)
manager.wait_until_finished()
print(f"done: {args.steps} steps", flush=True)
