// Who watches a workload, without a daemon: `workload create` starts a detached `tpuctl workload
// monitor NAME` (log: <state dir>/logs/workload-NAME.log), and every workload command that finds
// a workload without a live monitor starts one, as drivers.hpp does for requests; a finished
// workload whose --ttl-seconds-after-finished passed with no monitor left gets a detached delete.
#pragma once

#include <vector>

#include "provision/controller/launcher.hpp"
#include "provision/workload/workload.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

// Starts a detached monitor for `workload` when it needs one and its pool lets this process (the
// launcher's: a command, or the controller) do its SSH work (pool/ssh_work.hpp), or a detached
// delete when it finished and its TTL passed. Best effort.
void ensure_monitor(const Launcher& launcher, state::StateStore& store, const Workload& workload);

// ensure_monitor() for every workload of the list, with the default SSH policy.
void ensure_monitors(const Launcher& launcher, state::StateStore& store,
                     const std::vector<Workload>& workloads);

} // namespace tpuctl::provision
