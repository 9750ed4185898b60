// A delete and the monitor of the workload it deletes (workload_delete.cpp's essay): the
// monitor's side of the handoff, called from its loop (workload_ops.cpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "provision/workload/workload.hpp"
#include "provision/workload/workload_ops.hpp"
#include "provision/workload/workload_watch.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

// The delete left this monitor the lease: say so in the store ("stopping"), stop every worker
// through its stream (no new session), then hand the lease back with the workers that
// confirmed; the delete stops the others itself. Returns the workload as it was. Errors: the
// store's.
Expected<std::optional<Workload>> stop_for_delete(state::StateStore& store, const Workload& wl,
                                                  WorkerWatch& watch, const MonitorOptions& o);

// Hands the lease back to a delete, saying which workers are stopped (and their files removed).
// Nothing when the record is not being deleted or the lease is not this process's, so the
// monitor calls it whatever ended it: the delete never waits for a lease no one lets go of.
Status release_to_delete(state::StateStore& store, const std::string& pool, const std::string& name,
                         const std::vector<size_t>& stopped);

} // namespace tpuctl::provision
