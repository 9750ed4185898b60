// The scheduler: one pass over a pool's queued resources that applies every transition that is
// due at `now`. Pure logic over a snapshot (no IO, no store): reconcile.cpp runs it inside the
// store's transaction and turns the plan into ops, so two processes reconciling at once never
// apply a transition twice (the loser's compare-and-swap fails and it re-plans).
//
// The pass, in order:
//  0. SUSPENDED requests marked requeue (preempted with --on-preemption requeue, or repaired
//     after a lost host) go back to the queue, where their arrival keeps their place.
//  1. ACCEPTED requests enter the queue (WAITING_FOR_RESOURCES).
//  2. A waiting request past its valid-until fails with EXPIRED.
//  3. An ACTIVE flex-start slice past its max-run-duration starts SUSPENDING.
//  4. The queue is walked in order: tier (reserved, then standard and flex-start, then spot and
//     best-effort); within a tier, the project with the lowest share of its quota first, then
//     arrival (the store's create revision) within a project (quota.hpp: fair share). A request
//     held back by valid-after is skipped; so is a guaranteed one its project's quota holds back
//     (pending reason: the quota and what uses it), without holding anyone else back. Each
//     request that fits on free hosts is placed (PROVISIONING, its hosts claimed). One that does
//     not fit, and is not preemptible, may preempt: when it would fit if the hosts of lower-tier
//     spot/best-effort slices were free, the fewest such slices whose hosts the placement needs
//     start SUSPENDING (initiator SERVICE), borrowing slices (beyond their project's quota)
//     before the others, and their hosts are set aside for it, so nothing else takes them
//     before it is placed on the next pass. A spot request within its own project's quota may
//     reclaim, the same way, the hosts of other projects' borrowing slices.
//  5. Anti-starvation: a request that does not fit may be passed by smaller ones (backfill)
//     only until it has waited `head_wait_bound` at the front of its tier. From then on nothing
//     behind it in its tier or a lower one is placed, so hosts freed by finishing slices
//     accumulate until it fits. Requests of a higher tier are never held back by it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "provision/pool/pools.hpp"
#include "provision/queue/placement.hpp"
#include "provision/queue/queued_resource.hpp"

namespace tpuctl::provision {

struct SchedulerPolicy {
  std::chrono::milliseconds head_wait_bound{std::chrono::minutes(10)};
};

struct SchedulePlan {
  // Requests whose record changed (new state, nodes, pending reason), with their history
  // appended. Their `version` is still the one read, for compare-and-swap.
  std::vector<QueuedResource> changed;
  // Requests that went to PROVISIONING in this pass: hosts to claim for each (id -> hosts).
  std::vector<std::pair<std::string, std::vector<std::string>>> claims;
};

// One pass over `qrs` (every queued resource of the pool) on `view` (hosts and live claims).
// Never fails: a request whose type no longer parses or no longer fits the pool fails (FAILED,
// code INVALID) instead of blocking the queue.
SchedulePlan schedule(const PoolView& view, const std::vector<QueuedResource>& qrs, int64_t now_ms,
                      const SchedulerPolicy& policy = {});

// Fills `qr.nodes` from placements, one node per placement, workers in placement order, with
// each host's address from the pool. Used by schedule() and by `create --dry-run`.
void assign_nodes(QueuedResource& qr, const std::vector<Placement>& placements,
                  const PoolView& view);

} // namespace tpuctl::provision
