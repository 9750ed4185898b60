// How cli/ keeps queued resources moving without a daemon (provision/queue/reconcile.hpp): every
// command reconciles when it opens the store, and requests left in a transient state with no
// live lease get a driver: this process (create, wait, delete, controller) or a detached
// `tpuctl controller drive` started here, whose log goes to <state dir>/logs/driver.log.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/context.hpp"
#include "cli/ssh_flags.hpp"
#include "provision/slice/driver.hpp"
#include "state/store.hpp"

namespace tpuctl::cli {

// The options a driver in this process uses: this binary, the SSH flags, progress on stderr
// (unless --quiet). Errors: bad SSH flags (usage).
Expected<provision::DriveOptions> drive_options(const Context& ctx, const SshFlags& flags);

// Starts a detached `tpuctl controller drive` for `pool` (its own session; stdin/stdout closed;
// log file in the state directory) passing the state URL and the SSH policy flags. Best effort:
// a failure to start is logged, and the next command that reconciles tries again.
void spawn_driver(const Context& ctx, const std::string& pool, const SshFlags& flags);

// Starts `tpuctl <globals> COMMAND... --strict-host-key-checking P [--ssh-config F]` detached,
// as spawn_driver does, logging to <state dir>/logs/<log_name>. Best effort.
void spawn_detached(const Context& ctx, const std::string& pool,
                    const std::vector<std::string>& command, const SshFlags& flags,
                    const std::string& log_name);

// Reconciles every pool and spawns a driver for each pool with requests that need one. Called
// by open_state(). A pool that could not be reconciled is a warning (warn_unreconciled), not an
// error: the command goes on. Errors: the store's when it cannot be read at all.
Status reconcile_and_spawn(const Context& ctx, state::StateStore& store);
// One warning on stderr per pool whose due transitions could not be applied.
void warn_unreconciled(const std::vector<Error>& errors);

// Follows request `id` of `pool` until done(record) holds (the record is nullopt once deleted)
// or `timeout` passes (0: no limit): every tick reconciles the pool and drives `id` (and any
// request whose lease this process holds) in this process; any other request that needs a
// driver (say one placed on the hosts a delete just freed) is handed to a detached driver
// (spawn_driver, with `flags`), so a command does its own work only. Prints each new state
// (with its reason) on stderr unless --quiet. Returns the last record seen and whether done()
// held. Errors: the store's; interrupted (kind interrupted) on SIGINT.
struct FollowResult {
  std::optional<provision::QueuedResource> qr;
  bool done = false;
};
using DoneFn = std::function<bool(const std::optional<provision::QueuedResource>&)>;
// The DoneFn of create: the request is gone, ACTIVE, FAILED or SUSPENDED.
bool settled(const std::optional<provision::QueuedResource>& qr);
Expected<FollowResult> follow(const Context& ctx, state::StateStore& store, const std::string& pool,
                              const std::string& id, const DoneFn& done,
                              std::chrono::milliseconds timeout,
                              const provision::DriveOptions& options, const SshFlags& flags);

// What a create command does once its queued resource is recorded (it exists from then on, so
// nothing after this point may read as "not created"): with `async`, applies due transitions
// and starts a driver, best effort (a failure is a warning; the next command carries the
// request on); otherwise follows it (follow(), `settled`) for up to `timeout`.
struct CarryOn {
  provision::QueuedResource qr; // as last seen (the recorded one when it cannot be read)
  bool done = false;            // settled (always true with `async`)
  bool gone = false; // deleted meanwhile, or the store vanished with it: nothing to print
  // Why following stopped, when not done: interrupted (exit 130, saying where the request
  // stands) or a failure turned into kind partial (exit 6) by recorded_then_failed, naming
  // `what` ("queued resource 'q'", "cluster 'c'") and its state. The caller prints the record
  // first, then returns it. A store that vanished under the command stays as it was: then the
  // request is gone too. `group` ("qr", "cluster") names the command that deletes it.
  std::optional<Error> failed;
};
CarryOn carry_on(const Context& ctx, state::StateStore& store,
                 const provision::QueuedResource& recorded, bool async,
                 std::chrono::milliseconds timeout, const provision::DriveOptions& options,
                 const SshFlags& flags, const std::string& what, std::string_view group = "qr");

// The state directory (where local pools and driver logs live). Errors: a bad --state URL.
Expected<std::string> state_dir(const Context& ctx);

} // namespace tpuctl::cli
