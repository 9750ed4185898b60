#!/usr/bin/env python3
# The seeds' "hello world parallelism" program, multi-controller on CPU hosts, launched by tpuctl
# (README.md, "Recipe: JAX multi-controller"). Every worker runs this same file; tpuctl's worker
# environment tells each process who it is:
#
#   tpuctl workload create --cluster demo --workload hello --env JAX_PLATFORMS=cpu \
#       --command 'python3 /path/to/jax_parallelism.py'
#
# What it does, as the seed: a Mesh over every device of every process, shaped (4, devices / 4)
# with axes ('data', 'model'); an N x N matrix (8192 by default) from jax.random.key(0) sharded
# with NamedSharding(mesh, PartitionSpec('data', 'model')); a jitted `mat @ mat.T`. Then, beyond
# the seed, it checks the answer: the sharded result is gathered and process 0 compares it with
# the same product computed in one process (NumPy, float32), printing the largest difference.
# Exit status 0 only when they agree (to 1e-5 of the largest entry: both sum 8192 float32
# products, in different orders).
#
# Options:
#   --size N                  the matrix side (default 8192)
#   --devices-per-process D   CPU devices in each process (default 4; JAX_PLATFORMS=cpu)
#   --init tpuctl|auto        tpuctl (default): jax.distributed.initialize() given tpuctl's
#                             JAX_COORDINATOR_ADDRESS, TPUCTL_NUM_PROCESSES and TPUCTL_PROCESS_ID;
#                             auto: jax.distributed.initialize() with no arguments (JAX detects
#                             the cluster itself, e.g. from `--env-profile slurm`'s variables)
import argparse
import os
import sys
import time


def log(*words):
    print(f"[process {os.environ.get('TPUCTL_PROCESS_ID', '?')}]", *words, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--devices-per-process", type=int, default=4)
    ap.add_argument("--init", choices=["tpuctl", "auto"], default="tpuctl")
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", args.devices_per_process)
    except AttributeError:  # JAX before 0.4.38: XLA's flag, read when the backend starts
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={args.devices_per_process}")
    try:  # cross-process collectives on CPU (the default in recent JAX; explicit for older ones)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except AttributeError:
        pass

    started = time.time()
    if args.init == "auto":
        jax.distributed.initialize()
    else:
        jax.distributed.initialize(
            coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
            num_processes=int(os.environ["TPUCTL_NUM_PROCESSES"]),
            process_id=int(os.environ["TPUCTL_PROCESS_ID"]))
    log(f"jax {jax.__version__}: process {jax.process_index()} of {jax.process_count()},"
        f" {jax.local_device_count()} local of {jax.device_count()} devices"
        f" ({jax.devices()[0].platform}), init={args.init}"
        f" in {time.time() - started:.1f} s")

    import numpy as np
    from jax.experimental import mesh_utils, multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.device_count()
    data = 4 if devices % 4 == 0 else 1
    device_mesh = mesh_utils.create_device_mesh((data, devices // data))
    mesh = Mesh(device_mesh, axis_names=("data", "model"))

    n = args.size
    x = jax.random.normal(jax.random.key(0), (n, n))  # the same on every process
    x_host = np.asarray(x)
    sharding = NamedSharding(mesh, PartitionSpec("data", "model"))
    try:
        x_sharded = jax.device_put(x_host, sharding)  # the seed's call
        placed = "device_put"
    except Exception as e:  # older JAX: no device_put onto other processes' devices
        log(f"device_put onto the global sharding failed ({type(e).__name__}: {e});"
            " using make_array_from_callback")
        x_sharded = jax.make_array_from_callback((n, n), sharding, lambda i: x_host[i])
        placed = "make_array_from_callback"

    @jax.jit
    def parallel_matmul(mat):
        return mat @ mat.T

    log(f"Running on {len(jax.devices())} devices...")
    t0 = time.time()
    result = parallel_matmul(x_sharded)
    result.block_until_ready()
    log(f"Computation complete. mesh {dict(mesh.shape)}, {n}x{n} float32 placed by {placed},"
        f" product in {time.time() - t0:.2f} s")

    if args.no_check:
        return 0
    full = multihost_utils.process_allgather(result, tiled=True)
    ok = True
    if jax.process_index() == 0:
        t1 = time.time()
        reference = x_host @ x_host.T  # the same product in this one process
        scale = float(np.max(np.abs(reference)))
        diff = float(np.max(np.abs(np.asarray(full) - reference)))
        ok = full.shape == reference.shape and diff <= 1e-5 * scale
        log(f"one-process check: max |sharded - one-process| = {diff:.3g}"
            f" (largest entry {scale:.6g}, relative {diff / scale:.2e}):"
            f" {'MATCH' if ok else 'MISMATCH'} ({time.time() - t1:.1f} s)")
        log(f"checksum: trace {float(np.trace(np.asarray(full))):.6g},"
            f" sum {float(np.sum(np.asarray(full, dtype=np.float64))):.6g}")
    multihost_utils.sync_global_devices("checked")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
