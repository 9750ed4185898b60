#include "state/sqlite_db.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <sqlite3.h>

#include "state/store.hpp"

namespace tpuctl::state::sqlite {

std::string format_seconds(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) {
    return std::to_string(ms.count() / 1000) + " s";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

Error disk_full(const std::string& path, std::string_view doing) {
  std::string dir = path.substr(0, path.rfind('/'));
  return Error(ErrorKind::failure,
               "cannot " + std::string(doing) + " state store '" + path +
                   "': the disk is full (no space left on the filesystem of '" +
                   (dir.empty() ? "/" : dir) + "')" +
                   (doing == "write" ? "; this change was not recorded" : "") +
                   ": free some space there and run the command again",
               std::string(reason::k_disk_full));
}

Error read_only(const std::string& path, std::string_view doing, const std::string& because) {
  return Error(ErrorKind::failure,
               "cannot " + std::string(doing) + " state store '" + path + "': it is read-only (" +
                   because +
                   "); reads work, changes are refused: make it writable, or point --state at a "
                   "writable copy ('tpuctl state backup FILE' makes one)",
               std::string(reason::k_read_only));
}

Error vanished(const std::string& path, std::string_view what_happened) {
  return Error(ErrorKind::failure,
               "state store '" + path + "' was " + std::string(what_happened) +
                   " while this tpuctl was using it: nothing more is recorded there, and what "
                   "it held is gone unless restored ('tpuctl state restore BACKUP'); a local "
                   "pool's sshd servers keep running: stop them with 'tpuctl pool local-down "
                   "--pool NAME'",
               std::string(reason::k_store_replaced));
}

Error error_from(sqlite3* db, int rc, std::string_view doing, const std::string& path,
                 std::chrono::milliseconds busy_timeout) {
  int primary = rc & 0xff;
  std::string detail = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  // What the operating system said, when SQLite's words hide it ("disk I/O error").
  const int sys = db ? sqlite3_system_errno(db) : 0;
  std::string where = "'" + path + "'";
  auto unavailable = [](std::string msg) {
    return Error(ErrorKind::failure, std::move(msg), std::string(reason::k_unavailable));
  };
  // The system errno only explains an I/O failure (it may be stale after another error).
  const bool io = primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN;
  if (primary == SQLITE_FULL || (io && (sys == ENOSPC || sys == EDQUOT))) {
    return disk_full(path, doing);
  }
  if (rc == SQLITE_READONLY_DBMOVED) {
    return vanished(path, "deleted or moved away");
  }
  if (primary == SQLITE_READONLY || (io && sys == EROFS)) {
    return read_only(path, doing, io ? "it is on a read-only filesystem" : "sqlite: " + detail);
  }
  if (io && sys != 0) {
    detail += " (" + std::string(std::strerror(sys)) + ")";
  }
  switch (primary) {
  case SQLITE_BUSY:
  case SQLITE_LOCKED:
    return Error(ErrorKind::failure,
                 "state store busy: waited " + format_seconds(busy_timeout) + " for " + where +
                     " while other tpuctl processes held its lock; try again, or raise the "
                     "wait with TPUCTL_STATE_BUSY_TIMEOUT",
                 std::string(reason::k_busy));
  case SQLITE_NOTADB:
    return unavailable("state store " + where + " is not a tpuctl state database (sqlite: " +
                       detail + "); choose another file with --state sqlite:PATH");
  case SQLITE_CORRUPT:
    return unavailable("state store " + where + " is corrupt (sqlite: " + detail +
                       "); restore it from a backup ('tpuctl state restore FILE') or move it "
                       "aside; 'tpuctl state check' lists what is damaged");
  case SQLITE_PERM:
  case SQLITE_CANTOPEN:
  case SQLITE_IOERR:
  case SQLITE_AUTH:
    return unavailable("cannot " + std::string(doing) + " state store " + where + ": " + detail);
  default:
    return unavailable("state store " + where + ": " + std::string(doing) + " failed: " + detail);
  }
}

// ---- Stmt ----

Stmt::~Stmt() {
  if (m_stmt) {
    sqlite3_finalize(m_stmt);
  }
}

Stmt& Stmt::operator=(Stmt&& other) noexcept {
  if (this != &other) {
    if (m_stmt) {
      sqlite3_finalize(m_stmt);
    }
    m_stmt = other.m_stmt;
    other.m_stmt = nullptr;
  }
  return *this;
}

Stmt& Stmt::bind(int index, std::string_view text) {
  // A default string_view has a null data(): bind "" rather than SQL NULL.
  sqlite3_bind_text(m_stmt, index, text.data() ? text.data() : "", static_cast<int>(text.size()),
                    SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::bind(int index, int64_t value) {
  sqlite3_bind_int64(m_stmt, index, value);
  return *this;
}

int Stmt::step() {
  return sqlite3_step(m_stmt);
}

void Stmt::reset() {
  sqlite3_reset(m_stmt);
  sqlite3_clear_bindings(m_stmt);
}

std::string Stmt::text(int column) const {
  const unsigned char* p = sqlite3_column_text(m_stmt, column);
  int n = sqlite3_column_bytes(m_stmt, column);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

int64_t Stmt::int64(int column) const {
  return sqlite3_column_int64(m_stmt, column);
}

bool Stmt::is_null(int column) const {
  return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
}

// ---- Db ----

std::string uri_path(const std::string& path) {
  // RFC 3986 escapes for what a file: URI gives meaning to ('?', '#', '%').
  std::string out;
  for (char c : path) {
    if (c == '?' || c == '#' || c == '%') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

Db::~Db() {
  m_cache.clear(); // finalize statements before closing
  if (m_db) {
    sqlite3_close_v2(m_db);
  }
}

Db::Db(Db&& other) noexcept
    : m_db(other.m_db), m_path(std::move(other.m_path)), m_busy_timeout(other.m_busy_timeout),
      m_cache(std::move(other.m_cache)) {
  other.m_db = nullptr;
}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    m_cache.clear();
    if (m_db) {
      sqlite3_close_v2(m_db);
    }
    m_db = other.m_db;
    m_path = std::move(other.m_path);
    m_busy_timeout = other.m_busy_timeout;
    m_cache = std::move(other.m_cache);
    other.m_db = nullptr;
  }
  return *this;
}

Expected<Db> Db::open(const std::string& path, std::chrono::milliseconds busy_timeout,
                      OpenMode mode) {
  Db db;
  db.m_path = path;
  db.m_busy_timeout = busy_timeout;
  int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
  flags |= mode == OpenMode::read_write ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
  std::string uri = "file:" + uri_path(path);
  if (mode == OpenMode::immutable) {
    uri += "?immutable=1";
  }
  int rc = sqlite3_open_v2(uri.c_str(), &db.m_db, flags, nullptr);
  if (rc != SQLITE_OK) {
    return error_from(db.m_db, rc, "open", path, busy_timeout);
  }
  sqlite3_extended_result_codes(db.m_db, 1);
  sqlite3_busy_timeout(db.m_db, static_cast<int>(busy_timeout.count()));
  return db;
}

Status Db::exec(const std::string& sql, std::string_view doing) {
  int rc = sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return error(rc, doing);
  }
  return ok();
}

Expected<StmtRef> Db::prepare(const std::string& sql) {
  auto it = m_cache.find(sql);
  if (it != m_cache.end()) {
    it->second->reset();
    return StmtRef(it->second.get());
  }
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(m_db, sql.c_str(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  if (rc != SQLITE_OK) {
    return error(rc, "prepare a statement for");
  }
  auto stmt = std::make_unique<Stmt>(raw);
  Stmt* p = stmt.get();
  m_cache.emplace(sql, std::move(stmt));
  return StmtRef(p);
}

Expected<int64_t> Db::query_int(const std::string& sql, std::string_view doing) {
  TPUCTL_TRY_ASSIGN(StmtRef s, prepare(sql));
  int rc = s->step();
  if (rc != SQLITE_ROW) {
    return error(rc == SQLITE_DONE ? SQLITE_ERROR : rc, doing);
  }
  return s->int64(0);
}

Expected<std::string> Db::query_text(const std::string& sql, std::string_view doing) {
  TPUCTL_TRY_ASSIGN(StmtRef s, prepare(sql));
  int rc = s->step();
  if (rc != SQLITE_ROW) {
    return error(rc == SQLITE_DONE ? SQLITE_ERROR : rc, doing);
  }
  return s->text(0);
}

Error Db::error(int rc, std::string_view doing) const {
  return error_from(m_db, rc, doing, m_path, m_busy_timeout);
}

int64_t Db::changes() const {
  return sqlite3_changes64(m_db);
}

} // namespace tpuctl::state::sqlite
