// How cli/ keeps workloads moving without a daemon, as qr_runtime does for queued resources:
// `workload create` starts a detached `tpuctl workload monitor NAME` (log in
// <state dir>/logs/workload-NAME.log), and every workload command that finds a running workload
// without a live monitor starts one.
#pragma once

#include <vector>

#include "cli/context.hpp"
#include "cli/ssh_flags.hpp"
#include "provision/workload/workload.hpp"
#include "provision/workload/workload_ops.hpp"
#include "state/store.hpp"

namespace tpuctl::cli {

// The monitor's options from the SSH flags: progress on stderr unless --quiet; a recovering
// workload drives its cluster's request in this process (drive_pool). Errors: usage.
Expected<provision::MonitorOptions> monitor_options(Context& ctx, const SshFlags& flags);

// Starts a detached monitor for `workload` when it needs one, or a detached delete when it
// finished and its --ttl-seconds-after-finished passed. Best effort.
void ensure_monitor(const Context& ctx, const provision::Workload& workload, const SshFlags& flags);

// ensure_monitor() for every workload of the list.
void ensure_monitors(const Context& ctx, const std::vector<provision::Workload>& workloads);

} // namespace tpuctl::cli
