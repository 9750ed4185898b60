// A cluster's workload queue, as pure logic: which waiting workloads are admitted onto which of
// the cluster's slices, which admitted ones are evicted to make room, and why each of the
// others waits. No IO: the caller runs it inside the store's transaction over every workload of
// the cluster, so two processes never admit one workload twice or two onto one slice (the
// loser's compare-and-swap fails and it plans again), the no-daemon rule of queued resources.
//
// The rules are xpk's with Kueue (one ClusterQueue, preemption withinClusterQueue
// LowerPriority), with the queued resources' anti-starvation:
//  1. A workload asks for N of its cluster's slices and holds them from admission until it
//     ends or is evicted. Slices held by an admitted workload, evicting ones included (their
//     processes are still stopping), are not free: two admitted workloads never share a slice.
//  2. Waiting workloads are taken by priority (very-high 1000, high 750, medium 500, low 250,
//     very-low 100: xpk's PriorityClass values), then arrival (an evicted workload keeps its
//     arrival, as Kueue keeps the creation time), then name. Each one that fits on free slices
//     is admitted on the lowest-numbered ones.
//  3. One that does not fit may evict admitted workloads of lower priority when that frees
//     enough slices: candidates lowest priority first, then the most recently admitted, taken
//     until it fits, then walked back dropping any it does not need (Kueue's classic
//     preemption). The slices already free that it needs are set aside for it, so nothing
//     behind it takes them while its victims stop within their grace.
//  4. Smaller workloads may pass one that does not fit (backfill) only until it has waited
//     `head_wait_bound` at the head of the queue; from then on nothing of its priority or lower
//     is admitted behind it, so slices freed by finishing workloads accumulate until it fits.
//     Higher priorities are never held back by it.
//  5. A slice that lost a host and could not be placed again (its node broken: node_repair.hpp)
//     is free for nobody until it is repaired; a workload it held takes another slice by these
//     same rules (workload_hotswap.hpp), GKE Hotswap's "preempt a lower-priority workload".
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::provision {

// xpk's --priority names and their PriorityClass values.
Expected<int> parse_priority(const std::string& name);
// The name of a priority value ("medium" for 500); the number itself for any other value.
std::string priority_name(int value);
inline constexpr int k_default_priority = 500; // medium

struct QueueEntry {
  std::string name;
  int priority = k_default_priority;
  int64_t arrival_ms = 0; // when it was created: its place in the queue, kept on eviction
  int num_slices = 1;     // slices it asks for
  std::vector<int> held;  // the slices it holds (admitted); empty while it waits
  int64_t admitted_ms = 0;
  bool evicting = false;     // being stopped: it still holds its slices
  int64_t head_since_ms = 0; // when it became the head of the queue without fitting (0: not)
};

struct QueuePolicy {
  std::chrono::milliseconds head_wait_bound{std::chrono::minutes(10)};
};

struct QueuePlan {
  std::map<std::string, std::vector<int>> admit;  // waiting workload -> the slices it gets
  std::vector<std::string> evict;                 // admitted workloads to evict (with grace)
  std::map<std::string, std::string> evicted_for; // each of them -> the workload it makes room for
  // Every waiting workload not admitted now: why it waits, its place (1: next), and when it
  // became the starving head (0: it is not).
  std::map<std::string, std::string> reason;
  std::map<std::string, int> position;
  std::map<std::string, int64_t> head_since_ms;
};

// One pass over every unfinished workload of cluster `cluster` of `slices` slices at `now_ms`;
// the slices in `broken` wait for a repair (rule 5). Never fails: a workload asking for more
// slices than the cluster has waits, saying so.
QueuePlan plan_queue(const std::string& cluster, int slices, const std::vector<QueueEntry>& entries,
                     int64_t now_ms, const QueuePolicy& policy = {},
                     const std::set<int>& broken = {});

} // namespace tpuctl::provision
