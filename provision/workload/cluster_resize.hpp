// Resizing a cluster the xpk way: `cluster create` again on an existing cluster, with the same
// type and tier and another --num-slices. The request stays ACTIVE throughout, and no slice that
// stays is touched: the workloads on it run on.
//
// Growing places the new slices on free hosts with the placement rules of any request (one
// transaction: the placements, their claims, the nodes appended to the request), provisions
// them alone (node_repair.hpp's only_nodes), and only then raises the cluster's slice count, so
// the queue never admits a workload onto a slice still being provisioned; a workload waiting
// for more slices is admitted right after. While the pool has no room for them they wait, as
// any request does, woken by every change of the pool, until the caller's time is up (then
// nothing has changed and the error names what is in the way); when provisioning fails, the
// new slices are released again.
//
// Shrinking removes the slices no admitted workload holds first (the highest numbers first),
// then, only with --force, held ones: their workloads are evicted with their grace (EVICTING,
// then back in the queue, as a higher priority does). In one transaction the cluster's slice
// count drops (the queue no longer uses the slices going away), the request's nodes are
// reordered so the ones staying come first, and every workload's slice numbers follow
// (resolve_slices); once no workload holds a departing slice, a second transaction removes its
// nodes and releases its hosts. Run again after an interruption, it finishes what was begun.
//
// Anything else that differs (the type, the tier) is refused naming it, and nothing changes.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "provision/slice/provisioning.hpp"
#include "provision/workload/cluster.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

// How long a grow waits for room: not at all (`wait` false), or up to `limit` (0: no limit).
struct ResizeWait {
  bool wait = true;
  std::chrono::milliseconds limit{0};
};

struct ClusterResize {
  Cluster cluster;                  // afterwards
  int from = 0;                     // slices before
  std::vector<std::string> added;   // node ids
  std::vector<std::string> removed; // node ids
  std::vector<std::string> evicted; // workloads (shrink --force)
};

// What resize_cluster would refuse before it changes anything: another type or tier, no such
// cluster, its request not ACTIVE (a grow with --async is checked so, then carried on by a
// background tpuctl). Errors: as resize_cluster's.
Status check_resize(state::StateStore& store, const ClusterRequest& request);

// Errors (nothing changed): usage (another type or tier, naming both), not_found (no such
// cluster), failure (its request is not ACTIVE; held slices without `force`; provisioning of a
// new slice failed; an evicted workload did not stop in time: run it again), capacity (no room
// for the new slices within `wait`, naming what is in the way), the store's.
Expected<ClusterResize> resize_cluster(state::StateStore& store, const ClusterRequest& request,
                                       bool force, const ProvisionOptions& provision,
                                       const ResizeWait& wait, const state::Clock& clock,
                                       const std::function<void(const std::string&)>& progress);

} // namespace tpuctl::provision
