// The command line's side of provision/controller (who carries requests and workloads on): the
// options a driver or monitor in this process gets from the flags and the environment, the
// Launcher that detached ones get (this binary, the store access, the SSH policy, the log
// directory), and follow/carry_on with what a terminal adds: progress on stderr and Ctrl-C.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "cli/context.hpp"
#include "cli/ssh_flags.hpp"
#include "provision/controller/drivers.hpp"
#include "provision/controller/launcher.hpp"
#include "provision/workload/workload_ops.hpp"
#include "state/store.hpp"

namespace tpuctl::cli {

// The state directory (where local pools and driver logs live). Errors: a bad --state URL.
Expected<std::string> state_dir(const Context& ctx);

// What a detached tpuctl started by this command gets: the same store access (--state, the
// --etcd-* flags; a password only through the inherited environment or its file), the SSH
// policy of `flags`, logs under <state dir>/logs.
provision::Launcher launcher(const Context& ctx, const SshFlags& flags = {});

// The options a driver in this process uses: this binary, the SSH flags, progress on stderr
// (unless --quiet). Errors: bad SSH flags (usage).
Expected<provision::DriveOptions> drive_options(const Context& ctx, const SshFlags& flags);

// The monitor's options from the SSH flags: progress on stderr unless --quiet; a recovering
// workload drives its cluster's request in this process (drive_pool). Errors: usage.
Expected<provision::MonitorOptions> monitor_options(Context& ctx, const SshFlags& flags);

// provision::follow with progress on stderr and Ctrl-C (SIGINT/SIGTERM) as its cancel. With
// `own_action` (a delete or reset this command made), a request that waits for its owner ends
// the follow with `waiting_for`, said on stderr.
Expected<provision::FollowResult>
follow(const Context& ctx, state::StateStore& store, const std::string& pool, const std::string& id,
       const provision::DoneFn& done, std::chrono::milliseconds timeout,
       const provision::DriveOptions& options, const SshFlags& flags, bool own_action = false);

// provision::carry_on, the same way; a failure other than an interrupt or a replaced store
// becomes kind partial (exit 6) by recorded_then_failed, naming `what` ("queued resource 'q'")
// and its state, and how to go on (`group` names the command that deletes it: "qr", "cluster").
// The caller prints the record first, then returns `failed`.
provision::CarryOn carry_on(const Context& ctx, state::StateStore& store,
                            const provision::QueuedResource& recorded, bool async,
                            std::chrono::milliseconds timeout,
                            const provision::DriveOptions& options, const SshFlags& flags,
                            const std::string& what, std::string_view group = "qr");

} // namespace tpuctl::cli
