// Reconciliation: applying the scheduler's due transitions to the store, and the leases that say
// which tpuctl process is carrying a queued resource through a transient state (PROVISIONING,
// SUSPENDING, DELETING).
//
// There is no daemon. Every command that reads or writes state calls reconcile_pool() first: the
// scheduler pass runs inside the store's transaction (SQLite: under its write lock; etcd: a
// compare-and-swap on every record it read), so two processes reconciling at once never apply a
// transition twice. Work that needs IO (pushing the agent, killing a slice's processes) happens
// outside any transaction, by the process holding the request's lease: a {host, pid} pair
// written with compare-and-swap. A lease whose process is gone (same host: the pid no longer
// runs tpuctl; another host: past its expiry) is free again, and reconcile reports the request
// in `needs_driver` so the caller can carry it on (provision/slice/driver.hpp).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "provision/queue/queued_resource.hpp"
#include "provision/queue/scheduler.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

struct Lease {
  std::string host; // gethostname() of the holder
  int pid = 0;
  int64_t taken_ms = 0;
  int64_t expires_ms = 0; // for holders on other machines, which cannot be checked by pid
};

// {"host", "pid", "taken_ms", "expires_ms"}: how a lease is stored (queued resources, workloads).
nlohmann::json to_json(const Lease& lease);
// The lease stored in `doc`, or nullopt when it is not an object.
std::optional<Lease> lease_from_json(const nlohmann::json& doc);
// The lease recorded in qr.provisioning["lease"], or nullopt when none.
std::optional<Lease> lease_of(const QueuedResource& qr);
// This process's lease, valid for `ttl` from now_ms.
Lease own_lease(int64_t now_ms, std::chrono::milliseconds ttl);
// True while the lease's holder is alive: on this host, the pid runs (and is not a zombie); on
// another host, now_ms < expires_ms.
bool lease_alive(const Lease& lease, int64_t now_ms);
// True when the lease names this process.
bool is_own_lease(const Lease& lease);

// True when `qr` is in a transient state that no live process is carrying.
bool needs_driver(const QueuedResource& qr, int64_t now_ms);

struct ReconcileResult {
  std::vector<QueuedResource> changed; // what this pass changed (after the commit)
  // ids in PROVISIONING/SUSPENDING/DELETING with no live lease, or a lease this process holds
  std::vector<std::string> needs_driver;
  std::vector<std::string> driver_pools; // pools with a request no live process carries
  std::vector<Error> errors;             // reconcile_all: pools that could not be reconciled
};

// Runs one scheduler pass on `pool` inside a transaction and commits it: record updates
// (compare-and-swap), host claims for requests that were placed, and a STATE_CHANGED event per
// transition. When the store refuses the pass as a whole for good (state::is_permanent_refusal:
// too large), it is recorded request by request, and a request whose own change is refused
// fails on its own (fail_unrecordable): one request never stops the pool. Records that cannot
// be read are left out (list_queued_resources). Errors: the store's (not_found for a missing
// pool).
Expected<ReconcileResult> reconcile_pool(state::StateStore& store, const std::string& pool,
                                         const state::Clock& clock,
                                         const SchedulerPolicy& policy = {});

// The FAILED code of a request whose change the state store refuses to record.
inline constexpr std::string_view k_state_store_refused = "STATE_STORE_REFUSED";

// Moves request `id` to FAILED (SERVICE) because the store refused to record its change
// (`refusal`: a placement or a provisioning result too large for one etcd transaction): error
// code k_state_store_refused naming the refusal and what to do, its nodes, report and lease
// dropped and its hosts released, in one commit. Returns the record afterwards (nullopt when it
// is gone). Errors: the store's, including the refusal again when even that cannot be recorded.
Expected<std::optional<QueuedResource>>
fail_unrecordable(state::StateStore& store, const std::string& pool, const std::string& id,
                  const state::Clock& clock, const Error& refusal);

// reconcile_pool() on every pool of the store; the results concatenated. A pool that cannot be
// reconciled (a conflict that outlasted the retries, a schema too new, a record that cannot be
// read) is reported in `errors` and the others go on. Errors: the store's when it cannot be
// read at all (k_unavailable).
Expected<ReconcileResult> reconcile_all(state::StateStore& store, const state::Clock& clock,
                                        const SchedulerPolicy& policy = {});

// The STATE_CHANGED events for the history entries `after` has beyond `before`.
std::vector<state::Op> transition_events(const QueuedResource& before, const QueuedResource& after);

} // namespace tpuctl::provision
