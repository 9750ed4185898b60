// The StateStore interface: where tpuctl keeps pools, hosts, host claims, queued resources,
// events and heartbeats, shared by every tpuctl process that points at the same store.
//
// Two backends implement it: SQLite (state/sqlite_store.hpp, the default, one machine) and etcd
// v3 (state/etcd_store.hpp, shared by many machines). Both give the same guarantees, which the
// conformance suite in tests/unit/state/ pins:
//
//  * Records are JSON objects addressed by a Key (kind, pool, id). Every record carries a version:
//    the store revision of the commit that last changed it (SQLite: a counter bumped once per
//    commit; etcd: mod_revision). Versions only ever grow; compare them for equality only.
//  * One write primitive, commit(ops): every op applies or none does. Updates and removals are
//    compare-and-swap on the version the caller read. A ClaimOp claims several hosts at once and
//    fails, claiming nothing, when any of them is claimed already; a host can never be claimed
//    twice (SQLite: the claims table's primary key; etcd: create_revision == 0 compares).
//  * Failures are Errors whose `reason` (the constants in state::reason) says what happened, so
//    callers can branch: a lost compare-and-swap is reason::k_conflict, busy hosts
//    reason::k_hosts_busy with every busy host and its owner named in the message, and so on.
//  * transact(fn) is the read-modify-write loop: fn reads through the store it is given and
//    returns ops; a conflict re-runs fn (bounded, jittered backoff). The SQLite backend runs fn
//    inside its write transaction, so it never conflicts there.
//
// A store object is used from one thread; concurrency is between tpuctl processes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "state/event_retention.hpp"
#include "util/expected.hpp"

namespace tpuctl::state {

using Json = nlohmann::json;

// Error::reason values set by every backend. Never shown to users on their own.
namespace reason {
inline constexpr std::string_view k_already_exists = "already_exists"; // create: key exists
inline constexpr std::string_view k_not_found = "not_found";           // key, pool or host absent
inline constexpr std::string_view k_conflict =
    "conflict"; // CAS lost: version differs from expected
inline constexpr std::string_view k_hosts_busy = "hosts_busy"; // claim/remove: a host is claimed
inline constexpr std::string_view k_not_owner = "not_owner";   // release: claim not held by owner
inline constexpr std::string_view k_invalid = "invalid";       // a malformed op or key (a bug)
inline constexpr std::string_view k_busy = "busy"; // SQLite: writer lock held past busy_timeout
inline constexpr std::string_view k_unavailable = "unavailable"; // cannot open/reach/read store
inline constexpr std::string_view k_schema_too_new = "schema_too_new"; // written by newer tpuctl
inline constexpr std::string_view k_network_filesystem = "network_filesystem"; // SQLite on NFS...
inline constexpr std::string_view k_unsupported = "unsupported"; // backend not built in
// The store cannot be written (file mode, read-only directory or filesystem): reads work.
inline constexpr std::string_view k_read_only = "read_only";
// No space is left where the store keeps its data: nothing of the refused change was recorded.
inline constexpr std::string_view k_disk_full = "disk_full";
// The store does not exist (kind not_found): only commands that create things create it.
inline constexpr std::string_view k_no_store = "no_store";
// The store vanished, was replaced, or was reset under this process or since it was last seen
// (an SQLite file deleted or swapped; an etcd cluster whose id changed).
inline constexpr std::string_view k_store_replaced = "store_replaced";
} // namespace reason

// `doc` as compact JSON text; invalid UTF-8 in strings is replaced, never thrown.
std::string to_text(const Json& doc);

// True when `error` carries reason `why`.
bool has_reason(const Error& error, std::string_view why);
// True when the store refused a commit for what it is, not for when it was made: it can never
// be recorded as it is (reason k_invalid: above the store's limits, or malformed). Retrying
// the same change is useless; a smaller one may pass.
bool is_permanent_refusal(const Error& error);

// What a record is. Stored by name (to_string), so adding a kind needs no schema change.
enum class Kind { pool, host, queued_resource, cluster, workload };

// "pool", "host", "queued_resource", "cluster", "workload".
std::string_view to_string(Kind kind);
// "pool", "host", "queued resource", ... (for messages).
std::string_view display_name(Kind kind);
// The kind named `name` (as to_string spells it); nullopt when unknown.
std::optional<Kind> parse_kind(std::string_view name);
const std::vector<Kind>& all_kinds();

// Where a record lives. A pool is Key{Kind::pool, name, ""}; everything else belongs to a pool and
// has an id unique among records of its kind in that pool. Names and ids are non-empty, at most
// 253 bytes, with no '/' and no control characters (they become etcd key segments).
struct Key {
  Kind kind = Kind::pool;
  std::string pool;
  std::string id;

  friend bool operator==(const Key&, const Key&) = default;
};
Key pool_key(std::string pool);
Key host_key(std::string pool, std::string host);
Key queued_resource_key(std::string pool, std::string id);
Key record_key(Kind kind, std::string pool, std::string id);
// "pool 'p'", "host 'h1' in pool 'p'", "queued resource 'q' in pool 'p'".
std::string describe(const Key& key);

// Expected-version wildcards for UpdateOp/RemoveOp/CheckOp.
inline constexpr int64_t k_absent = 0;       // CheckOp: the key must not exist
inline constexpr int64_t k_any_version = -1; // the key must exist; any version (last writer wins)

struct Record {
  Key key;
  Json doc = Json::object();
  int64_t version = 0;         // revision of the commit that last changed it
  int64_t create_revision = 0; // revision of the commit that created it (orders "oldest first")
  // Set when the stored value is not a JSON object (damaged by hand, or by a disk): why, naming
  // the record. doc is then empty. Such a record is still listed, found, and removable by its
  // version, so one damaged record never hides the others.
  std::string unreadable;
};

// One busy host. owner is a queued-resource id or "drain:<reason>".
struct Claim {
  std::string pool;
  std::string host;
  std::string owner;
  int64_t claimed_at_ms = 0; // unix time in milliseconds
  int64_t expires_at_ms = 0; // 0 = never; a provisional claim lapses at this time
  int64_t revision = 0;      // revision of the commit that made the claim
};

enum class Initiator { user, service };
std::string_view to_string(Initiator initiator); // "USER" / "SERVICE"
std::optional<Initiator> parse_initiator(std::string_view text);

// A recorded change: "queued resource q went PROVISIONING -> ACTIVE, initiated by SERVICE".
struct Event {
  int64_t revision = 0; // set by the store: the revision of the commit that appended it
  int64_t time_ms = 0;  // unix ms; the store fills it from its clock when 0
  std::string pool;
  Kind subject_kind = Kind::queued_resource;
  std::string subject; // the subject's id (or the pool name for pool events)
  std::string type;    // e.g. "STATE_CHANGED", "HOSTS_ADDED"
  std::string from_state;
  std::string to_state;
  Initiator initiator = Initiator::user;
  Json detail = Json::object();
  // Who made the change: StateStore::actor() of the store that committed it, unless set.
  std::string actor;
};

struct Heartbeat {
  std::string pool;
  std::string host;
  Json payload = Json::object();
  int64_t last_seen_ms = 0;
  int64_t ttl_ms = 0; // live while now - last_seen < ttl
};

// ---- the ops of commit() ----
struct CreateOp { // fails k_already_exists; a non-pool record needs its pool (k_not_found)
  Key key;
  Json doc;
};
struct UpdateOp { // fails k_not_found, k_conflict
  Key key;
  Json doc;
  int64_t expected_version = k_any_version;
};
// Fails k_not_found, k_conflict; a host, or a pool, with live claims fails k_hosts_busy (kind
// failure, naming the claims; release them earlier in the same commit). Removing a host removes
// its heartbeat; removing a pool removes everything under it: records, claims, heartbeats, events.
struct RemoveOp {
  Key key;
  int64_t expected_version = k_any_version;
};
struct CheckOp { // writes nothing; fails k_conflict (or k_not_found for k_any_version)
  Key key;
  int64_t expected_version = k_absent;
};
// Claims every host for owner or none: fails k_hosts_busy (kind capacity) naming every busy host
// and its owner, k_not_found naming every host that has no host record. A host claimed by the
// same owner is busy too. ttl > 0 makes the claim provisional: it lapses (frees the host) after
// ttl unless released and re-claimed (both in one commit) without a ttl.
struct ClaimOp {
  std::string pool;
  std::vector<std::string> hosts;
  std::string owner;
  std::chrono::seconds ttl{0};
  int64_t claimed_at_ms = 0; // 0: now by the store's clock (`state migrate` keeps the original)
};
// Releases claims that owner holds; fails k_not_owner naming each host that is free or held by
// another owner (nothing is released then).
struct ReleaseOp {
  std::string pool;
  std::vector<std::string> hosts;
  std::string owner;
};
struct EventOp {
  Event event;
};
using Op = std::variant<CreateOp, UpdateOp, RemoveOp, CheckOp, ClaimOp, ReleaseOp, EventOp>;

// Checks names, ids and shapes of `op` (the same rules for every backend). Returns a usage Error
// with reason k_invalid naming the bad value.
Status validate_op(const Op& op);

struct CommitResult {
  // The store revision after the commit; every record the commit created or updated now has
  // version == revision. A commit of CheckOps only returns the current revision.
  int64_t revision = 0;
};

struct Listing {
  std::vector<Record> records; // by pool, then id
  int64_t revision = 0;        // the snapshot they were read at (a watch would start after it)
};

// Everything under one pool at one revision.
struct PoolSnapshot {
  int64_t revision = 0;
  Record pool;
  std::vector<Record> records; // every non-pool record of the pool, by kind then id
  std::vector<Claim> claims;   // live claims, by host
};

struct EventQuery {
  std::string pool;                 // empty: every pool
  std::optional<Kind> subject_kind; // nullopt: any
  std::string subject;              // empty: any
  int64_t after_revision = 0;       // only events with revision > after_revision
  size_t limit = 0;                 // 0: no limit
};

struct StoreInfo {
  std::string backend;  // "sqlite" or "etcd"
  std::string location; // "sqlite:/home/u/.local/state/tpuctl/state.db"
  int schema_version = 0;
  int supported_schema = 0;
  bool writable = true;          // false when read-only storage or a newer schema
  std::string read_only_because; // why writable is false ("its mode is 0444", ...)
};

struct TransactOptions {
  int max_attempts = 10;
  std::chrono::milliseconds base_backoff{10};
  std::chrono::milliseconds max_backoff{500};
};

// Where time comes from; tests inject a fake one.
using Clock = std::function<std::chrono::system_clock::time_point()>;
Clock system_clock();
int64_t to_unix_ms(std::chrono::system_clock::time_point t);

class StateStore {
public:
  virtual ~StateStore() = default;

  // Who makes this store's changes: the etcd user when the store authenticates, else the
  // operating-system user and host ("alice@ci-runner-3", which the store cannot prove). Each
  // event a commit appends without an actor of its own gets this one.
  const std::string& actor() const { return m_actor; }
  bool actor_authenticated() const { return m_actor_authenticated; }
  virtual void set_actor(std::string actor, bool authenticated) {
    m_actor = std::move(actor);
    m_actor_authenticated = authenticated;
  }

  virtual StoreInfo info() const = 0;
  // Errors: k_unavailable (cannot reach or read the store), k_busy.
  virtual Status ping() = 0;

  // ---- reads (each one consistent with itself) ----
  // The record, or nullopt when absent. Errors: k_unavailable, k_busy.
  virtual Expected<std::optional<Record>> find(const Key& key) = 0;
  // Records of `kind` in `pool` (every pool when empty). Errors: k_unavailable, k_busy.
  virtual Expected<Listing> list(Kind kind, const std::string& pool) = 0;
  // The pool and everything in it. Errors: k_not_found (no such pool), k_unavailable, k_busy.
  virtual Expected<PoolSnapshot> snapshot(const std::string& pool) = 0;
  // Live claims in `pool` (every pool when empty), by pool then host.
  virtual Expected<std::vector<Claim>> claims(const std::string& pool) = 0;
  // Events matching `query`, oldest first (by revision, then by order within a commit).
  virtual Expected<std::vector<Event>> events(const EventQuery& query) = 0;
  // Heartbeats of `pool`'s hosts still live by the store's clock, by host (a heartbeat of a name
  // that is not a host of the pool, or of a host removed since, is not listed).
  virtual Expected<std::vector<Heartbeat>> live_heartbeats(const std::string& pool) = 0;

  // Blocks until a commit newer than `after_revision` may have changed `pool` (every pool when
  // empty), or until `timeout` passes. Returns the revision of that commit, or after_revision
  // when the timeout passed first. Heartbeats are not changes. A backend may wake for a commit
  // that did not touch `pool` (SQLite polls its one revision counter), so callers re-read and
  // wait again. Errors: k_unavailable.
  virtual Expected<int64_t> wait_for_change(const std::string& pool, int64_t after_revision,
                                            std::chrono::milliseconds timeout) = 0;

  // Makes every read until end_reads() see the store as it is now, however busy it is (SQLite:
  // one read transaction; etcd: reads at the current revision), for a consistent copy (state
  // backup). No write may be made in between (k_invalid). Returns the revision read at.
  // Errors: the store's; the default implementation says the backend cannot.
  virtual Expected<int64_t> begin_reads();
  virtual void end_reads() {}

  // What the backend's own integrity checks find, one line per problem (SQLite: integrity_check
  // and foreign_key_check; etcd: the cluster's alarms, NOSPACE or CORRUPT); empty when sound.
  // Errors: the store cannot be read at all.
  virtual Expected<std::vector<std::string>> check_integrity() {
    return std::vector<std::string>{};
  }

  // Removes the events of `pool` that `retention` no longer keeps (event_retention.hpp; each
  // backend also does it on its own as it appends). Returns how many records it removed (etcd:
  // commit batches). Errors: the store's.
  virtual Expected<size_t> compact_events(const std::string& pool,
                                          const EventRetention& retention) {
    (void)pool;
    (void)retention;
    return size_t{0};
  }

  // ---- leadership: one process of many leads a role (`tpuctl controller run`) ----
  // What campaign() found: whether this store's process leads `role`, and the leader's
  // document (the candidate it campaigned with; null when nobody leads).
  struct Leadership {
    bool ours = false;
    Json leader;
  };
  // Makes this process the leader of `role` when no live leader holds it, keeps the leadership
  // when it already is the leader (call again well within `ttl`: a leader that stops
  // campaigning, or dies, loses it `ttl` later), and otherwise names the leader. Errors:
  // k_unsupported when the backend has no elections (the default: SQLite, a file on one
  // machine), the store's.
  virtual Expected<Leadership> campaign(const std::string& role, const Json& candidate,
                                        std::chrono::seconds ttl);
  // The live leader of `role`, null when none. Errors: as campaign().
  virtual Expected<Json> leader(const std::string& role);
  // Gives up this process's leadership of `role` at once (none held is fine).
  virtual Status resign(const std::string& role);

  // ---- writes ----
  // Applies every op or none (see the op types for each failure's reason). Also fails with
  // k_schema_too_new, k_busy, k_unavailable, and k_invalid for malformed ops.
  virtual Expected<CommitResult> commit(const std::vector<Op>& ops) = 0;
  // Records that `host` in `pool` is alive for `ttl`. Errors: k_not_found (no such pool), and the
  // store errors of commit().
  virtual Status put_heartbeat(const std::string& pool, const std::string& host,
                               const Json& payload, std::chrono::seconds ttl) = 0;

  // Read-modify-write: calls fn(*this) to read and build ops, commits them, and on k_conflict
  // repeats both (up to options.max_attempts, jittered exponential backoff). fn's own errors are
  // returned as they are; after the last attempt the conflict error says how many were made.
  // fn may run more than once, so it must not have side effects outside the store. Keep fn fast:
  // the SQLite backend holds its write lock while fn runs.
  using TransactFn = std::function<Expected<std::vector<Op>>(StateStore&)>;
  virtual Expected<CommitResult> transact(const TransactFn& fn,
                                          const TransactOptions& options = {});

  // ---- conveniences over the primitives ----
  // The record. Errors: k_not_found naming the key, and find()'s errors.
  Expected<Record> get(const Key& key);
  // One-op commits; errors as commit() and the op's own (CreateOp, UpdateOp, ...).
  Expected<CommitResult> create(const Key& key, Json doc);
  Expected<CommitResult> update(const Key& key, Json doc, int64_t expected_version);
  Expected<CommitResult> remove(const Key& key, int64_t expected_version);
  Expected<CommitResult> claim_hosts(const std::string& pool, std::vector<std::string> hosts,
                                     const std::string& owner);
  Expected<CommitResult> release_hosts(const std::string& pool, std::vector<std::string> hosts,
                                       const std::string& owner);
  // Releases every claim `owner` holds in `pool` (none is fine). Errors: those of transact().
  Expected<CommitResult> release_all(const std::string& pool, const std::string& owner);
  // Live claims held by `owner` in `pool`, by host. Errors: those of claims().
  Expected<std::vector<Claim>> claims_of(const std::string& pool, const std::string& owner);

private:
  std::string m_actor;
  bool m_actor_authenticated = false;
};

// This process's operating-system identity: "USER@HOST" (the login name of the effective uid,
// the host name); "uid-N@HOST" when the uid has no name.
std::string local_actor();

// For backends: whether an op expecting `expected` (a version, k_absent or k_any_version) may
// apply to `key` whose current version is `current` (nullopt: absent). The same rules and words
// for every backend: k_conflict (exists but expected absent; another version), k_not_found.
Status check_expected_version(const Key& key, std::optional<int64_t> current, int64_t expected);

// For backends: the refusal of a ClaimOp, the same words for every backend: not_found naming the
// `missing` hosts (already quoted), else capacity (k_hosts_busy) listing `busy` ("'h' is claimed
// by 'o'"); ok when both are empty.
Status check_claimable(const ClaimOp& op, const std::vector<std::string>& missing,
                       const std::vector<std::string>& busy);

// For backends: the refusal to open the store at `location` ("sqlite:/x.db", "etcd://h:p/pfx/")
// because it does not exist (`detail`, e.g. " (the prefix holds no tpuctl state)", may be empty)
// and the command does not create stores: kind not_found, reason k_no_store, saying how to make
// one.
Error missing_store(const std::string& location, const std::string& detail);

// For backends: the error transact() returns when its last attempt lost a compare-and-swap.
Error gave_up_after(Error conflict, int attempts);

// The optimistic loop behind StateStore::transact (exposed so tests and backends can reuse it).
Expected<CommitResult> optimistic_transact(StateStore& store, const StateStore::TransactFn& fn,
                                           const TransactOptions& options);

} // namespace tpuctl::state
