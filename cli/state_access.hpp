// Opening the state store for a command (from --state / TPUCTL_STATE). Every command that reads
// or writes state goes through here, so this is where due transitions will be applied first.
#pragma once

#include <memory>

#include "cli/context.hpp"
#include "state/location.hpp"
#include "state/store.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

// How to open stores for this command: the etcd flags, the password read from
// --etcd-password-file (its first line) or else TPUCTL_ETCD_PASSWORD, and TPUCTL_ETCD_MAX_TXN_OPS.
// Errors: usage naming a password file that cannot be read or is empty, or a bad number.
Expected<state::OpenOptions> open_options(const Context& ctx);

enum class Drivers { spawn, none };
// Opens (once per process) and returns the store named by the global --state flag, after
// applying every due transition (provision/reconcile.hpp). With Drivers::spawn, requests left
// in a transient state with no live driver get a detached one (cli/qr_runtime.hpp); drivers
// themselves open with Drivers::none. Errors: the store's.
Expected<state::StateStore*> open_state(Context& ctx, Drivers drivers = Drivers::spawn);

} // namespace tpuctl::cli
