# The seeds' "Hello world parallelism example" (shared/seeds/000), unmodified but for the mesh:
# the seed's (4, 64) is a v6e-256's 256 chips; this is shaped for a v5litepod-16's 16 (4 workers
# of 4 chips). Run it on every worker at once, as the seed does:
#   tpuctl tpu-vm ssh NODE --worker=all --command "python3 my_parallel_tutorial.py"
# No jax.distributed.initialize(): on a TPU VM JAX finds the whole slice by itself, and on
# tpuctl's hosts tpuctl's Python start-up does the same (README: "JAX on a slice").
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec, NamedSharding
from jax.experimental import mesh_utils

device_mesh = mesh_utils.create_device_mesh((4, 4))
mesh = Mesh(device_mesh, axis_names=('data', 'model'))

x = jax.random.normal(jax.random.key(0), (8192, 8192))

sharding = NamedSharding(mesh, PartitionSpec('data', 'model'))

x_sharded = jax.device_put(x, sharding)

@jax.jit
def parallel_matmul(mat):
    return mat @ mat.T

# Run
print(f"Running on {len(jax.devices())} devices...")
result = parallel_matmul(x_sharded)
print("Computation complete.")
