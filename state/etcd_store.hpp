// The etcd v3 StateStore: one pool shared by tpuctl processes on many machines, through etcd's
// HTTP/JSON gateway (libcurl + nlohmann/json, no gRPC). Keys: state/etcd_keys.hpp.
//
// Reads are linearizable ranges; a read of several ranges (snapshot) is one read-only txn, so it
// sees one revision. A record's version is its key's mod_revision, so versions are etcd
// revisions and every key one commit writes gets that commit's revision.
//
// commit(ops) is optimistic and never half-applied (etcd_commit.cpp):
//  1. read every key the ops depend on (the records they name, the pool, and the host pages and
//     claim pages of the hosts they name);
//  2. apply the ops in order to that view with the same rules and messages as SQLite, which
//     yields the keys to put and delete, or the op's error (conflict, hosts_busy, ...);
//  3. send one txn comparing the mod_revision of every key read in step 1 (absent keys compare
//     to 0) and writing everything, plus a commit marker;
//  4. if a compare failed, someone changed the view meanwhile: start again at 1 (bounded).
// Host records and claims live in 16 pages per pool and family (state/etcd_pages.hpp), so a
// claim of any number of hosts is one txn of at most 32 page compares and 32 page writes, and a
// host can never be claimed twice. Provisional claims (ClaimOp ttl > 0) lapse by the store's
// clock, as in SQLite, and are pruned when their page is next written. Heartbeats are put on
// etcd leases of their ttl, so they vanish on their own when the process that made them dies.
//
// Limits: one txn holds at most EtcdOptions::max_txn_ops compares and as many writes (etcd's
// --max-txn-ops, 128 by default) and max_request_bytes of keys and values (etcd's
// --max-request-bytes, 1.5 MiB). Host pages and claim pages count one op each whatever their
// size, so the op limit bounds only how many one-key records (queued resources, clusters,
// workloads) one commit changes; the byte limit bounds how many hosts one commit adds or
// changes (~9,000 typical host records). A commit above either is refused whole with reason
// k_invalid, naming its size and the limit, before anything is sent. Nothing is split across
// transactions.
//
// Unknown outcomes. A txn sent without a definite answer (timeout, lost connection, a member
// without quorum) may or may not apply. Every commit puts a marker key commit/<nonce>
// ("applied") and compares that it is absent; to resolve, the store writes "aborted" there if
// it is still absent (which makes the original txn fail should it arrive later) or reads what
// is there. Applied: the commit succeeded. Aborted: nothing was written, the commit is retried.
// If the store cannot be asked, the error (k_unavailable) says the outcome is unknown.
//
// Never falls back to another store: an unreachable etcd is an error naming every endpoint.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "state/etcd_client.hpp"
#include "state/etcd_keys.hpp"
#include "state/etcd_wire.hpp"
#include "state/store.hpp"

namespace tpuctl::state {

struct EtcdOptions {
  etcd::ClientOptions client;
  std::string prefix = "/tpuctl/v1/"; // ends in '/'
  std::string location;               // the URL, for info() and messages
  Clock clock = system_clock();
  size_t max_txn_ops = 128;
  size_t max_request_bytes = 1536 * 1024;
  std::chrono::seconds marker_ttl{600}; // how long commit markers live (an etcd lease)
  int max_commit_attempts = 20;         // re-reads after a lost compare inside one commit()
  // Create the store (its schema marker) when the prefix holds none; else opening fails with
  // reason k_no_store and writes nothing.
  bool create = true;
  // The cluster id this machine last used this store in and the highest revision it saw there
  // (state/etcd_seen.hpp), "" and 0 when never: an empty prefix where a store was used is a
  // store that was reset or deleted (reason k_store_replaced), not a new install.
  std::string last_seen_cluster_id;
  int64_t last_seen_revision = 0;
};

// The schema version this tpuctl writes into meta/schema.
// 2: host records and claims in pages (state/etcd_pages.hpp); a schema-1 store is upgraded in
// place when opened (state/etcd_upgrade.cpp).
inline constexpr int k_etcd_schema_version = 2;

class EtcdStore final : public StateStore {
public:
  // Reaches the store and reads (or, on an empty prefix, writes) meta/schema. A schema newer
  // than k_etcd_schema_version opens read-only. Errors: k_unavailable naming every endpoint,
  // ErrorKind::auth for credentials.
  static Expected<std::unique_ptr<EtcdStore>> open(EtcdOptions options);

  StoreInfo info() const override;
  Status ping() override;
  Expected<std::optional<Record>> find(const Key& key) override;
  Expected<Listing> list(Kind kind, const std::string& pool) override;
  Expected<PoolSnapshot> snapshot(const std::string& pool) override;
  Expected<std::vector<Claim>> claims(const std::string& pool) override;
  Expected<std::vector<Event>> events(const EventQuery& query) override;
  Expected<std::vector<Heartbeat>> live_heartbeats(const std::string& pool) override;
  Expected<int64_t> wait_for_change(const std::string& pool, int64_t after_revision,
                                    std::chrono::milliseconds timeout) override;
  Expected<CommitResult> commit(const std::vector<Op>& ops) override;
  Status put_heartbeat(const std::string& pool, const std::string& host, const Json& payload,
                       std::chrono::seconds ttl) override;
  // The optimistic loop, which here also re-runs fn when its commit failed hosts_busy,
  // not_owner, already_exists or not_found and the store changed after fn's first read: fn
  // decided on a stale view, as it never can inside SQLite's write lock.
  Expected<CommitResult> transact(const TransactFn& fn,
                                  const TransactOptions& options = {}) override;

  // Reads at the current revision until end_reads() (etcd keeps old revisions until compacted).
  Expected<int64_t> begin_reads() override;
  void end_reads() override;
  // The cluster's alarms (NOSPACE, CORRUPT), one line per member and alarm.
  Expected<std::vector<std::string>> check_integrity() override;

  // Elections on etcd leases: the leader's key lives on a lease of `ttl` that each campaign
  // keeps alive, so a leader that dies (SIGKILL included) loses it `ttl` later by itself.
  Expected<Leadership> campaign(const std::string& role, const Json& candidate,
                                std::chrono::seconds ttl) override;
  Expected<Json> leader(const std::string& role) override;
  // Counts the pool's commit batches, reads the oldest (by create revision) and
  // deletes those past the retention in transactions of 100 (event_retention.hpp); also right
  // after a commit at a revision compaction_due() picks, for the pools it appended to.
  Expected<size_t> compact_events(const std::string& pool,
                                  const EventRetention& retention) override;
  Status resign(const std::string& role) override;

  // The store's current revision. Errors: k_unavailable.
  Expected<int64_t> revision();
  // The id of the etcd cluster answering, and the highest revision it answered at
  // (etcd::Client).
  std::string cluster_id() const;
  int64_t seen_revision() const;
  const etcd::KeyLayout& keys() const { return m_keys; }

  // Records of `kind` in range values `kvs` (host pages expand to their hosts).
  Expected<std::vector<Record>> decode_records(Kind kind,
                                               const std::vector<etcd::KeyValue>& kvs) const;
  // The live claims in claim pages `kvs`, by pool then host.
  Expected<std::vector<Claim>> decode_claims(const std::vector<etcd::KeyValue>& kvs) const;

  // Internal to the backend (etcd_commit.cpp); public so the commit machinery can be a set of
  // free functions there.
  struct Internals;

private:
  explicit EtcdStore(EtcdOptions options);
  Status init_schema();
  // For an empty prefix: what became of the store this machine used there before ("is a new
  // cluster ...", "... its keys were deleted"); "" when it never used one there.
  std::string what_was_lost() const;
  // The upgrade from schema 1 (etcd_upgrade.cpp).
  Status upgrade_schema();
  Status upgrade_pool(const std::string& pool);
  Status swap_schema(const etcd::KeyValue& current, const Json& next);
  Status check_writable() const;
  int64_t now_ms() const { return to_unix_ms(m_options.clock()); }
  // POSTs a read-only txn of `ranges` and returns the RangeResponses (one per range) and the
  // revision they were read at.
  Expected<std::pair<std::vector<Json>, int64_t>> read_ranges(const std::vector<Json>& ranges);
  Expected<int64_t> grant_lease(int64_t ttl_seconds);
  // `range` read at the revision begin_reads() holds, if any.
  Json at_held_revision(Json range) const;
  Expected<Json> read_range(Json range);
  // Notes the revision a read inside transact's fn was made at.
  void saw(int64_t revision) {
    if (m_tracking && revision > 0 && (m_first_read == 0 || revision < m_first_read)) {
      m_first_read = revision;
    }
  }
  Expected<int64_t> marker_lease();

  friend struct Internals;
  EtcdOptions m_options;
  etcd::KeyLayout m_keys;
  std::unique_ptr<etcd::Client> m_client;
  int m_schema_version = 0;
  int64_t m_marker_lease = 0;
  std::map<std::string, int64_t> m_leader_leases; // role -> the lease this process leads on
  std::chrono::steady_clock::time_point m_marker_granted{};
  bool m_tracking = false;     // inside transact's fn
  int64_t m_first_read = 0;    // the oldest revision fn read at
  int64_t m_last_view = 0;     // the revision the last commit read its view at
  int64_t m_held_revision = 0; // begin_reads(): reads are made at it; 0: the latest
};

} // namespace tpuctl::state
