#include "provision/workload/workload_check.hpp"

#include <map>
#include <set>

#include "provision/workload/cluster.hpp"
#include "provision/workload/workload.hpp"

namespace tpuctl::provision {

std::vector<Finding> check_workload_snapshot(const state::PoolSnapshot& snap) {
  const std::string& pool = snap.pool.key.pool;
  std::vector<Finding> out;
  auto add = [&](std::string subject, std::string problem) {
    out.push_back(Finding{pool, std::move(subject), std::move(problem)});
  };
  std::set<std::string> requests;
  std::map<std::string, Cluster> clusters;
  std::vector<Workload> workloads;
  for (const auto& r : snap.records) {
    if (!r.unreadable.empty()) {
      continue; // check_pool_snapshot reports it
    }
    const std::string subject =
        std::string(state::display_name(r.key.kind)) + " '" + r.key.id + "'";
    if (r.key.kind == state::Kind::queued_resource) {
      requests.insert(r.key.id);
    } else if (r.key.kind == state::Kind::cluster) {
      auto c = cluster_from_json(r.doc);
      if (!c) {
        add(subject, "cannot be read: " + c.error().message);
        continue;
      }
      clusters[r.key.id] = std::move(*c);
    } else if (r.key.kind == state::Kind::workload) {
      auto w = workload_from_json(r.doc);
      if (!w) {
        add(subject, "cannot be read: " + w.error().message);
        continue;
      }
      workloads.push_back(std::move(*w));
    }
  }
  for (const auto& [name, c] : clusters) {
    if (!requests.count(c.queued_resource)) {
      add("cluster '" + name + "'",
          "its queued resource '" + c.queued_resource +
              "' does not exist (deleted with 'tpuctl queued-resources delete'?): 'tpuctl "
              "cluster delete " +
              name + "' removes the cluster and its workloads");
    }
  }
  for (const auto& w : workloads) {
    const std::string subject = "workload '" + w.name + "'";
    if (!clusters.count(w.cluster)) {
      add(subject, "belongs to cluster '" + w.cluster +
                       "', which does not exist: 'tpuctl workload delete " + w.name +
                       "' removes its record");
    } else if (!is_terminal(w.state) && !requests.count(w.queued_resource)) {
      add(subject, "is " + std::string(to_string(w.state)) + " on queued resource '" +
                       w.queued_resource + "', which does not exist");
    }
  }
  // The queue's promise: a slice is held by one admitted workload at most.
  std::map<std::pair<std::string, std::string>, std::string> holder; // (cluster, node) -> name
  for (const auto& w : workloads) {
    if (!holds_slices(w.state)) {
      continue;
    }
    for (const auto& node : w.slice_nodes) {
      auto [it, fresh] = holder.emplace(std::make_pair(w.cluster, node), w.name);
      if (!fresh) {
        add("workload '" + w.name + "'",
            "holds slice '" + node + "' of cluster '" + w.cluster + "', which workload '" +
                it->second + "' holds too: delete one of them ('tpuctl workload delete " + w.name +
                "')");
      }
    }
  }
  return out;
}

Expected<std::vector<Finding>> check_state(state::StateStore& store, const std::string& pool) {
  return check_snapshots(store, pool, [](const state::PoolSnapshot& snap) {
    auto found = check_pool_snapshot(snap);
    auto more = check_workload_snapshot(snap);
    found.insert(found.end(), more.begin(), more.end());
    return found;
  });
}

} // namespace tpuctl::provision
