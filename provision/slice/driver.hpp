// The driver: carrying one queued resource through a transient state, outside any transaction.
// PROVISIONING -> ACTIVE or FAILED (provision_slice), SUSPENDING -> SUSPENDED and DELETING ->
// gone (stop_slice_processes, then the hosts are released). Only the lease holder drives (see
// reconcile.hpp); every commit re-reads the record and gives up if the state moved on or the
// lease was taken over (a delete takes it from a provisioning run), so a slow driver never
// overwrites a newer decision.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "provision/queue/queued_resource.hpp"
#include "provision/queue/reconcile.hpp"
#include "provision/slice/provisioning.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

struct DriveOptions {
  ProvisionOptions provision; // binary, SSH options, preflight bounds, progress
  // This process is the pool's elected controller (`tpuctl controller run`): a pool whose SSH
  // work is the controller's is driven only by it (pool/ssh_work.hpp).
  bool as_controller = false;
  std::chrono::milliseconds lease_ttl{std::chrono::minutes(10)};
  state::Clock clock = state::system_clock();
};

struct DriveResult {
  bool carried = false;             // false: another live process holds it, or nothing to do
  std::optional<QueuedResource> qr; // the record afterwards; nullopt when deleted
  // Not this process's to carry (its pool's SSH work is its owner's or the controller's): why,
  // as recorded in the request (k_waiting_for). Empty otherwise.
  std::string waiting_for;
};

// The note a transient request carries (in its provisioning object) while the processes that
// find it may not do its SSH work: "waiting for its owner alice (...)". Removed when one that
// may takes its lease.
inline constexpr const char* k_waiting_for = "waiting_for";
// That note of `qr`; empty when none.
std::string waiting_for(const QueuedResource& qr);

// Takes the lease of `id` and carries it to its next stable state, when the pool lets this
// process do the request's SSH work (pool/ssh_work.hpp: else it only notes why it waits). A
// request that does not exist (any more: another driver finished its delete) is nothing to do:
// not carried, no record. Errors: the store's.
Expected<DriveResult> drive(state::StateStore& store, const std::string& pool,
                            const std::string& id, const DriveOptions& options,
                            const remote::CancelToken* cancel = nullptr);

// Drives every request of `pool` that needs it, reconciling after each one (a suspension frees
// hosts that a waiting request may now take), until none is left or `max_rounds` passed.
// Returns how many were carried. Errors: the store's.
Expected<int> drive_pending(state::StateStore& store, const std::string& pool,
                            const DriveOptions& options, const SchedulerPolicy& policy = {},
                            const remote::CancelToken* cancel = nullptr, int max_rounds = 64);

} // namespace tpuctl::provision
