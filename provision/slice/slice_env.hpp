// From a placed queued resource to what each of its workers sees: the agent's directory on the
// worker's host and the worker_env input of a worker. `tpuctl ssh`, `tpuctl env`, provisioning
// (startup scripts) and workloads all go through here, so every path agrees.
#pragma once

#include <string>

#include "provision/pool/pools.hpp"
#include "provision/queue/queued_resource.hpp"
#include "provision/slice/worker_env.hpp"

namespace tpuctl::provision {

// The agent's content-addressed directory on a host: <workdir>/agent/<sha256>, where a relative
// workdir is under the login directory ("~/.tpuctl/agent/<sha256>"). Empty when sha256 is.
std::string agent_dir(const HostEntry& host, const std::string& sha256);
// The agent binary in it: agent_dir(...) + "/tpuctl".
std::string agent_path(const HostEntry& host, const std::string& sha256);

// The sha256 of the agent provisioning shipped (qr.provisioning["agent_sha256"]), or "".
std::string agent_sha256(const QueuedResource& qr);

// The worker_env input of worker `worker` of node `node_index`: the node's hostnames (peer
// addresses) in worker order, TPU_NAME = node id, one slice per node (MEGASCALE_* when the
// request has several nodes), the agent directory on that worker's host, TPUCTL_QR_UID.
// `job_nodes` (node indices, node_index among them) makes only those nodes the job: a workload
// holding some slices of its cluster numbers them 0..n-1 (MEGASCALE_SLICE_ID, _NUM_SLICES and
// the coordinator over them alone); empty: every node of the request.
// Errors: failure when the request has no such node or worker, or names a host the pool lacks.
Expected<SliceEnvInput> slice_env_input(const QueuedResource& qr, int node_index, int worker,
                                        const PoolView& pool,
                                        const std::vector<int>& job_nodes = {});

// The pool host record behind worker `worker` of node `node_index`. Errors: as slice_env_input.
Expected<HostEntry> worker_host(const QueuedResource& qr, int node_index, int worker,
                                const PoolView& pool);

} // namespace tpuctl::provision
