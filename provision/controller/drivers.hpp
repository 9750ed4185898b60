// Who carries a queued resource on, without a daemon (provision/queue/reconcile.hpp hands out
// the leases): every command reconciles when it opens the store, and a request left in a
// transient state with no live lease gets a driver, either this process (create, wait, delete,
// controller) or a detached `tpuctl controller drive` (launcher.hpp). A command drives the one
// request it is about, and any request its lease says is this process's; anything else it
// unblocks (a waiting request placed on the hosts a delete freed) goes to one detached driver,
// so a command does its own work only and never waits for someone else's.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "provision/controller/launcher.hpp"
#include "provision/slice/driver.hpp"
#include "remote/ssh_types.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

// Reconciles every pool and starts a detached driver (`launcher`) for each pool with requests
// that need one. A pool that could not be reconciled is a warning (warn_unreconciled), not an
// error. Errors: the store's when it cannot be read at all.
Status reconcile_and_spawn(const Launcher& launcher, state::StateStore& store);
// One warning per pool whose due transitions could not be applied (none for a read-only store:
// reads still work, and a write says so itself).
void warn_unreconciled(const std::vector<Error>& errors);

// Drives every request of `pool` (every pool when empty) that needs a driver, in this process
// (`tpuctl controller run` and `drive`). Returns how many it carried. Errors: the store's.
Expected<int> drive_pools(state::StateStore& store, const std::string& pool,
                          const DriveOptions& options, const remote::CancelToken* cancel);

// How follow() shows where the request stands; an empty function shows nothing.
struct Following {
  std::function<void(const std::string&)> line; // a new state: "q1: PROVISIONING"
  // The same state, still: "q1: still PROVISIONING after 40s".
  std::function<void(const std::string&)> status;
  const remote::CancelToken* cancel = nullptr; // once cancelled: stop (kind interrupted)
  // Stop when the request waits for its owner, who alone carries it on (a delete or reset of
  // someone else's request, with --override-owner): nothing would come of waiting here. A wait
  // that only watches keeps following.
  bool stop_when_owners = false;
};

// Follows request `id` of `pool` until done(record) holds (the record is nullopt once deleted)
// or `timeout` passes (0: no limit): every tick reconciles the pool and drives `id` (and any
// request whose lease this process holds) here; any other request that needs a driver is
// handed to a detached one (spawn_driver with `launcher`), unless its pool gives its SSH work to
// someone else (pool/ssh_work.hpp). When `id` itself waits for its owner and
// `following.stop_when_owners`, returns at once with `waiting_for`. Returns the last record seen
// and whether done() held. Errors: the store's; interrupted (kind interrupted, saying where the
// request stands) once `following.cancel` is cancelled.
struct FollowResult {
  std::optional<QueuedResource> qr;
  bool done = false;
  // Not done, and not this process's to carry on: it waits for its owner (a pool whose SSH work
  // is each owner's), who alone carries it on. Why, as the request says.
  std::string waiting_for;
};
using DoneFn = std::function<bool(const std::optional<QueuedResource>&)>;
// The DoneFn of create: the request is gone, ACTIVE, FAILED or SUSPENDED.
bool settled(const std::optional<QueuedResource>& qr);
Expected<FollowResult> follow(state::StateStore& store, const std::string& pool,
                              const std::string& id, const DoneFn& done,
                              std::chrono::milliseconds timeout, const DriveOptions& options,
                              const Launcher& launcher, const Following& following);

// What a create does once its queued resource is recorded (it exists from then on): with
// `async`, applies due transitions and starts a driver, best effort (a failure is a warning
// naming `what`; the next command carries the request on); otherwise follows it (`settled`) for
// up to `timeout`.
struct CarryOn {
  QueuedResource qr;       // as last seen (the recorded one when it cannot be read)
  bool done = false;       // settled (always true with `async`)
  bool gone = false;       // deleted meanwhile, or the store vanished with it: nothing to print
  std::string waiting_for; // FollowResult's: it waits for its owner
  // Why following stopped, when not done: interrupted, the store replaced under the command
  // (then `gone`), or any other error of follow() (the caller says what exists and how to go on).
  std::optional<Error> failed;
};
CarryOn carry_on(state::StateStore& store, const QueuedResource& recorded, bool async,
                 std::chrono::milliseconds timeout, const DriveOptions& options,
                 const Launcher& launcher, const Following& following, const std::string& what);

} // namespace tpuctl::provision
