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
// Whether the command may create the store: only those that create things (a pool, a restore)
// do, and then only by their first write (state/deferred_store.hpp). Every other command fails
// on a store that does not exist, naming it (exit 4), and creates nothing.
enum class Access { existing, create };
// Opens (once per process) and returns the store named by the global --state flag, after
// applying every due transition (provision/queue/reconcile.hpp; skipped on a read-only store, where
// reads still work and writes say why they are refused). With Drivers::spawn, requests left
// in a transient state with no live driver get a detached one (provision/controller/drivers.hpp); drivers
// themselves open with Drivers::none. Errors: the store's.
Expected<state::StateStore*> open_state(Context& ctx, Drivers drivers = Drivers::spawn,
                                        Access access = Access::existing);
inline Expected<state::StateStore*> open_state(Context& ctx, Access access) {
  return open_state(ctx, Drivers::spawn, access);
}

// Opens `url` with this command's options and nothing more: no due transitions, no drivers
// (the `state` commands, which only read, copy or check). Errors: the store's.
Expected<std::unique_ptr<state::StateStore>>
open_store_only(const Context& ctx, const std::string& url, Access access = Access::existing);

} // namespace tpuctl::cli
