// The workload room's invariants for `tpuctl state check`, over the same pool snapshot as the
// queue room's (provision/queue/state_check.hpp), each violation one finding:
//  * every cluster and workload record can be read;
//  * every cluster's queued resource exists (`qr delete` of a cluster's request leaves the
//    cluster MISSING);
//  * every workload's cluster exists (`cluster delete` removes its workloads with it);
//  * a workload that is not finished (SUCCEEDED or FAILED) has its queued resource.
#pragma once

#include <string>
#include <vector>

#include "provision/queue/state_check.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

// The findings above in one pool's snapshot.
std::vector<Finding> check_workload_snapshot(const state::PoolSnapshot& snap);

// Every invariant tpuctl keeps: check_pool_snapshot and check_workload_snapshot on each pool's
// snapshot (of `pool`, or of every pool when it is empty). Errors: the store cannot be read.
Expected<std::vector<Finding>> check_state(state::StateStore& store, const std::string& pool);

} // namespace tpuctl::provision
