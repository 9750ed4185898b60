// SqliteStore: transactions, reads, commit(), transact() and heartbeats. Opening and the schema
// live in sqlite_schema.cpp, the ops of a commit in sqlite_ops.cpp.
//
// Reads run in a plain BEGIN (a WAL snapshot: several SELECTs see one state and never block a
// writer); writes in BEGIN IMMEDIATE. A read made inside transact()'s fn joins its write
// transaction, which is what makes SQLite's transact() conflict-free.
#include "state/sqlite_store.hpp"

#include <sys/stat.h>
#include <thread>

#include <sqlite3.h>

#include "util/strings.hpp"

namespace tpuctl::state {

namespace {

Expected<Json> parse_doc(const std::string& text, const std::string& what) {
  Json doc = Json::parse(text, nullptr, false);
  if (doc.is_discarded()) {
    return Error(ErrorKind::failure, what + " holds invalid JSON in the state store",
                 reason::k_unavailable);
  }
  return doc;
}

constexpr const char* k_record_columns = "kind, pool, id, doc, version, create_revision";

Expected<Record> read_record(const sqlite::Stmt& s) {
  Record r;
  auto kind = parse_kind(s.text(0));
  if (!kind) {
    return Error(ErrorKind::failure,
                 "the state store holds a record of unknown kind '" + s.text(0) +
                     "' (written by a newer tpuctl?)",
                 reason::k_unavailable);
  }
  r.key = Key{*kind, s.text(1), s.text(2)};
  Json doc = Json::parse(s.text(3), nullptr, false);
  if (doc.is_object()) {
    r.doc = std::move(doc);
  } else {
    r.unreadable = describe(r.key) + " cannot be read (its stored value is not a JSON object)";
  }
  r.version = s.int64(4);
  r.create_revision = s.int64(5);
  return r;
}

Claim read_claim(const sqlite::Stmt& s) {
  return Claim{s.text(0), s.text(1), s.text(2), s.int64(3), s.int64(4), s.int64(5)};
}

} // namespace

// ---- transactions ----

class SqliteStore::Txn {
public:
  explicit Txn(SqliteStore& store) : m_store(store) {}
  ~Txn() {
    if (m_owned) {
      (void)m_store.m_db.exec("ROLLBACK", "roll back");
      m_store.m_in_txn = false;
    }
  }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;

  Status begin(bool write) {
    if (m_store.m_in_txn) {
      return ok(); // join the open transaction
    }
    TPUCTL_TRY(m_store.check_identity());
    TPUCTL_TRY(m_store.m_db.exec(write ? "BEGIN IMMEDIATE" : "BEGIN", write ? "write" : "read"));
    m_owned = true;
    m_store.m_in_txn = true;
    return ok();
  }
  Status commit() {
    if (!m_owned) {
      return ok();
    }
    auto st = m_store.m_db.exec("COMMIT", "write");
    if (st) {
      m_owned = false;
      m_store.m_in_txn = false;
    }
    return st;
  }

private:
  SqliteStore& m_store;
  bool m_owned = false;
};

Expected<int64_t> SqliteStore::current_revision() {
  return m_db.query_int("SELECT value FROM meta WHERE key = 'revision'", "read");
}

// ---- reads ----

Expected<int64_t> SqliteStore::begin_reads() {
  if (m_in_txn) {
    return Error(ErrorKind::failure, "begin_reads() inside a transaction",
                 std::string(reason::k_invalid));
  }
  TPUCTL_TRY(check_identity());
  TPUCTL_TRY(m_db.exec("BEGIN", "read"));
  auto revision = current_revision(); // the snapshot starts with the first read
  if (!revision) {
    (void)m_db.exec("ROLLBACK", "read");
    return revision;
  }
  m_in_txn = true;
  m_reads_held = true;
  return revision;
}

void SqliteStore::end_reads() {
  if (m_reads_held) {
    (void)m_db.exec("COMMIT", "read");
    m_in_txn = false;
    m_reads_held = false;
  }
}

Status SqliteStore::ping() {
  Txn t(*this);
  TPUCTL_TRY(t.begin(false));
  TPUCTL_TRY(current_revision());
  return t.commit();
}

Expected<std::optional<Record>> SqliteStore::find_locked(const Key& key) {
  TPUCTL_TRY_ASSIGN(auto s, m_db.prepare(std::string("SELECT ") + k_record_columns +
                                         " FROM records WHERE kind = ? AND pool = ? AND id = ?"));
  s->bind(1, to_string(key.kind)).bind(2, key.pool).bind(3, key.id);
  int rc = s->step();
  if (rc == SQLITE_DONE) {
    return std::optional<Record>{};
  }
  if (rc != SQLITE_ROW) {
    return m_db.error(rc, "read");
  }
  TPUCTL_TRY_ASSIGN(auto r, read_record(*s));
  return std::optional<Record>(std::move(r));
}

Expected<std::optional<Record>> SqliteStore::find(const Key& key) {
  Txn t(*this);
  TPUCTL_TRY(t.begin(false));
  TPUCTL_TRY_ASSIGN(auto r, find_locked(key));
  TPUCTL_TRY(t.commit());
  return r;
}

Expected<Listing> SqliteStore::list(Kind kind, const std::string& pool) {
  Txn t(*this);
  TPUCTL_TRY(t.begin(false));
  Listing out;
  TPUCTL_TRY_ASSIGN(out.revision, current_revision());
  TPUCTL_TRY_ASSIGN(auto s, m_db.prepare(std::string("SELECT ") + k_record_columns +
                                         " FROM records WHERE kind = ?1 AND (?2 = '' OR pool = "
                                         "?2) ORDER BY pool, id"));
  s->bind(1, to_string(kind)).bind(2, pool);
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    TPUCTL_TRY_ASSIGN(auto r, read_record(*s));
    out.records.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) {
    return m_db.error(rc, "read");
  }
  TPUCTL_TRY(t.commit());
  return out;
}

Expected<std::vector<Claim>> SqliteStore::claims_locked(const std::string& pool,
                                                        const std::string& owner) {
  TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("SELECT pool, host, owner, claimed_at, expires_at, "
                                         "revision FROM claims WHERE (?1 = '' OR pool = ?1) AND "
                                         "(?2 = '' OR owner = ?2) AND (expires_at = 0 OR "
                                         "expires_at > ?3) ORDER BY pool, host"));
  s->bind(1, pool).bind(2, owner).bind(3, now_ms());
  std::vector<Claim> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    out.push_back(read_claim(*s));
  }
  if (rc != SQLITE_DONE) {
    return m_db.error(rc, "read");
  }
  return out;
}

Expected<std::vector<Claim>> SqliteStore::claims(const std::string& pool) {
  Txn t(*this);
  TPUCTL_TRY(t.begin(false));
  TPUCTL_TRY_ASSIGN(auto out, claims_locked(pool, ""));
  TPUCTL_TRY(t.commit());
  return out;
}

Expected<PoolSnapshot> SqliteStore::snapshot(const std::string& pool) {
  Txn t(*this);
  TPUCTL_TRY(t.begin(false));
  PoolSnapshot snap;
  TPUCTL_TRY_ASSIGN(snap.revision, current_revision());
  TPUCTL_TRY_ASSIGN(auto p, find_locked(pool_key(pool)));
  if (!p) {
    return Error(ErrorKind::not_found, "pool '" + pool + "' does not exist", reason::k_not_found);
  }
  snap.pool = std::move(*p);
  {
    TPUCTL_TRY_ASSIGN(auto s, m_db.prepare(std::string("SELECT ") + k_record_columns +
                                           " FROM records WHERE pool = ? AND kind != 'pool' "
                                           "ORDER BY kind, id"));
    s->bind(1, pool);
    int rc;
    while ((rc = s->step()) == SQLITE_ROW) {
      TPUCTL_TRY_ASSIGN(auto r, read_record(*s));
      snap.records.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) {
      return m_db.error(rc, "read");
    }
  }
  TPUCTL_TRY_ASSIGN(snap.claims, claims_locked(pool, ""));
  TPUCTL_TRY(t.commit());
  return snap;
}

Expected<std::vector<Event>> SqliteStore::events(const EventQuery& q) {
  Txn t(*this);
  TPUCTL_TRY(t.begin(false));
  TPUCTL_TRY_ASSIGN(
      auto s, m_db.prepare("SELECT revision, time, pool, subject_kind, subject, type, "
                           "from_state, to_state, initiator, detail, actor FROM events WHERE (?1 = "
                           "'' OR pool = ?1) AND (?2 = '' OR subject_kind = ?2) AND (?3 = '' "
                           "OR subject = ?3) AND revision > ?4 ORDER BY seq LIMIT ?5"));
  s->bind(1, q.pool)
      .bind(2, q.subject_kind ? to_string(*q.subject_kind) : std::string_view())
      .bind(3, q.subject)
      .bind(4, q.after_revision)
      .bind(5, q.limit == 0 ? int64_t{-1} : static_cast<int64_t>(q.limit));
  std::vector<Event> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    Event e;
    e.revision = s->int64(0);
    e.time_ms = s->int64(1);
    e.pool = s->text(2);
    e.subject_kind = parse_kind(s->text(3)).value_or(Kind::pool);
    e.subject = s->text(4);
    e.type = s->text(5);
    e.from_state = s->text(6);
    e.to_state = s->text(7);
    e.initiator = parse_initiator(s->text(8)).value_or(Initiator::user);
    TPUCTL_TRY_ASSIGN(e.detail, parse_doc(s->text(9), "an event on '" + e.subject + "'"));
    e.actor = s->text(10);
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) {
    return m_db.error(rc, "read");
  }
  TPUCTL_TRY(t.commit());
  return out;
}

Expected<std::vector<Heartbeat>> SqliteStore::live_heartbeats(const std::string& pool) {
  Txn t(*this);
  TPUCTL_TRY(t.begin(false));
  // Hosts of the pool only, as the etcd backend (whose heartbeats outlive a removed host until
  // their lease ends) answers.
  TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("SELECT h.host, h.payload, h.last_seen, h.ttl FROM "
                                         "heartbeats h JOIN records r ON r.kind = 'host' AND "
                                         "r.pool = h.pool AND r.id = h.host WHERE h.pool = ? "
                                         "AND h.last_seen + h.ttl > ? ORDER BY h.host"));
  s->bind(1, pool).bind(2, now_ms());
  std::vector<Heartbeat> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    Heartbeat h;
    h.pool = pool;
    h.host = s->text(0);
    TPUCTL_TRY_ASSIGN(h.payload, parse_doc(s->text(1), "the heartbeat of '" + h.host + "'"));
    h.last_seen_ms = s->int64(2);
    h.ttl_ms = s->int64(3);
    out.push_back(std::move(h));
  }
  if (rc != SQLITE_DONE) {
    return m_db.error(rc, "read");
  }
  TPUCTL_TRY(t.commit());
  return out;
}

Expected<int64_t> SqliteStore::wait_for_change(const std::string&, int64_t after_revision,
                                               std::chrono::milliseconds timeout) {
  using SteadyClock = std::chrono::steady_clock;
  const auto deadline = SteadyClock::now() + timeout;
  // Every commit appends to the write-ahead log, so the log's mtime and size are a change
  // detector that costs one stat(): the revision is read when they moved, and at least once a
  // second (a log checkpointed and rewritten to the same size within one mtime tick).
  const std::string wal = m_options.path + "-wal";
  auto stamp = [&wal]() -> std::pair<int64_t, int64_t> {
    struct stat st {};
    if (::stat(wal.c_str(), &st) != 0) {
      return {-1, -1};
    }
    return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
            static_cast<int64_t>(st.st_size)};
  };
  auto seen = stamp();
  auto read_at = SteadyClock::now();
  for (bool read = true;; read = false) {
    if (!read) {
      const auto now_stamp = stamp();
      // (No log to look at, e.g. a store not in WAL mode: read every time, as before.)
      read = now_stamp != seen || now_stamp.first < 0 ||
             SteadyClock::now() - read_at >= std::chrono::seconds(1);
      seen = now_stamp;
    }
    if (read) {
      int64_t rev = 0;
      {
        Txn t(*this);
        TPUCTL_TRY(t.begin(false));
        TPUCTL_TRY_ASSIGN(rev, current_revision());
        TPUCTL_TRY(t.commit());
      }
      read_at = SteadyClock::now();
      if (rev > after_revision) {
        return rev;
      }
    }
    auto left = deadline - SteadyClock::now();
    if (left <= SteadyClock::duration::zero()) {
      return after_revision;
    }
    std::this_thread::sleep_for(
        std::min<SteadyClock::duration>(left, std::chrono::milliseconds(50)));
  }
}

// ---- writes ----

Status SqliteStore::put_heartbeat(const std::string& pool, const std::string& host,
                                  const Json& payload, std::chrono::seconds ttl) {
  TPUCTL_TRY(validate_op(CheckOp{host_key(pool, host), k_absent})); // the key rules
  if (ttl.count() <= 0 || !payload.is_object()) {
    return Error(ErrorKind::usage,
                 "heartbeat of host '" + host + "' needs a positive ttl and a JSON object payload",
                 reason::k_invalid);
  }
  TPUCTL_TRY(check_writable());
  Txn t(*this);
  TPUCTL_TRY(t.begin(true));
  TPUCTL_TRY_ASSIGN(bool exists, pool_exists(pool));
  if (!exists) {
    return Error(ErrorKind::not_found,
                 "cannot record a heartbeat of host '" + host + "': pool '" + pool +
                     "' does not exist",
                 reason::k_not_found);
  }
  {
    TPUCTL_TRY_ASSIGN(auto s,
                      m_db.prepare("INSERT INTO heartbeats(pool, host, payload, last_seen, ttl) "
                                   "VALUES (?, ?, ?, ?, ?) ON CONFLICT(pool, host) DO UPDATE SET "
                                   "payload = excluded.payload, last_seen = excluded.last_seen, "
                                   "ttl = excluded.ttl"));
    s->bind(1, pool).bind(2, host).bind(3, to_text(payload)).bind(4, now_ms());
    s->bind(5, static_cast<int64_t>(ttl.count()) * 1000);
    int rc = s->step();
    if (rc != SQLITE_DONE) {
      return m_db.error(rc, "write");
    }
  }
  return t.commit();
}

Expected<CommitResult> SqliteStore::commit(const std::vector<Op>& ops) {
  for (const auto& op : ops) {
    TPUCTL_TRY(validate_op(op));
  }
  TPUCTL_TRY(check_writable());
  Txn t(*this);
  TPUCTL_TRY(t.begin(true));
  TPUCTL_TRY_ASSIGN(auto result, apply_ops(ops));
  TPUCTL_TRY(t.commit());
  return result;
}

Expected<CommitResult> SqliteStore::transact(const TransactFn& fn, const TransactOptions& options) {
  TPUCTL_TRY(check_writable());
  if (m_in_txn) { // nested: part of the caller's transaction
    TPUCTL_TRY_ASSIGN(auto ops, fn(*this));
    return commit(ops);
  }
  for (int attempt = 1;; ++attempt) {
    Txn t(*this);
    TPUCTL_TRY(t.begin(true));
    TPUCTL_TRY_ASSIGN(auto ops, fn(*this));
    for (const auto& op : ops) {
      TPUCTL_TRY(validate_op(op));
    }
    auto result = apply_ops(ops);
    if (!result) {
      // Under the writer lock a conflict means fn used a version read before it ran; retrying
      // runs fn again with fresh reads.
      if (!has_reason(result.error(), reason::k_conflict)) {
        return result;
      }
      if (attempt >= options.max_attempts) {
        return gave_up_after(std::move(result).error(), attempt);
      }
      continue;
    }
    TPUCTL_TRY(t.commit());
    return result;
  }
}

} // namespace tpuctl::state
