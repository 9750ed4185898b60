// SqliteStore's commit machinery: apply_ops() and one apply() per op kind.
//
// A commit holds the writer lock (BEGIN IMMEDIATE, taken by the caller), reads the revision
// counter, applies its ops in order inside a SAVEPOINT (so a failing op undoes the earlier ones
// even when the commit runs inside a transact()), stamps every row it writes with revision + 1
// and bumps the counter. Each op checks its preconditions with SELECTs under the lock and reports
// every offending host at once; the primary and foreign keys of the claims table are the
// backstop should a check ever be wrong.
#include <set>

#include <sqlite3.h>

#include "state/sqlite_store.hpp"
#include "util/strings.hpp"

namespace tpuctl::state {

namespace {

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

bool live(int64_t expires_at, int64_t now) {
  return expires_at == 0 || expires_at > now;
}

} // namespace

Expected<CommitResult> SqliteStore::apply_ops(const std::vector<Op>& ops) {
  TPUCTL_TRY_ASSIGN(int64_t current, current_revision());
  if (ops.empty()) {
    return CommitResult{current};
  }
  int64_t rev = current + 1;
  TPUCTL_TRY(m_db.exec("SAVEPOINT tpuctl_ops", "write"));
  bool wrote = false;
  for (const auto& op : ops) {
    Status st = std::visit([&](const auto& o) { return apply(o, rev); }, op);
    if (!st) {
      (void)m_db.exec("ROLLBACK TO tpuctl_ops; RELEASE tpuctl_ops", "roll back");
      return std::move(st).error();
    }
    wrote = wrote || !std::holds_alternative<CheckOp>(op);
  }
  if (compaction_due(rev, event_retention())) {
    // The logs this commit appends to keep their retention (event_retention.hpp), in its
    // transaction: a failure here fails the commit as any write would.
    std::set<std::string> pools;
    for (const auto& op : ops) {
      if (const auto* e = std::get_if<EventOp>(&op)) {
        pools.insert(e->event.pool);
      }
    }
    for (const auto& pool : pools) {
      auto removed = compact_events(pool, event_retention());
      if (!removed) {
        (void)m_db.exec("ROLLBACK TO tpuctl_ops; RELEASE tpuctl_ops", "roll back");
        return std::move(removed).error();
      }
    }
  }
  if (wrote) {
    TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("UPDATE meta SET value = ? WHERE key = 'revision'"));
    s->bind(1, rev);
    int rc = s->step();
    if (rc != SQLITE_DONE) {
      Error e = m_db.error(rc, "write"); // before the rollback replaces SQLite's message
      (void)m_db.exec("ROLLBACK TO tpuctl_ops; RELEASE tpuctl_ops", "roll back");
      return e;
    }
  }
  TPUCTL_TRY(m_db.exec("RELEASE tpuctl_ops", "write"));
  return CommitResult{wrote ? rev : current};
}

Expected<bool> SqliteStore::pool_exists(const std::string& pool) {
  TPUCTL_TRY_ASSIGN(auto v, version_of(pool_key(pool)));
  return v.has_value();
}

Expected<std::optional<int64_t>> SqliteStore::version_of(const Key& key) {
  TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("SELECT version FROM records WHERE kind = ? AND pool = ? "
                                         "AND id = ?"));
  s->bind(1, to_string(key.kind)).bind(2, key.pool).bind(3, key.id);
  int rc = s->step();
  if (rc == SQLITE_DONE) {
    return std::optional<int64_t>{};
  }
  if (rc != SQLITE_ROW) {
    return m_db.error(rc, "read");
  }
  return std::optional<int64_t>(s->int64(0));
}

Status SqliteStore::apply(const CreateOp& op, int64_t rev) {
  if (op.key.kind != Kind::pool) {
    TPUCTL_TRY_ASSIGN(bool exists, pool_exists(op.key.pool));
    if (!exists) {
      return Error(ErrorKind::not_found,
                   "cannot create " + describe(op.key) + ": pool '" + op.key.pool +
                       "' does not exist",
                   reason::k_not_found);
    }
  }
  TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("INSERT INTO records(kind, pool, id, doc, version, "
                                         "create_revision) VALUES (?, ?, ?, ?, ?, ?)"));
  s->bind(1, to_string(op.key.kind)).bind(2, op.key.pool).bind(3, op.key.id);
  s->bind(4, to_text(op.doc)).bind(5, rev).bind(6, rev);
  int rc = s->step();
  if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
    return Error(ErrorKind::failure, describe(op.key) + " already exists",
                 reason::k_already_exists);
  }
  if (rc != SQLITE_DONE) {
    return m_db.error(rc, "write");
  }
  return ok();
}

Status SqliteStore::apply(const UpdateOp& op, int64_t rev) {
  TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("UPDATE records SET doc = ?1, version = ?2 WHERE kind = "
                                         "?3 AND pool = ?4 AND id = ?5 AND (?6 = -1 OR version = "
                                         "?6)"));
  s->bind(1, to_text(op.doc)).bind(2, rev).bind(3, to_string(op.key.kind));
  s->bind(4, op.key.pool).bind(5, op.key.id).bind(6, op.expected_version);
  int rc = s->step();
  if (rc != SQLITE_DONE) {
    return m_db.error(rc, "write");
  }
  if (m_db.changes() == 1) {
    return ok();
  }
  TPUCTL_TRY_ASSIGN(auto current, version_of(op.key));
  return check_expected_version(op.key, current, op.expected_version);
}

Status SqliteStore::remove_pool_contents(const std::string& pool) {
  for (const char* sql :
       {"DELETE FROM claims WHERE pool = ?", "DELETE FROM heartbeats WHERE pool = ?",
        "DELETE FROM events WHERE pool = ?",
        "DELETE FROM records WHERE pool = ? AND kind != 'pool'"}) {
    TPUCTL_TRY_ASSIGN(auto s, m_db.prepare(sql));
    s->bind(1, pool);
    int rc = s->step();
    if (rc != SQLITE_DONE) {
      return m_db.error(rc, "write");
    }
  }
  return ok();
}

Status SqliteStore::apply(const RemoveOp& op, int64_t) {
  TPUCTL_TRY_ASSIGN(auto current, version_of(op.key));
  TPUCTL_TRY(check_expected_version(op.key, current, op.expected_version));
  if (op.key.kind == Kind::pool || op.key.kind == Kind::host) {
    std::string host = op.key.kind == Kind::host ? op.key.id : "";
    TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("SELECT host, owner FROM claims WHERE pool = ?1 AND "
                                           "(?2 = '' OR host = ?2) AND (expires_at = 0 OR "
                                           "expires_at > ?3) ORDER BY host"));
    s->bind(1, op.key.pool).bind(2, host).bind(3, now_ms());
    std::vector<std::string> busy;
    int rc;
    while ((rc = s->step()) == SQLITE_ROW) {
      busy.push_back(quoted(s->text(0)) + " is claimed by " + quoted(s->text(1)));
    }
    if (rc != SQLITE_DONE) {
      return m_db.error(rc, "read");
    }
    if (!busy.empty()) {
      return Error(ErrorKind::failure,
                   "cannot remove " + describe(op.key) + ": " + util::join(busy, ", ") +
                       "; release or drain the claims first",
                   reason::k_hosts_busy);
    }
  }
  if (op.key.kind == Kind::pool) {
    TPUCTL_TRY(remove_pool_contents(op.key.pool));
  } else if (op.key.kind == Kind::host) {
    for (const char* sql : {"DELETE FROM claims WHERE pool = ? AND host = ?",
                            "DELETE FROM heartbeats WHERE pool = ? AND host = ?"}) {
      TPUCTL_TRY_ASSIGN(auto s, m_db.prepare(sql));
      s->bind(1, op.key.pool).bind(2, op.key.id);
      int rc = s->step();
      if (rc != SQLITE_DONE) {
        return m_db.error(rc, "write");
      }
    }
  }
  TPUCTL_TRY_ASSIGN(auto s,
                    m_db.prepare("DELETE FROM records WHERE kind = ? AND pool = ? AND id = ?"));
  s->bind(1, to_string(op.key.kind)).bind(2, op.key.pool).bind(3, op.key.id);
  int rc = s->step();
  if (rc != SQLITE_DONE) {
    return m_db.error(rc, "write");
  }
  return ok();
}

Status SqliteStore::apply(const CheckOp& op, int64_t) {
  TPUCTL_TRY_ASSIGN(auto current, version_of(op.key));
  return check_expected_version(op.key, current, op.expected_version);
}

Status SqliteStore::apply(const ClaimOp& op, int64_t rev) {
  int64_t now = now_ms();
  std::vector<std::string> missing, busy;
  for (const auto& host : op.hosts) {
    TPUCTL_TRY_ASSIGN(auto v, version_of(host_key(op.pool, host)));
    if (!v) {
      missing.push_back(quoted(host));
      continue;
    }
    TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("SELECT owner, expires_at FROM claims WHERE pool = ? "
                                           "AND host = ?"));
    s->bind(1, op.pool).bind(2, host);
    int rc = s->step();
    if (rc == SQLITE_ROW) {
      if (live(s->int64(1), now)) {
        busy.push_back(quoted(host) + " is claimed by " + quoted(s->text(0)));
      }
    } else if (rc != SQLITE_DONE) {
      return m_db.error(rc, "read");
    }
  }
  TPUCTL_TRY(check_claimable(op, missing, busy));
  int64_t expires = op.ttl.count() > 0 ? now + static_cast<int64_t>(op.ttl.count()) * 1000 : 0;
  for (const auto& host : op.hosts) {
    {
      // An expired provisional claim frees its host.
      TPUCTL_TRY_ASSIGN(auto d, m_db.prepare("DELETE FROM claims WHERE pool = ? AND host = ?"));
      d->bind(1, op.pool).bind(2, host);
      int rc = d->step();
      if (rc != SQLITE_DONE) {
        return m_db.error(rc, "write");
      }
    }
    TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("INSERT INTO claims(pool, host, owner, claimed_at, "
                                           "expires_at, revision) VALUES (?, ?, ?, ?, ?, ?)"));
    s->bind(1, op.pool).bind(2, host).bind(3, op.owner);
    s->bind(4, op.claimed_at_ms != 0 ? op.claimed_at_ms : now).bind(5, expires);
    s->bind(6, rev);
    int rc = s->step();
    if ((rc & 0xff) == SQLITE_CONSTRAINT) { // unreachable under the lock; the key's backstop
      return check_claimable(op, {}, {quoted(host) + " is claimed already"}).error();
    }
    if (rc != SQLITE_DONE) {
      return m_db.error(rc, "write");
    }
  }
  return ok();
}

Status SqliteStore::apply(const ReleaseOp& op, int64_t) {
  int64_t now = now_ms();
  std::vector<std::string> problems;
  for (const auto& host : op.hosts) {
    TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("SELECT owner, expires_at FROM claims WHERE pool = ? "
                                           "AND host = ?"));
    s->bind(1, op.pool).bind(2, host);
    int rc = s->step();
    if (rc == SQLITE_ROW && live(s->int64(1), now)) {
      if (s->text(0) != op.owner) {
        problems.push_back(quoted(host) + " is claimed by " + quoted(s->text(0)));
      }
    } else if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
      problems.push_back(quoted(host) + " is not claimed");
    } else {
      return m_db.error(rc, "read");
    }
  }
  if (!problems.empty()) {
    return Error(ErrorKind::failure,
                 "cannot release hosts in pool '" + op.pool + "' for '" + op.owner +
                     "': " + util::join(problems, ", "),
                 reason::k_not_owner);
  }
  for (const auto& host : op.hosts) {
    TPUCTL_TRY_ASSIGN(auto d, m_db.prepare("DELETE FROM claims WHERE pool = ? AND host = ?"));
    d->bind(1, op.pool).bind(2, host);
    int rc = d->step();
    if (rc != SQLITE_DONE) {
      return m_db.error(rc, "write");
    }
  }
  return ok();
}

Expected<size_t> SqliteStore::compact_events(const std::string& pool,
                                             const EventRetention& retention) {
  if (!retention.any()) {
    return size_t{0};
  }
  // Older than the age, or beyond the newest max_events (the revision of the one at that
  // offset, newest first: NULL when there are fewer, which keeps them all).
  TPUCTL_TRY_ASSIGN(auto s, m_db.prepare("DELETE FROM events WHERE pool = ?1 AND ((?2 > 0 AND "
                                         "time < ?3) OR (?4 > 0 AND revision <= (SELECT revision "
                                         "FROM events WHERE pool = ?1 ORDER BY revision DESC "
                                         "LIMIT 1 OFFSET ?4)))"));
  s->bind(1, pool).bind(2, retention.max_age_ms).bind(3, now_ms() - retention.max_age_ms);
  s->bind(4, retention.max_events);
  int rc = s->step();
  if (rc != SQLITE_DONE) {
    return m_db.error(rc, "write");
  }
  return static_cast<size_t>(m_db.changes());
}

Status SqliteStore::apply(const EventOp& op, int64_t rev) {
  const Event& e = op.event;
  TPUCTL_TRY_ASSIGN(auto s,
                    m_db.prepare("INSERT INTO events(revision, time, pool, subject_kind, subject, "
                                 "type, from_state, to_state, initiator, detail, actor) "
                                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  s->bind(1, rev).bind(2, e.time_ms != 0 ? e.time_ms : now_ms()).bind(3, e.pool);
  s->bind(4, to_string(e.subject_kind)).bind(5, e.subject).bind(6, e.type);
  s->bind(7, e.from_state).bind(8, e.to_state).bind(9, to_string(e.initiator));
  s->bind(10, to_text(e.detail)).bind(11, e.actor.empty() ? actor() : e.actor);
  int rc = s->step();
  if (rc != SQLITE_DONE) {
    return m_db.error(rc, "write");
  }
  return ok();
}

} // namespace tpuctl::state
