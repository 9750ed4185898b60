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
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <sys/stat.h>
#include <sys/statvfs.h>
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
    // v2: who made each change (StateStore::actor); '' for the changes recorded before.
    {2, R"sql(
ALTER TABLE events ADD COLUMN actor TEXT NOT NULL DEFAULT '';
)sql"},
};

Error unavailable(std::string message) {
  return Error(ErrorKind::failure, std::move(message), std::string(reason::k_unavailable));
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Creates `path` 0600 when absent and `create`; an existing file stays as it is, except that a
// file of ours its owner may write loses the group's and others' bits (never gains any: a
// write-protected file stays write-protected). Errors: k_no_store when absent and not `create`.
Status prepare_file(const std::string& path, bool create) {
  if (create) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::fchmod(fd, 0600); // exact, whatever the umask
      ::close(fd);
      return ok();
    }
    if (errno == ENOSPC || errno == EDQUOT) {
      return sqlite::disk_full(path, "create");
    }
    if (errno != EEXIST) {
      return unavailable("cannot create state store '" + path + "': " + std::strerror(errno));
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return Error(ErrorKind::not_found,
                   "state store '" + path + "' does not exist (nothing was created)",
                   std::string(reason::k_no_store));
    }
    return unavailable("cannot read state store '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return unavailable("state store '" + path +
                       "' is not a regular file: point --state at a database file");
  }
  if ((st.st_mode & 077) != 0 && (st.st_mode & S_IWUSR) != 0 && st.st_uid == ::geteuid()) {
    ::chmod(path.c_str(), st.st_mode & 0700);
  }
  return ok();
}

// Why the database at `path` must not be written, as its owner would read the modes: "" when it
// may be. A file or directory without any write bit counts as write-protected even for root
// (who could write it anyway), as rm(1) and chmod(1) users mean it.
std::string write_protection(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 0222) == 0) {
    return "its mode is " + octal_mode(st.st_mode);
  }
  std::string dir = path.substr(0, path.rfind('/'));
  dir = dir.empty() ? "/" : dir;
  struct statvfs vfs {};
  if ((::statvfs(path.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0) ||
      (::access(path.c_str(), W_OK) != 0 && errno == EROFS)) {
    return "it is on a read-only filesystem";
  }
  if (::access(path.c_str(), W_OK) != 0) {
    return "you may not write it: mode " + octal_mode(st.st_mode) + ", owner uid " +
           std::to_string(st.st_uid);
  }
  // SQLite creates its -wal and -shm files next to the database on every write.
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) == 0 && (dst.st_mode & 0222) == 0) {
    return "its directory '" + dir + "' has mode " + octal_mode(dst.st_mode);
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return "you may not write its directory '" + dir + "'";
  }
  return "";
}

// How to open a database that must not be written: read-only when SQLite can keep its wal index
// (-shm) next to it, else immutable (a read-only filesystem or directory and no -shm yet).
sqlite::Db::OpenMode read_only_mode(const std::string& path) {
  std::string dir = path.substr(0, path.rfind('/'));
  dir = dir.empty() ? "/" : dir;
  if (::access((path + "-shm").c_str(), R_OK) == 0 || ::access(dir.c_str(), W_OK) == 0) {
    return sqlite::Db::OpenMode::read_only;
  }
  return sqlite::Db::OpenMode::immutable;
}

} // namespace

Expected<std::unique_ptr<SqliteStore>> SqliteStore::open(const SqliteOptions& options) {
  TPUCTL_TRY(prepare_file(options.path, options.create));
  const std::string protection =
      options.read_only ? "opened read-only" : write_protection(options.path);
  TPUCTL_TRY_ASSIGN(auto db, sqlite::Db::open(options.path, options.busy_timeout,
                                              protection.empty() ? sqlite::Db::OpenMode::read_write
                                                                 : read_only_mode(options.path)));
  std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(db), options));
  store->m_read_only_because = protection;
  // The file this store reads from now on: if the path later names another file, or none, the
  // store says so instead of working on a file nobody else sees (check_identity).
  struct stat st {};
  if (::stat(options.path.c_str(), &st) == 0) {
    store->m_device = st.st_dev;
    store->m_inode = st.st_ino;
  }
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
  const bool read_only = !m_read_only_because.empty();
  // WAL is persistent in the file; switching needs no transaction open.
  TPUCTL_TRY_ASSIGN(auto mode, m_db.query_text("PRAGMA journal_mode", "read"));
  if (mode != "wal" && !read_only) {
    TPUCTL_TRY_ASSIGN(mode, m_db.query_text("PRAGMA journal_mode = WAL", "configure"));
    if (mode != "wal") {
      return unavailable("cannot switch state store '" + m_db.path() +
                         "' to write-ahead logging (journal mode is '" + mode + "')");
    }
  }
  TPUCTL_TRY_ASSIGN(int64_t version, m_db.query_int("PRAGMA user_version", "read"));
  if (version < k_schema_version && read_only) {
    return sqlite::read_only(m_db.path(), "set up",
                             m_read_only_because + ", and it holds no tpuctl state yet");
  }
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
  if (m_reads_held) {
    return Error(ErrorKind::failure,
                 "state store '" + m_db.path() + "' cannot be written while its reads are held",
                 std::string(reason::k_invalid));
  }
  if (!m_read_only_because.empty()) {
    return sqlite::read_only(m_db.path(), "write", m_read_only_because);
  }
  if (m_schema_version > k_schema_version) {
    return Error(ErrorKind::failure,
                 "state schema v" + std::to_string(m_schema_version) + " in '" + m_db.path() +
                     "' is newer than this tpuctl supports (v" + std::to_string(k_schema_version) +
                     "); upgrade tpuctl",
                 std::string(reason::k_schema_too_new));
  }
  return ok();
}

Status SqliteStore::leave_wal() {
  TPUCTL_TRY_ASSIGN(auto mode, m_db.query_text("PRAGMA journal_mode = DELETE", "configure"));
  if (mode != "delete") {
    return unavailable("cannot take '" + m_db.path() + "' out of write-ahead logging (journal " +
                       "mode is '" + mode + "')");
  }
  return {};
}

Expected<std::vector<std::string>> SqliteStore::check_integrity() {
  TPUCTL_TRY(check_identity());
  std::vector<std::string> found;
  // Each row of `sql` through `line`; a check SQLite cannot even run is a finding too (a corrupt
  // schema page).
  auto rows = [&](const std::string& sql, const std::function<void(sqlite::Stmt&)>& line) {
    auto s = m_db.prepare(sql);
    if (!s) {
      found.push_back(s.error().message);
      return;
    }
    int rc;
    while ((rc = (*s)->step()) == SQLITE_ROW) {
      line(**s);
    }
    if (rc != SQLITE_DONE) {
      found.push_back(m_db.error(rc, "check").message);
    }
  };
  rows("PRAGMA integrity_check", [&](sqlite::Stmt& s) {
    if (s.text(0) != "ok") {
      found.push_back("sqlite integrity_check: " + s.text(0));
    }
  });
  rows("PRAGMA foreign_key_check", [&](sqlite::Stmt& s) {
    found.push_back("sqlite foreign_key_check: a row of table '" + s.text(0) +
                    "' refers to a missing row of '" + s.text(2) + "'");
  });
  if (auto rev = current_revision(); !rev) {
    found.push_back("the revision counter cannot be read: " + rev.error().message);
  }
  return found;
}

Status SqliteStore::check_identity() const {
  struct stat st {};
  if (::stat(m_db.path().c_str(), &st) != 0) {
    return sqlite::vanished(m_db.path(), "deleted or moved away");
  }
  if (m_inode != 0 && (st.st_dev != m_device || st.st_ino != m_inode)) {
    return sqlite::vanished(m_db.path(), "replaced by another file");
  }
  return ok();
}

StoreInfo SqliteStore::info() const {
  StoreInfo i;
  i.backend = "sqlite";
  i.location = "sqlite:" + m_db.path();
  i.schema_version = m_schema_version;
  i.supported_schema = k_schema_version;
  i.writable = m_read_only_because.empty() && m_schema_version <= k_schema_version;
  i.read_only_because = !m_read_only_because.empty() ? m_read_only_because
                        : i.writable                 ? ""
                                                     : "its schema is newer than this tpuctl's";
  return i;
}

} // namespace tpuctl::state
