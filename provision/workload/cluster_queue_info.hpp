// What xpk's `info --cluster C` shows of Kueue's queues, for a tpuctl cluster: its queue is the
// cluster's own (workload_admit.hpp), so its local queue ("multislice-queue", as xpk names it)
// and its cluster queue ("cluster-queue") are one and the same. A workload holding slices
// (PENDING, RUNNING, RECOVERING, EVICTING) is admitted; a QUEUED one is pending; an ended one is
// neither. Its chips in use are its slices times the slice's chips, against what the cluster
// holds (its slices times the same): xpk's "FLAVOR:google.com/tpu USED/QUOTA" cell, its flavor
// named as xpk names a TPU flavor ("<slices>x<type>").
#pragma once

#include <string>
#include <vector>

#include "provision/workload/cluster.hpp"
#include "provision/workload/workload.hpp"
#include "state/store.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

struct ClusterQueueUsage {
  std::string cluster;
  std::string flavor;   // "2xv5litepod-16"
  std::string resource; // "google.com/tpu"
  int chips_per_slice = 0;
  int64_t chips_used = 0;
  int64_t chips_total = 0;
  std::vector<std::string> admitted; // workload names, in the order listed
  std::vector<std::string> pending;  // QUEUED, in queue order (position 1 first)
};

// Pure: the usage of `cluster` given its workloads and a slice's chips.
ClusterQueueUsage summarize_cluster_queue(const Cluster& cluster,
                                          const std::vector<Workload>& workloads,
                                          int chips_per_slice);

// The same, read from the store. Errors: not_found naming the cluster; the store's.
Expected<ClusterQueueUsage> cluster_queue_usage(state::StateStore& store, const std::string& pool,
                                                const std::string& cluster);

} // namespace tpuctl::provision
