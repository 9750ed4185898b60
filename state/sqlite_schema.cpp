// Opening the SQLite state database: creating the file 0600, connection settings, and schema
// migrations by PRAGMA user_version.
//
// Migrations are a list of (target version, SQL). Opening reads user_version; when it is below
// k_schema_version the store takes the writer lock (BEGIN IMMEDIATE), reads it again (another
// process may have migrated meanwhile), applies every migration above it and sets user_version
// and application_id in the same transaction, so N processes starting at once migrate once.
// A database above k_schema_version was written by a newer tpuctl: it is opened read-only.
//
// Schema v1. Records of every kind share one table keyed (kind, pool, id), so a new kind (cluster,
// workload, ...) needs no migration. A pool is the row (kind 'pool', pool name, id ''). The meta
// row 'revision' counts commits; a record's version is the revision that last wrote it, like
// etcd's mod_revision. claims(pool, host) is the primary key that makes a double claim
// impossible, and its foreign key to the host's row makes a claim on a missing host, or the
// removal of a claimed host, impossible too.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <sqlite3.h>

#include "state/sqlite_store.hpp"

namespace tpuctl::state {

namespace {

struct Migration {
  int to_version;
  const char* sql;
};

constexpr Migration k_migrations[] = {
    {1, R"sql(
CREATE TABLE meta(
  key TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta(key, value) VALUES ('revision', 0);

CREATE TABLE records(
  kind TEXT NOT NULL,
  pool TEXT NOT NULL,
  id TEXT NOT NULL,
  doc TEXT NOT NULL CHECK (json_valid(doc)),
  version INTEGER NOT NULL CHECK (version > 0),
  create_revision INTEGER NOT NULL,
  PRIMARY KEY (kind, pool, id)
) WITHOUT ROWID;
CREATE INDEX records_by_pool ON records(pool, kind, id);

CREATE TABLE claims(
  pool TEXT NOT NULL,
  host TEXT NOT NULL,
  owner TEXT NOT NULL,
  claimed_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL DEFAULT 0,
  revision INTEGER NOT NULL,
  host_kind TEXT NOT NULL DEFAULT 'host' CHECK (host_kind = 'host'),
  PRIMARY KEY (pool, host),
  FOREIGN KEY (host_kind, pool, host) REFERENCES records(kind, pool, id)
) WITHOUT ROWID;
CREATE INDEX claims_by_owner ON claims(pool, owner);

CREATE TABLE heartbeats(
  pool TEXT NOT NULL,
  host TEXT NOT NULL,
  payload TEXT NOT NULL,
  last_seen INTEGER NOT NULL,
  ttl INTEGER NOT NULL,
  PRIMARY KEY (pool, host)
) WITHOUT ROWID;

CREATE TABLE events(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  revision INTEGER NOT NULL,
  time INTEGER NOT NULL,
  pool TEXT NOT NULL,
  subject_kind TEXT NOT NULL,
  subject TEXT NOT NULL,
  type TEXT NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  initiator TEXT NOT NULL CHECK (initiator IN ('USER', 'SERVICE')),
  detail TEXT NOT NULL
);
CREATE INDEX events_by_pool ON events(pool, revision);
)sql"},
};

Error unavailable(std::string message) {
  return Error(ErrorKind::failure, std::move(message), std::string(reason::k_unavailable));
}

// Creates `path` 0600 when absent; tightens an existing file of ours to 0600.
Status prepare_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::fchmod(fd, 0600); // exact, whatever the umask
    ::close(fd);
    return ok();
  }
  if (errno != EEXIST) {
    return unavailable("cannot create state store '" + path + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return unavailable("cannot read state store '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return unavailable("state store '" + path +
                       "' is not a regular file: point --state at a database file");
  }
  if ((st.st_mode & 077) != 0 && st.st_uid == ::geteuid()) {
    ::chmod(path.c_str(), 0600);
  }
  return ok();
}

} // namespace

Expected<std::unique_ptr<SqliteStore>> SqliteStore::open(const SqliteOptions& options) {
  TPUCTL_TRY(prepare_file(options.path));
  TPUCTL_TRY_ASSIGN(auto db, sqlite::Db::open(options.path, options.busy_timeout));
  std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(db), options));
  // Setting up a connection can meet SQLITE_BUSY without SQLite waiting in its busy handler:
  // switching a fresh file to WAL, or reading while another process runs WAL recovery or
  // removes the WAL as the last connection closes. That is a moment, not a held lock: retry
  // within the busy timeout (measured: 8 processes opening one new file fail 1 time in 4
  // without this, on a loaded 2-core machine).
  const auto deadline = std::chrono::steady_clock::now() + options.busy_timeout;
  for (int attempt = 1;; ++attempt) {
    auto configured = store->configure_and_migrate();
    if (configured || !state::has_reason(configured.error(), reason::k_busy) ||
        std::chrono::steady_clock::now() >= deadline) {
      TPUCTL_TRY(configured);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(5 * attempt, 100)));
  }
  return store;
}

Status SqliteStore::configure_and_migrate() {
  TPUCTL_TRY(m_db.exec("PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL;", "configure"));
  // WAL is persistent in the file; switching needs no transaction open.
  TPUCTL_TRY_ASSIGN(auto mode, m_db.query_text("PRAGMA journal_mode", "read"));
  if (mode != "wal") {
    TPUCTL_TRY_ASSIGN(mode, m_db.query_text("PRAGMA journal_mode = WAL", "configure"));
    if (mode != "wal") {
      return unavailable("cannot switch state store '" + m_db.path() +
                         "' to write-ahead logging (journal mode is '" + mode + "')");
    }
  }
  TPUCTL_TRY_ASSIGN(int64_t version, m_db.query_int("PRAGMA user_version", "read"));
  if (version < k_schema_version) {
    TPUCTL_TRY(m_db.exec("BEGIN IMMEDIATE", "migrate"));
    auto migrated = [&]() -> Status {
      TPUCTL_TRY_ASSIGN(int64_t now, m_db.query_int("PRAGMA user_version", "read"));
      return migrate_locked(now);
    }();
    if (!migrated) {
      (void)m_db.exec("ROLLBACK", "migrate");
      return migrated;
    }
    TPUCTL_TRY(m_db.exec("COMMIT", "migrate"));
    TPUCTL_TRY_ASSIGN(version, m_db.query_int("PRAGMA user_version", "read"));
  }
  TPUCTL_TRY_ASSIGN(int64_t app_id, m_db.query_int("PRAGMA application_id", "read"));
  if (app_id != k_application_id) {
    return unavailable("'" + m_db.path() +
                       "' is an SQLite database but not a tpuctl state store (application_id " +
                       std::to_string(app_id) + "); choose another file with --state sqlite:PATH");
  }
  m_schema_version = static_cast<int>(version);
  return ok();
}

Status SqliteStore::migrate_locked(int64_t from_version) {
  if (from_version >= k_schema_version) {
    return ok(); // another process migrated first, or the file is newer
  }
  if (from_version == 0) {
    // A database with tables but no user_version belongs to some other program.
    TPUCTL_TRY_ASSIGN(int64_t tables, m_db.query_int("SELECT count(*) FROM sqlite_schema", "read"));
    if (tables != 0) {
      return unavailable("'" + m_db.path() +
                         "' is an SQLite database of another program, not a tpuctl state store; "
                         "choose another file with --state sqlite:PATH");
    }
  }
  for (const auto& m : k_migrations) {
    if (m.to_version > from_version) {
      TPUCTL_TRY(m_db.exec(m.sql, "migrate"));
    }
  }
  return m_db.exec("PRAGMA user_version = " + std::to_string(k_schema_version) +
                       "; PRAGMA application_id = " + std::to_string(k_application_id) + ";",
                   "migrate");
}

Status SqliteStore::check_writable() const {
  if (m_schema_version > k_schema_version) {
    return Error(ErrorKind::failure,
                 "state schema v" + std::to_string(m_schema_version) + " in '" + m_db.path() +
                     "' is newer than this tpuctl supports (v" + std::to_string(k_schema_version) +
                     "); upgrade tpuctl",
                 std::string(reason::k_schema_too_new));
  }
  return ok();
}

StoreInfo SqliteStore::info() const {
  StoreInfo i;
  i.backend = "sqlite";
  i.location = "sqlite:" + m_db.path();
  i.schema_version = m_schema_version;
  i.supported_schema = k_schema_version;
  i.writable = m_schema_version <= k_schema_version;
  return i;
}

} // namespace tpuctl::state
