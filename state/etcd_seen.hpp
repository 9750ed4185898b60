// What this machine's tpuctl remembers of the etcd stores it used: for each store URL, the id of
// the cluster that answered and the highest revision seen, in <state dir>/etcd-clusters.json
// (0600). etcd cannot tell an empty prefix that never held a store from one whose cluster was
// restarted with an empty data directory; this memory can: an empty prefix where a store was
// used, in another cluster or at a lower revision (a cluster's revision never goes back), was
// reset or replaced (state/etcd_store.hpp turns that into reason k_store_replaced).
#pragma once

#include <cstdint>
#include <string>

namespace tpuctl::state {

struct SeenCluster {
  std::string cluster_id; // "" when never seen
  int64_t revision = 0;
};

// What is remembered for `url` in `file`; empty when nothing (or the file is unreadable: the
// memory is a safety net, never a reason to fail).
SeenCluster remembered_cluster(const std::string& file, const std::string& url);

// Remembers `seen` for `url` in `file` (created 0600, its directory 0700, when missing;
// rewritten only when something changed). Best effort: a failure is logged at debug level.
void remember_cluster(const std::string& file, const std::string& url, const SeenCluster& seen);

} // namespace tpuctl::state
