// Which workers of a queued resource a command reaches, each with its SSH target and the worker
// environment. `tpuctl ssh`, `tpuctl scp`, `tpuctl env` and workloads all plan through here, so
// what a worker sees never depends on which command started the process.
#pragma once

#include <string>
#include <vector>

#include "provision/pool/pools.hpp"
#include "provision/queue/queued_resource.hpp"
#include "provision/slice/worker_env.hpp"
#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

// One worker to reach: where it is and what it gets.
struct WorkerPlan {
  std::string node;   // the node id (TPU_NAME)
  int node_index = 0; // slice id
  int worker = 0;     // TPU_WORKER_ID
  std::string host;   // pool host name
  remote::SshTarget target;
  EnvVars env;               // worker_env() of this worker
  std::string agent_dir;     // the agent's directory on the host ("" before provisioning)
  std::string workdir;       // the host's tpuctl working directory ("~/.tpuctl" by default)
  bool this_machine = false; // a local pool's host (shares_this_machine)
};

struct WorkerSelection {
  std::string worker = "all"; // gcloud's --worker grammar: all, N, 0,2, 1-3
  std::string node = "all";   // all, one node id, or node indices (0, 0-1: --worker's grammar)
  EnvProfile profile = EnvProfile::none;
  EnvVars user_env;
  // The nodes (indices) that make up the job, e.g. the slices a workload holds: only they are
  // planned (`node` must be "all"), numbered 0..n-1 in their environment. Empty: every node.
  std::vector<int> job_nodes;
  // The workers' Python environment (SliceEnvInput::python_env).
  std::string python_env{k_default_python_env};
};

// The one name of a slice's worker wherever output names it (ssh and scp line prefixes, grouped
// headers, failure summaries, workload logs): "NODE/WORKER@HOST", e.g. "ms-1/0@node07": the node
// (TPU_NAME), TPU_WORKER_ID within it, and the pool host it runs on. One token (awk, cut and
// grep see it whole). Never fails.
std::string worker_label(const std::string& node, int worker, const std::string& host);
inline std::string worker_label(const WorkerPlan& plan) {
  return worker_label(plan.node, plan.worker, plan.host);
}

// KEY=VALUE items (--env) as variables. Errors: usage naming every item without a '=' or a key,
// and every key that is not an environment name (validate_env_name).
Expected<EnvVars> parse_env_items(const std::vector<std::string>& items);

// The workers `selection` picks among the nodes of `target` (every node of a request, or one),
// node by node in worker order. Refuses a request that is not ACTIVE. Errors: failure (not
// ACTIVE), not_found (no such node), usage (bad --worker, bad environment).
Expected<std::vector<WorkerPlan>> plan_workers(const TargetNodes& target, const PoolView& pool,
                                               const WorkerSelection& selection);

// A command that runs on only some workers of the job (ssh --worker=0, one node of several) is
// not a whole-slice program: JAX's distributed runtime would wait for processes that never
// come (5 minutes, then an abort). So when `plans` are fewer than the job's processes
// (TPUCTL_NUM_PROCESSES), each gets TPUCTL_JAX_INIT=0 unless the user set it: JAX there sees
// its own host's chips only. Never fails.
void mark_partial_job(std::vector<WorkerPlan>& plans);

// The host's tpuctl working directory as a remote path: absolute, or under the login directory
// ("~/.tpuctl"). Never ends with '/'.
std::string host_workdir(const HostEntry& host);

} // namespace tpuctl::provision
