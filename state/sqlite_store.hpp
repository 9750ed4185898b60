// The SQLite StateStore: one local file shared by every tpuctl process on this machine.
//
// Settings: WAL journal (readers never block the writer), synchronous=FULL (an acknowledged
// claim survives a power cut; a CLI commits rarely, so the fsync per commit costs nothing that
// matters), foreign_keys=ON, busy_timeout (10 s by default). Every transaction that may write
// starts with BEGIN IMMEDIATE, taking the writer lock before reading, so a read-then-write can
// never fail half-way with SQLITE_BUSY_SNAPSHOT; a lock held by another process past the busy
// timeout is reason k_busy, never a raw "database is locked".
//
// The schema is versioned by PRAGMA user_version and migrated inside BEGIN IMMEDIATE, so
// concurrent first runs migrate exactly once. A database written by a newer tpuctl (user_version
// above k_schema_version) opens read-only: reads work, every write fails k_schema_too_new.
// So does a database on storage the user made read-only (its mode, its directory's, a
// read-only filesystem): opened read-only (immutable when SQLite could not even keep its wal
// index there), its mode left alone, every write fails k_read_only saying why. Every
// transaction first checks that the path still names the file opened (check_identity).
// See sqlite_schema.cpp for the tables; claims(pool, host) is the primary key that makes
// double allocation impossible even if the code above it had a bug.
#pragma once

#include <memory>
#include <string>
#include <sys/types.h>

#include "state/sqlite_db.hpp"
#include "state/store.hpp"

namespace tpuctl::state {

struct SqliteOptions {
  std::string path; // the database file; its directory must exist
  Clock clock = system_clock();
  std::chrono::milliseconds busy_timeout{10000};
  // Create the file when it does not exist; else opening fails (kind not_found, reason
  // k_no_store) and creates nothing.
  bool create = true;
  // Open read-only whatever the file's mode (a backup being restored): writes fail k_read_only.
  bool read_only = false;
};

// The schema version this tpuctl writes (PRAGMA user_version).
inline constexpr int k_schema_version = 2;
// PRAGMA application_id of tpuctl state databases ("tpuc").
inline constexpr int k_application_id = 0x74707563;

class SqliteStore final : public StateStore {
public:
  // Opens (creating tables when the file is empty) the database at options.path. The file is
  // created 0600 when absent. It does not check the filesystem: open_store() does.
  // Errors: k_unavailable (cannot open, not a tpuctl database, corrupt), k_busy.
  static Expected<std::unique_ptr<SqliteStore>> open(const SqliteOptions& options);

  StoreInfo info() const override;
  Status ping() override;
  Expected<std::optional<Record>> find(const Key& key) override;
  Expected<Listing> list(Kind kind, const std::string& pool) override;
  Expected<PoolSnapshot> snapshot(const std::string& pool) override;
  Expected<std::vector<Claim>> claims(const std::string& pool) override;
  Expected<std::vector<Event>> events(const EventQuery& query) override;
  // One indexed DELETE (event_retention.hpp); also inside a committing transaction that appends
  // events at a revision compaction_due() picks.
  Expected<size_t> compact_events(const std::string& pool,
                                  const EventRetention& retention) override;
  Expected<std::vector<Heartbeat>> live_heartbeats(const std::string& pool) override;
  Expected<CommitResult> commit(const std::vector<Op>& ops) override;
  Status put_heartbeat(const std::string& pool, const std::string& host, const Json& payload,
                       std::chrono::seconds ttl) override;
  // Looks every 50 ms (any pool's commit wakes it): a stat() of the write-ahead log, and a read
  // of the revision counter when the log moved (or a second passed), so a waiting workload
  // starts within a few tens of ms of a slice freeing and dozens of waiters cost little.
  Expected<int64_t> wait_for_change(const std::string& pool, int64_t after_revision,
                                    std::chrono::milliseconds timeout) override;
  // One read transaction (a WAL snapshot) until end_reads(): every read joins it.
  Expected<int64_t> begin_reads() override;
  void end_reads() override;
  // PRAGMA integrity_check and foreign_key_check, and the revision counter's presence.
  Expected<std::vector<std::string>> check_integrity() override;
  // Folds the write-ahead log into the file and leaves WAL mode (journal_mode DELETE): the file
  // is then the whole database, and a read-only open leaves no -wal or -shm beside it (state
  // backup's copy; the next read-write open switches back to WAL). Errors: unavailable.
  Status leave_wal();
  // Runs fn inside BEGIN IMMEDIATE, so its reads are current and its ops cannot conflict.
  Expected<CommitResult> transact(const TransactFn& fn,
                                  const TransactOptions& options = {}) override;

  const std::string& path() const { return m_db.path(); }

private:
  SqliteStore(sqlite::Db db, SqliteOptions options) : m_db(std::move(db)), m_options(options) {}

  Status configure_and_migrate();
  Status migrate_locked(int64_t from_version);
  Status check_writable() const;
  // Fails (reason k_store_replaced) when the path no longer names the file opened: deleted,
  // moved away or replaced. Checked as every transaction begins.
  Status check_identity() const;
  int64_t now_ms() const { return to_unix_ms(m_options.clock()); }

  // A write (BEGIN IMMEDIATE) or read (BEGIN) transaction, rolled back unless committed. Inside
  // an open transaction it joins it, so the reads a transact fn makes share its transaction.
  class Txn;

  Expected<int64_t> current_revision();
  Expected<std::optional<Record>> find_locked(const Key& key);
  Expected<std::vector<Claim>> claims_locked(const std::string& pool, const std::string& owner);
  Expected<CommitResult> apply_ops(const std::vector<Op>& ops);

  // One op each; `rev` is the revision the commit writes.
  Status apply(const CreateOp& op, int64_t rev);
  Status apply(const UpdateOp& op, int64_t rev);
  Status apply(const RemoveOp& op, int64_t rev);
  Status apply(const CheckOp& op, int64_t rev);
  Status apply(const ClaimOp& op, int64_t rev);
  Status apply(const ReleaseOp& op, int64_t rev);
  Status apply(const EventOp& op, int64_t rev);
  Expected<bool> pool_exists(const std::string& pool);
  Expected<std::optional<int64_t>> version_of(const Key& key);
  Status remove_pool_contents(const std::string& pool);

  sqlite::Db m_db;
  SqliteOptions m_options;
  int m_schema_version = 0;
  bool m_in_txn = false;
  bool m_reads_held = false;       // inside begin_reads(): writes are refused
  std::string m_read_only_because; // why the file must not be written ("" when it may be)
  dev_t m_device = 0;              // the file opened (see check_identity)
  ino_t m_inode = 0;
};

} // namespace tpuctl::state
