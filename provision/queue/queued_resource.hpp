// The queued-resource record: what `tpuctl queued-resources create` asked for, where it stands in
// the TPU state machine (cli-anchors.md section b), and, once placed, its nodes and their workers
// in TPU_WORKER_ID order. Stored as JSON under Key{queued_resource, pool, id}; to_json/from_json
// are the only places that know the field names (they are also `describe --format json`).
//
//   ACCEPTED -> WAITING_FOR_RESOURCES -> PROVISIONING -> ACTIVE
//   ACTIVE -> SUSPENDING -> SUSPENDED            (spot preemption, max-run-duration: SERVICE)
//   SUSPENDED -> WAITING_FOR_RESOURCES           (requeue: a preempted --on-preemption requeue
//                                                 request, or a slice repaired after a lost host:
//                                                 SERVICE; it keeps its place in the queue)
//   ACCEPTED..PROVISIONING -> FAILED             (valid-until expiry, preflight failure)
//   SUSPENDED, FAILED -> WAITING_FOR_RESOURCES   (reset, USER)
//   any -> DELETING -> (gone)                    (delete, USER)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "provision/pool/host_grid.hpp"
#include "remote/ssh_settings.hpp"
#include "state/store.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

enum class QrState {
  accepted,
  waiting_for_resources,
  provisioning,
  active,
  suspending,
  suspended,
  failed,
  deleting,
};
// "ACCEPTED", "WAITING_FOR_RESOURCES", ... as gcloud prints them.
std::string_view to_string(QrState state);
// Accepts the upper-case names, case-insensitively. nullopt when unknown.
std::optional<QrState> parse_qr_state(std::string_view text);
const std::vector<QrState>& all_qr_states();
// True while the slice holds hosts: PROVISIONING, ACTIVE, SUSPENDING (and DELETING until done).
bool holds_hosts(QrState state);

// The capacity tier. Queue order is reserved, then standard and flex-start, then spot and
// best-effort; only spot and best-effort slices are preempted.
enum class Tier { reserved, standard, flex_start, spot, best_effort };
std::string_view to_string(Tier tier); // "reserved", "standard", "flex-start", "spot", ...
std::optional<Tier> parse_tier(std::string_view text);
int tier_rank(Tier tier); // 0 first
bool preemptible(Tier tier);

// What a preempted request does: suspend (gcloud's behaviour: SUSPENDED until reset or deleted)
// or requeue (back to WAITING_FOR_RESOURCES once its processes are stopped, in its old place).
enum class OnPreemption { suspend, requeue };
std::string_view to_string(OnPreemption value); // "suspend", "requeue"
// Errors: usage naming `text` and the choices.
Expected<OnPreemption> parse_on_preemption(std::string_view text);

struct StateChange {
  QrState from = QrState::accepted; // == to for the first entry (creation)
  QrState to = QrState::accepted;
  int64_t time_ms = 0;
  state::Initiator initiator = state::Initiator::user;
  std::string reason; // why, for people: "preempted by 'qr-7' (reserved)"
};

// A FAILED request's structured error (google.rpc.Status-like).
struct QrError {
  std::string code;    // "PREFLIGHT_FAILED", "EXPIRED", "PROVISIONING_FAILED", "LEASE_LOST"
  std::string message; // lowercase, names the worker and the value
  int worker = -1;     // the failing worker, -1 when none
  std::string node;    // the failing worker's node, when any
  std::string host;    // the failing worker's host, when any
};

struct QrWorker {
  int worker = 0;         // TPU_WORKER_ID within the node
  std::string host;       // pool host name
  std::string address;    // what peers use (TPU_WORKER_HOSTNAMES)
  Dims position{0, 0, 0}; // in the pool's host grid
};

struct QrNode {
  std::string id;                // TPU_NAME
  std::vector<QrWorker> workers; // worker order
};

struct QueuedResource {
  std::string id;
  std::string pool;
  std::string uid; // 16 random hex digits, set at create: TPUCTL_QR_UID on every worker
  std::string accelerator_type;      // canonical, e.g. "v5litepod-16"
  std::vector<std::string> node_ids; // `--node-id` or PREFIX-0..N-1
  std::string runtime_version;
  Tier tier = Tier::standard;
  int64_t valid_until_ms = 0;      // 0: none; a waiting request fails (EXPIRED) after it
  int64_t valid_after_ms = 0;      // 0: none; not placed before it
  int64_t max_run_duration_ms = 0; // 0: none; an ACTIVE slice is suspended after it
  OnPreemption on_preemption = OnPreemption::suspend;
  // The suspension under way ends in WAITING_FOR_RESOURCES, not SUSPENDED (a preemption with
  // on_preemption requeue, or a repair after a lost host).
  bool requeue = false;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> metadata; // startup-script is provisioning's, the rest kept
  // --env-secret values for the startup script (provision/slice/secrets.hpp): stored with the
  // record for the drivers that provision it, never shown (outputs show the names).
  std::map<std::string, std::string> secrets;
  std::string request_id;
  // Who created it: StateStore::actor() of its create (the etcd user on an authenticating
  // store, else "USER@HOST"); "" for a request made before owners were recorded.
  std::string owner;
  // The project its chips are charged to (provision/pool/projects.hpp); "default" when none was
  // named, and for a request made before projects existed.
  std::string project = "default";
  // The SSH settings it was made with (provision/pool/request_ssh.hpp): its owner's drivers
  // provision it with them.
  remote::SshSettings ssh;

  QrState state = QrState::accepted;
  state::Initiator state_initiator = state::Initiator::user;
  int64_t created_at_ms = 0;
  int64_t state_since_ms = 0;
  int64_t active_since_ms = 0; // when it last became ACTIVE
  std::vector<StateChange> history;
  std::vector<QrNode> nodes;  // filled from PROVISIONING on, worker order within each node
  std::string pending_reason; // WAITING_FOR_RESOURCES: why, in terms of the grid
  std::optional<QrError> error;
  // Provisioning's working data: the lease {holder, pid, expires_ms}, timings, the agent's
  // sha256 and path, per-worker facts. Kept as JSON: provision/provisioning owns its shape.
  nlohmann::json provisioning = nlohmann::json::object();

  int64_t version = 0;         // store version (compare-and-swap)
  int64_t create_revision = 0; // queue order within a tier
};

// "qr-1": lowercase letters, digits and '-', starting with a letter, not ending with '-', at most
// 63 (gcloud's TPU names). Fails with usage naming `what` ("queued resource id", "node id").
Status validate_tpu_name(const std::string& name, std::string_view what);

// Moves `qr` to `to`, appending the change to its history. Does nothing when already there.
void transition(QueuedResource& qr, QrState to, state::Initiator initiator, int64_t now_ms,
                std::string reason = {});

// The node holding `node_id`, or nullptr.
const QrNode* find_node(const QueuedResource& qr, const std::string& node_id);
// Every host of every node, node by node in worker order.
std::vector<std::string> hosts_of(const QueuedResource& qr);

nlohmann::json to_json(const QueuedResource& qr);
// Error::reason of a record that is not a queued resource this tpuctl can read.
inline constexpr std::string_view k_malformed_record = "malformed_record";
// Errors: failure naming the bad field (a corrupt record), reason k_malformed_record.
Expected<QueuedResource> qr_from_json(const nlohmann::json& doc);
Expected<QueuedResource> qr_from_record(const state::Record& record);

// Every queued resource of `pool` (every pool when empty), by pool then id. A record that cannot
// be read is left out, so one corrupt record never stops every command on the pool: its error
// (naming it, and how to remove it) goes to `unreadable` when given, else to the log (a warning
// on stderr). Errors: the store's.
Expected<std::vector<QueuedResource>>
list_queued_resources(state::StateStore& store, const std::string& pool,
                      std::vector<Error>* unreadable = nullptr);
// The record. Errors: not_found naming the id and the pool (with the ids that exist, up to 5).
// check_owner_intent (provision/pool/ownership.hpp) for the queued resource `id`, its event
// added to `overrides`: nothing when it does not exist or cannot be read (a damaged record has no
// owner to check; the action's own handling follows).
// Errors: usage, the store's.
Status check_queued_resource_owner(state::StateStore& store, const std::string& pool,
                                   const std::string& id, const std::string& action,
                                   bool override_owner, std::vector<state::Event>& overrides);

Expected<QueuedResource> load_queued_resource(state::StateStore& store, const std::string& pool,
                                              const std::string& id);

// What a `tpuctl ssh` TARGET names: a queued resource (all its nodes) or one node. Errors:
// not_found naming the target, the pool, and the queued resources and nodes that exist.
struct TargetNodes {
  QueuedResource qr;
  std::vector<int> node_indices; // into qr.nodes; every node for a QR target
};
Expected<TargetNodes> resolve_target(state::StateStore& store, const std::string& pool,
                                     const std::string& target);

// What a `tpu-vm` NODE names: one node (or a one-node request, whose node has its id). Errors:
// resolve_target's; usage when `node` is a queued resource of several nodes (naming them).
Expected<TargetNodes> resolve_node(state::StateStore& store, const std::string& pool,
                                   const std::string& node);

} // namespace tpuctl::provision
