// tpuctl's own invariants over a state store (`tpuctl state check`), beyond what the backend
// checks of itself (StateStore::check_integrity). Every pool is read at one revision (a
// snapshot), and each violation is one finding:
//  * every record can be read (a JSON object of its kind);
//  * every claim is held by a queued resource of the pool that exists, holds hosts in its state
//    (PROVISIONING, ACTIVE, SUSPENDING, DELETING) and has the host among its workers;
//  * no host is a worker of two requests that hold hosts (a host claimed twice);
//  * every worker of a request that holds hosts is a host of the pool and claimed by it (while
//    DELETING, released claims are expected);
//  * no host was claimed after it was drained (a drained host is never placed; draining a host
//    that is in use is allowed, and is not a finding).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "state/store.hpp"

namespace tpuctl::provision {

struct Finding {
  std::string pool;    // "" for the store as a whole
  std::string subject; // "queued resource 'q'", "host 'h1'"
  std::string problem; // lowercase, says what is wrong and what it should be
};

// The findings in one pool's snapshot (the claims, hosts and queued resources above).
std::vector<Finding> check_pool_snapshot(const state::PoolSnapshot& snap);

// Runs `check` on the snapshot of `pool`, or of every pool when `pool` is empty (each pool read
// once, at one revision). Errors: the store cannot be read.
Expected<std::vector<Finding>>
check_snapshots(state::StateStore& store, const std::string& pool,
                const std::function<std::vector<Finding>(const state::PoolSnapshot&)>& check);

} // namespace tpuctl::provision
