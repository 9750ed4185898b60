// Repairing one slice of a request in place: a workload lost a host, and only the slice (node)
// that held it goes back through placement and provisioning, while the request stays ACTIVE and
// its other slices keep their hosts, claims and agents (the other workloads on them never
// notice).
//
//  1. In one store transaction: the request must be ACTIVE; the node's hosts are treated as free
//     (the lost ones are drained by then, so they never come back), and so are the pool's spares
//     (held back for exactly this: pools.hpp set_spares), a block of the same type is placed on
//     free hosts with the placement rules of any request (placement.hpp), the node's
//     old hosts are released and the new ones claimed, the node's workers rewritten, and the
//     request marked `node_repair: {NODE: {since, hosts}}` in its provisioning data.
//  2. The new hosts alone are provisioned (push, probe, startup script, preflight among the
//     node's workers: ProvisionOptions::only_nodes).
//  3. The mark is replaced by `node_ready_ms: {NODE: time}`: a workload whose attempt started
//     before that time starts its next attempt (workload_recovery.cpp).
// When no block fits, or provisioning fails, or the agent built now differs from the one the
// other slices run, the mark is removed and the caller repairs the whole request instead (it
// goes back through the queue, as before this existed), or, when a workload of the cluster
// took another slice in its place (workload_hotswap.hpp), marks the node broken:
// `node_broken: {NODE: {since, why}}`. A broken node is admitted to no workload until a later
// repair_node succeeds (which removes the mark); a mark from before the request last became
// ACTIVE is stale (the request was placed again whole since).
#pragma once

#include <string>
#include <vector>

#include "provision/queue/queued_resource.hpp"
#include "provision/slice/provisioning.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

inline constexpr const char* k_node_repair_mark = "node_repair";
inline constexpr const char* k_node_ready_mark = "node_ready_ms";
inline constexpr const char* k_node_broken_mark = "node_broken";

struct NodeRepair {
  bool repaired = false;
  std::string why;                // not repaired: why (for people)
  std::vector<std::string> hosts; // repaired: the node's hosts now, in worker order
};

// Repairs node `node_id` of request `qr_id` in place. Errors: the store's; anything that keeps
// the repair from being done in place is `why` instead.
Expected<NodeRepair> repair_node(state::StateStore& store, const std::string& pool,
                                 const std::string& qr_id, const std::string& node_id,
                                 const ProvisionOptions& options, const state::Clock& clock);

// Provisions only nodes `nodes` (indices) of `qr`, which the others' agent must match. Returns
// "" when every worker of them is ready, else why not (for people).
std::string provision_nodes(state::StateStore& store, const std::string& pool,
                            const QueuedResource& qr, const std::vector<int>& nodes,
                            const ProvisionOptions& options);

// When node `node_id` was last repaired in place (unix ms), 0 when never; and whether a repair
// of it is under way.
int64_t node_ready_ms(const QueuedResource& qr, const std::string& node_id);
bool node_repairing(const QueuedResource& qr, const std::string& node_id);

// Whether node `node_id` waits for a repair (a current k_node_broken_mark), and why (for
// people: "" when it does not).
bool node_broken(const QueuedResource& qr, const std::string& node_id);
std::string node_broken_why(const QueuedResource& qr, const std::string& node_id);
// Marks node `node_id` broken since `now_ms`.
void mark_node_broken(QueuedResource& qr, const std::string& node_id, int64_t now_ms,
                      const std::string& why);

} // namespace tpuctl::provision
