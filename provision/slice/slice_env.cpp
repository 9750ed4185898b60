#include "provision/slice/slice_env.hpp"

#include <algorithm>

#include "provision/slice/slice_workers.hpp"
#include "topology/accelerator_type.hpp"

namespace tpuctl::provision {

std::string agent_dir(const HostEntry& host, const std::string& sha256) {
  return sha256.empty() ? std::string() : host_workdir(host) + "/agent/" + sha256;
}

std::string agent_path(const HostEntry& host, const std::string& sha256) {
  std::string dir = agent_dir(host, sha256);
  return dir.empty() ? dir : dir + "/tpuctl";
}

std::string agent_sha256(const QueuedResource& qr) {
  auto it = qr.provisioning.find("agent_sha256");
  return it != qr.provisioning.end() && it->is_string() ? it->get<std::string>() : "";
}

Expected<HostEntry> worker_host(const QueuedResource& qr, int node_index, int worker,
                                const PoolView& pool) {
  if (node_index < 0 || node_index >= static_cast<int>(qr.nodes.size())) {
    return make_error(ErrorKind::failure,
                      "queued resource '" + qr.id + "' has no node " + std::to_string(node_index));
  }
  const QrNode& node = qr.nodes[static_cast<size_t>(node_index)];
  if (worker < 0 || worker >= static_cast<int>(node.workers.size())) {
    return make_error(ErrorKind::failure, "node '" + node.id + "' has no worker " +
                                              std::to_string(worker) + " (it has " +
                                              std::to_string(node.workers.size()) + ")");
  }
  const std::string& name = node.workers[static_cast<size_t>(worker)].host;
  for (const auto& h : pool.hosts) {
    if (h.name == name) {
      return h;
    }
  }
  return make_error(ErrorKind::failure,
                    "worker " + worker_label(node.id, worker, name) + ": host '" + name +
                        "' is no longer in pool '" + pool.info.name + "'");
}

Expected<SliceEnvInput> slice_env_input(const QueuedResource& qr, int node_index, int worker,
                                        const PoolView& pool, const std::vector<int>& job_nodes) {
  TPUCTL_TRY_ASSIGN(HostEntry host, worker_host(qr, node_index, worker, pool));
  TPUCTL_TRY_ASSIGN(topology::AcceleratorType type,
                    topology::parse_accelerator_type(qr.accelerator_type));
  SliceEnvInput in;
  in.type = type;
  const QrNode& node = qr.nodes[static_cast<size_t>(node_index)];
  in.tpu_name = node.id;
  for (const auto& w : node.workers) {
    in.hostnames.push_back(w.address);
  }
  std::vector<int> job = job_nodes;
  if (job.empty()) {
    for (size_t i = 0; i < qr.nodes.size(); ++i) {
      job.push_back(static_cast<int>(i));
    }
  }
  const auto at = std::find(job.begin(), job.end(), node_index);
  if (at == job.end()) {
    return Error(ErrorKind::failure, "node " + std::to_string(node_index) + " of '" + qr.id +
                                         "' is not one of the job's slices");
  }
  for (int n : job) {
    if (n < 0 || static_cast<size_t>(n) >= qr.nodes.size()) {
      return Error(ErrorKind::failure, "'" + qr.id + "' has no node " + std::to_string(n) +
                                           " (it has " + std::to_string(qr.nodes.size()) + ")");
    }
  }
  in.slice_id = static_cast<int>(at - job.begin());
  in.num_slices = static_cast<int>(job.size());
  const QrNode& first = qr.nodes[static_cast<size_t>(job.front())];
  if (!first.workers.empty()) {
    in.megascale_coordinator = first.workers.front().address;
  }
  if (in.num_slices > 1) {
    for (int n : job) {
      for (const auto& w : qr.nodes[static_cast<size_t>(n)].workers) {
        in.job_hostnames.push_back(w.address);
      }
    }
  }
  in.agent_dir = agent_dir(host, agent_sha256(qr));
  in.slice_uid = qr.uid;
  return in;
}

} // namespace tpuctl::provision
