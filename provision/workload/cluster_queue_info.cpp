#include "provision/workload/cluster_queue_info.hpp"

#include <algorithm>

#include "topology/accelerator_type.hpp"

namespace tpuctl::provision {

ClusterQueueUsage summarize_cluster_queue(const Cluster& cluster,
                                          const std::vector<Workload>& workloads,
                                          int chips_per_slice) {
  ClusterQueueUsage u;
  u.cluster = cluster.name;
  u.flavor = std::to_string(cluster.num_slices) + "x" + cluster.tpu_type;
  u.resource = "google.com/tpu";
  u.chips_per_slice = chips_per_slice;
  u.chips_total = static_cast<int64_t>(cluster.num_slices) * chips_per_slice;
  std::vector<const Workload*> queued;
  for (const Workload& w : workloads) {
    if (w.cluster != cluster.name || is_terminal(w.state)) {
      continue;
    }
    if (w.state == WorkloadState::queued) {
      queued.push_back(&w);
      continue;
    }
    u.admitted.push_back(w.name);
    u.chips_used += static_cast<int64_t>(w.slices.size()) * chips_per_slice;
  }
  // Queue order: the position the queue's last pass gave (0: not yet placed) last, then names.
  std::stable_sort(queued.begin(), queued.end(), [&](const Workload* a, const Workload* b) {
    const auto pos = [&](const Workload* w) {
      const auto& view = cluster.queue;
      if (view.is_object() && view.contains(w->name) && view[w->name].is_object()) {
        const int p = view[w->name].value("position", 0);
        return p > 0 ? p : 1 << 30;
      }
      return 1 << 30;
    };
    return std::pair(pos(a), a->name) < std::pair(pos(b), b->name);
  });
  for (const Workload* w : queued) {
    u.pending.push_back(w->name);
  }
  return u;
}

Expected<ClusterQueueUsage> cluster_queue_usage(state::StateStore& store, const std::string& pool,
                                                const std::string& cluster) {
  TPUCTL_TRY_ASSIGN(auto c, load_cluster(store, pool, cluster));
  TPUCTL_TRY_ASSIGN(auto type, topology::parse_accelerator_type(c.tpu_type));
  TPUCTL_TRY_ASSIGN(auto workloads, list_workloads(store, pool, cluster));
  return summarize_cluster_queue(c, workloads, type.chips);
}

} // namespace tpuctl::provision
