#include "provision/slice/slice_env.hpp"

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
                    "worker " + std::to_string(worker) + " of node '" + node.id + "' is host '" +
                        name + "', which is no longer in pool '" + pool.info.name + "'");
}

Expected<SliceEnvInput> slice_env_input(const QueuedResource& qr, int node_index, int worker,
                                        const PoolView& pool) {
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
  in.slice_id = node_index;
  in.num_slices = static_cast<int>(qr.nodes.size());
  if (!qr.nodes.front().workers.empty()) {
    in.megascale_coordinator = qr.nodes.front().workers.front().address;
  }
  if (in.num_slices > 1) {
    for (const auto& n : qr.nodes) {
      for (const auto& w : n.workers) {
        in.job_hostnames.push_back(w.address);
      }
    }
  }
  in.agent_dir = agent_dir(host, agent_sha256(qr));
  in.slice_uid = qr.uid;
  return in;
}

} // namespace tpuctl::provision
