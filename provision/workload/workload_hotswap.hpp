// Hot swap: a workload whose slice lost a host, when that slice cannot be placed again (no
// spare, no free block), takes another slice of its cluster, a lower-priority workload's if it
// must, as GKE Hotswap does ("if no spare nodes are available, Hotswap can preempt a
// lower-priority workload"; shared/reference/failures-and-jax.md 5.1).
//
// tpuctl's clusters already have the machinery: the cluster's workload queue (workload_queue.hpp)
// admits by priority and evicts lower priorities to make room. A hot swap is one transaction
// over that queue (the same reads and the same serialization on the cluster's record as every
// pass, workload_admit.hpp):
//   1. the slice that could not be repaired is marked broken on the request (node_repair.hpp):
//      free for nobody until a repair succeeds;
//   2. the workload leaves its slices and waits again, keeping its priority and arrival;
//   3. the queue is planned with the broken slice taken out. When that admits the workload (a
//      slice of the cluster was idle) or evicts lower-priority workloads for it, the plan is
//      committed with 1 and 2: the victims stop with their own grace and go back to the queue
//      (they are not failing: an eviction never uses up their restarts), and the workload is
//      admitted onto their slice as soon as they are gone, starting its next attempt there with
//      its new worker identities (its checkpoint is where it resumes from). When the plan does
//      neither (nothing lower to take), nothing is written, and the caller repairs the whole
//      request instead (workload_recovery.hpp), as before.
// The broken slice is repaired later by whoever waits for it: a QUEUED workload's monitor,
// at each of its passes (every 30-35 s), places it again with repair_node when the pool has a
// block for it (a host freed, undrained, or made a spare), and the queue admits onto it again.
// The time the swapped workload waits is its recovery (goodput's infrastructure recovery).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "provision/workload/workload.hpp"
#include "provision/workload/workload_ops.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

// Steps 1-3 for `workload` (RECOVERING), whose slices `nodes` (node ids) could not be placed
// again (`why`, for people). Returns the workload afterwards when it was swapped (QUEUED
// behind its victims, or PENDING on an idle slice), nullopt when no swap is possible now (or
// the workload is gone or no longer recovering). Errors: the store's.
Expected<std::optional<Workload>> hotswap(state::StateStore& store, const Workload& workload,
                                          const std::vector<std::string>& nodes,
                                          const std::string& why, const MonitorOptions& options);

// The broken slices of `workload`'s cluster, placed and provisioned again where the pool now
// has room (repair_node); what was repaired, for people (empty: nothing broken, or no room
// yet). A slice another process is repairing is left to it. Errors: the store's.
Expected<std::vector<std::string>> repair_broken_slices(state::StateStore& store,
                                                        const Workload& workload,
                                                        const MonitorOptions& options);

} // namespace tpuctl::provision
