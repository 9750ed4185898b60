// The environment every worker of a slice gets (topology.md section b, cli-anchors.md section c).
// `tpuctl ssh`, `tpuctl workload` and `tpuctl env` all build it here, so there is one definition
// of what a worker sees. Pure logic: no IO, no state.
//
// Variables, in this order (the order is stable and part of the contract):
//   TPU_WORKER_ID, TPU_WORKER_HOSTNAMES (this slice, comma list), TPU_ACCELERATOR_TYPE
//   (canonical name), TPU_TOPOLOGY, TPU_TOPOLOGY_WRAP ("true,false,false"), TPU_HOST_BOUNDS,
//   TPU_CHIPS_PER_HOST_BOUNDS ("x,y,z"), TPU_SKIP_MDS_QUERY=1, TPU_NAME,
//   JAX_COORDINATOR_ADDRESS ("<host>:8476", host = MEGASCALE_COORDINATOR_ADDRESS when there are
//   several slices, else worker 0 of this slice: exactly JAX's own rule, topology.md b.4),
//   JAX_NUM_CPU_DEVICES (the chips of one worker: JAX on the CPU shows one device per chip),
//   MEGASCALE_COORDINATOR_ADDRESS (host only), MEGASCALE_NUM_SLICES, MEGASCALE_SLICE_ID,
//   MEGASCALE_PORT=8081 (Ray's default; only when num_slices > 1),
//   TPUCTL_WORKER_ID, TPUCTL_NUM_WORKERS, TPUCTL_WORKER_HOSTNAMES, TPUCTL_SLICE_ID,
//   TPUCTL_NUM_SLICES, TPUCTL_PROCESS_ID (slice_id * workers + worker), TPUCTL_NUM_PROCESSES,
//   TPUCTL_QR_UID (when slice_uid is set), TPUCTL_PYTHON_ENV (when python_env is set),
//   then the profile's variables, then the user's additions (see worker_env).
// PATH and PYTHONPATH are not in the list: env_command_prefix puts the agent directory and the
// Python environment's bin/ in front of PATH, and the agent's python/ directory (its
// sitecustomize.py: JAX sees the whole slice, agent/python/sitecustomize.py) in front of
// PYTHONPATH.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topology/accelerator_type.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

inline constexpr int k_jax_coordinator_port = 8476;  // JAX's fixed port on Cloud TPU
inline constexpr int k_megascale_port = 8081;        // Ray's default (xpk's Pathways uses 8080)
inline constexpr int k_torchrun_master_port = 29500; // torchrun's default
// Where `scripts/deps.sh --frameworks` puts JAX, Orbax and optax on a host: the Python
// environment a worker's PATH leads with unless the user names another (config python-env).
inline constexpr std::string_view k_default_python_env = "/opt/tpuctl/frameworks";
// The one variable of tpuctl's own that a user may set (to 0): no JAX start-up on the workers.
inline constexpr std::string_view k_jax_init_var = "TPUCTL_JAX_INIT";

struct SliceEnvInput {
  topology::AcceleratorType type;
  std::string tpu_name;               // the node id, exported as TPU_NAME
  std::vector<std::string> hostnames; // this slice's workers in worker order (peer addresses)
  int slice_id = 0;
  int num_slices = 1;
  // Slice 0 worker 0's address. Required when num_slices > 1 and slice_id > 0; for slice 0 it
  // defaults to hostnames[0] (and to job_hostnames[0] when that is given).
  std::string megascale_coordinator;
  // Every worker of every slice, slice-major (slice 0's workers first). Only the slurm and
  // skypilot profiles need it, and only with several slices (their node lists span the job);
  // empty means "this slice is the whole job".
  std::vector<std::string> job_hostnames;
  std::string agent_dir; // remote directory holding the tpuctl binary; may start with ~/
  // The queued resource's unique id, exported as TPUCTL_QR_UID when set: every process a slice
  // starts carries it, so suspend and delete can find and kill them (provision/provisioning).
  std::string slice_uid;
  // The Python environment (a virtual environment's directory) on the worker whose bin/ leads
  // PATH after the agent's directory; exported as TPUCTL_PYTHON_ENV. Empty: PATH as the login
  // gives it.
  std::string python_env{k_default_python_env};
};

enum class EnvProfile { none, torchrun, slurm, skypilot };

// "none", "torchrun", "slurm" or "skypilot". Fails with usage naming `text` and the choices.
Expected<EnvProfile> parse_env_profile(std::string_view text);
std::string_view to_string(EnvProfile profile);

// True for a POSIX environment name: [A-Za-z_][A-Za-z0-9_]*.
bool is_env_name(std::string_view name);
// is_env_name as a Status. Errors: usage naming `name` and the rule.
Status validate_env_name(std::string_view name);

// The environment of worker `worker` of the slice, in the order documented above. Profiles add:
//   torchrun: RANK (global process id), WORLD_SIZE, LOCAL_RANK=0, MASTER_ADDR (global worker 0),
//             MASTER_PORT=29500;
//   slurm:    SLURM_PROCID, SLURM_NTASKS, SLURM_NODEID (= process id: one task per node),
//             SLURM_LOCALID=0, SLURM_JOB_NODELIST (compressed hostlist), SLURM_NNODES, and
//             srun's step variables: SLURM_JOB_ID (one per request: a hash of slice_uid, else
//             of the job's hosts), SLURM_JOB_NUM_NODES, SLURM_STEP_ID=0, SLURM_STEP_NODELIST,
//             SLURM_STEP_NUM_NODES, SLURM_STEP_NUM_TASKS, SLURM_STEP_TASKS_PER_NODE ("1(xN)"),
//             so JAX's Slurm detection (jax.distributed.initialize() with no arguments) works;
//   skypilot: SKYPILOT_NODE_RANK, SKYPILOT_NODE_IPS (newline-separated, head first),
//             SKYPILOT_NUM_NODES, SKYPILOT_NUM_GPUS_PER_NODE=0 (TPU hosts have no GPUs; the
//             chips per host are in TPU_CHIPS_PER_HOST_BOUNDS).
// `user_env` entries replace a variable in place when it is a tunable (TPU_SKIP_MDS_QUERY,
// JAX_COORDINATOR_ADDRESS, JAX_NUM_CPU_DEVICES, MEGASCALE_PORT, MASTER_PORT,
// SKYPILOT_NUM_GPUS_PER_NODE) and are appended otherwise (TPUCTL_JAX_INIT among them);
// identity variables (anything else tpuctl sets, any other TPUCTL_* name, PATH) cannot be
// overridden. Values may hold any byte except NUL.
// Fails with usage, reporting every problem: worker out of range (names it and the range),
// hostnames count != type.hosts, a bad host name, slice_id/num_slices out of range, a missing
// coordinator, job_hostnames inconsistent with hostnames, an invalid or duplicate user name,
// an identity override, a NUL in a value.
Expected<EnvVars> worker_env(const SliceEnvInput& input, int worker, EnvProfile profile,
                             const EnvVars& user_env = {});

// `export K='v' K2='v2'; export PATH=<agent_dir>:<python env>/bin:"$PATH"
// PYTHONPATH=<agent_dir>/python${PYTHONPATH:+:$PYTHONPATH}; ` ready to put in front of a command
// that a POSIX login shell (sh, bash, dash, zsh) runs. Every value is single-quoted
// (util::shell_quote), so `'`, `$(...)`, backticks, newlines, `;` and unicode arrive literally.
// The Python environment is env's TPUCTL_PYTHON_ENV (none: PATH gets only the agent); PYTHONPATH
// is left alone when env sets TPUCTL_JAX_INIT to 0 (off, false, no). A leading `~/` of agent_dir
// stays expandable; an empty agent_dir leaves PATH and PYTHONPATH alone.
// Precondition: names are valid (worker_env guarantees it); an invalid name is skipped.
// Never fails.
std::string env_command_prefix(const EnvVars& env, const std::string& agent_dir);

// `KEY='value'` lines, quoted as by the shell, so `set -a; . ./worker.env; set +a` reproduces
// the environment exactly (values with newlines span lines inside their quotes). This is the
// shell form of dotenv: parsers that do not implement shell quoting (docker --env-file) may
// read values holding `'` differently. Never fails.
std::string to_dotenv(const EnvVars& env);

// A Python environment's directory as a worker sees it: absolute, or under the login directory
// (~/...), without NUL or newline. Errors: usage naming `source` (the flag or setting), the value
// and the rule.
Status validate_python_env(std::string_view dir, std::string_view source);

// True when `env` switches tpuctl's JAX start-up off (TPUCTL_JAX_INIT=0, off, false or no).
bool jax_init_off(const EnvVars& env);

// The chips of one worker of `type` (JAX_NUM_CPU_DEVICES): the product of its chip bounds.
int chips_per_worker(const topology::AcceleratorType& type);

} // namespace tpuctl::provision
