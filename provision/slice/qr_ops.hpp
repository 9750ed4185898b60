// What users do to queued resources: create, delete, reset. Each is one store transaction that
// validates everything first, so bad input changes nothing; the IO that follows (provisioning,
// killing a slice's processes) is the driver's (provision/slice/driver.hpp).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "provision/queue/placement.hpp"
#include "provision/queue/queued_resource.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

struct CreateRequest {
  std::string id;
  std::string pool;
  std::string accelerator_type; // either this
  std::string type;             // or --type GEN ...
  std::string topology;         // ... with --topology AxB[xC]
  std::string node_id;          // either one node with this id
  int node_count = 0;           // or N nodes PREFIX-0..N-1 (0: not given)
  std::string node_prefix;      // default: the request id
  std::string runtime_version;
  Tier tier = Tier::standard;
  int64_t valid_until_ms = 0;
  int64_t valid_after_ms = 0;
  int64_t max_run_duration_ms = 0;
  OnPreemption on_preemption = OnPreemption::suspend; // gcloud's behaviour unless asked
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> metadata;
  std::string request_id;
  std::string project = "default";            // charged to it (provision/pool/projects.hpp)
  std::map<std::string, std::string> secrets; // --env-secret, for the startup script
  remote::SshSettings ssh; // recorded: its owner's drivers use them (pool/request_ssh.hpp)
  // Committed in the same transaction as the request (a cluster record that owns it): all or
  // nothing. Their failures fail the create.
  std::vector<state::Op> also_commit;
};

struct CreateOutcome {
  QueuedResource qr;
  bool existed = false; // --request-id matched an earlier create: nothing new was stored
  // --dry-run: the hosts that would become workers now (empty when they do not fit now; then
  // `why` says what is in the way).
  std::optional<std::vector<Placement>> dry_run_placement;
  std::string why;
};

// The sizes a request may have, checked before anything is stored (as Google Cloud limits them:
// 64 labels, k_max_labels of pools.hpp; metadata, the startup script included, 512 KiB in all).
constexpr size_t k_max_metadata_entries = 128;
constexpr size_t k_max_metadata_bytes = 512 * 1024;

// Usage error naming each limit of k_max_* that `req` passes, and the limit.
Status check_request_limits(const CreateRequest& req);

// Checks the request (every problem reported: usage; a valid-until time already passed, sizes
// over the limits), the pool (not_found), that the pool could
// ever hold it (capacity, with explain_no_fit's message; nothing stored), then stores it
// ACCEPTED with a fresh uid and a CREATED event. With `dry_run`, stores nothing and fills
// dry_run_placement. A repeated --request-id returns the request it created (existed = true)
// when it asks for the same (type, nodes, tier, runtime version, labels, metadata, max run
// duration; usage error naming what differs otherwise); the same id without it fails (already
// exists).
Expected<CreateOutcome> create_queued_resource(state::StateStore& store, const CreateRequest& req,
                                               const state::Clock& clock, bool dry_run);

// Starts deleting: DELETING (USER), taking the lease for this process when `take_lease`, else
// clearing it so any driver may finish (a provisioning run in flight gives up either way). Without
// `force` only when the request holds no hosts (ACCEPTED, WAITING_FOR_RESOURCES, FAILED,
// SUSPENDED): then the record is removed at once and nullopt returned. With hosts (and `force`) the
// DELETING record is returned; the driver finishes it. Errors: not_found; failure naming the state
// without
// --force.
Expected<std::optional<QueuedResource>> begin_delete(state::StateStore& store,
                                                     const std::string& pool, const std::string& id,
                                                     bool force, const state::Clock& clock,
                                                     bool take_lease = true);

// Before tpuctl starts anything on the workers of `qr` (an ssh command, a workload): removes the
// k_nothing_launched mark (provisioning.hpp), so that deleting or suspending the request stops
// what it starts. Reads and writes nothing when `qr` (as the caller loaded it) has no mark.
// Errors: the store's; failure when the request is no longer ACTIVE (naming its state).
Status note_launch(state::StateStore& store, const std::string& pool, const QueuedResource& qr);

// SUSPENDED or FAILED -> WAITING_FOR_RESOURCES (USER): the request is queued again from the
// back of its tier. Errors: not_found; failure naming any other state; usage when its
// valid-until time has passed (it would expire at once).
Expected<QueuedResource> reset_queued_resource(state::StateStore& store, const std::string& pool,
                                               const std::string& id, const state::Clock& clock);

// Deletes one node of a request (`tpu-vm delete`): the last node deletes the request; otherwise
// the node's hosts are released and it leaves the request. Returns the request as it is now
// (nullopt when it went away or is being deleted) and the node as it was (for killing its
// processes). Errors: not_found naming the node.
struct NodeDeletion {
  QueuedResource before;
  std::optional<QueuedResource> after;
  QrNode node;
  bool whole_request = false; // the last node: begin_delete(force) ran instead
};
Expected<NodeDeletion> delete_node(state::StateStore& store, const std::string& pool,
                                   const std::string& node_id, const state::Clock& clock);

} // namespace tpuctl::provision
