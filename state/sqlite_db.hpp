// Thin RAII wrappers over the SQLite C API, used only by the SQLite state store: a connection
// (Db), prepared statements (Stmt) and the mapping of SQLite result codes to tpuctl Errors that
// never leak a raw "database is locked".
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "util/expected.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace tpuctl::state::sqlite {

// Turns an SQLite result code into an Error about the database at `path`. `doing` says what
// tpuctl was doing ("open", "write", "read"). This is the one place SQLite's failures get their
// words: SQLITE_BUSY/LOCKED becomes reason k_busy ("state store busy: ..."); SQLITE_FULL, and
// any error whose system errno is ENOSPC or EDQUOT (SQLite says "disk I/O error" when the wal
// index cannot grow), reason k_disk_full ("the disk is full"); SQLITE_READONLY and EROFS reason
// k_read_only; corruption says how to restore and check.
Error error_from(sqlite3* db, int rc, std::string_view doing, const std::string& path,
                 std::chrono::milliseconds busy_timeout);

// The refusal of a write to the store at `path` because no space is left (reason k_disk_full).
Error disk_full(const std::string& path, std::string_view doing);
// The refusal of a write to the read-only store at `path`, saying `because` (reason
// k_read_only).
Error read_only(const std::string& path, std::string_view doing, const std::string& because);

// The store at `path` was `what_happened` ("deleted or moved away", "replaced by another
// file") while this process used it (reason k_store_replaced).
Error vanished(const std::string& path, std::string_view what_happened);

// `path` written for a file: URI ('?', '#' and '%' escaped).
std::string uri_path(const std::string& path);

// "10 s", "0.25 s".
std::string format_seconds(std::chrono::milliseconds ms);

class Stmt {
public:
  Stmt() = default;
  explicit Stmt(sqlite3_stmt* s) : m_stmt(s) {}
  ~Stmt();
  Stmt(Stmt&& other) noexcept : m_stmt(other.m_stmt) { other.m_stmt = nullptr; }
  Stmt& operator=(Stmt&& other) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Binders (1-based, as SQLite). Return *this for chaining.
  Stmt& bind(int index, std::string_view text);
  Stmt& bind(int index, int64_t value);
  // Runs one step: SQLITE_ROW, SQLITE_DONE or an error code.
  int step();
  // Resets and clears bindings so the statement can be reused.
  void reset();

  std::string text(int column) const;
  int64_t int64(int column) const;
  bool is_null(int column) const;

private:
  sqlite3_stmt* m_stmt = nullptr;
};

// A borrowed cached statement that is reset (ending its implicit read) when it goes out of scope,
// so no statement ever pins an old snapshot.
class StmtRef {
public:
  explicit StmtRef(Stmt* s) : m_stmt(s) {}
  ~StmtRef() {
    if (m_stmt) {
      m_stmt->reset();
    }
  }
  StmtRef(StmtRef&& other) noexcept : m_stmt(other.m_stmt) { other.m_stmt = nullptr; }
  StmtRef& operator=(StmtRef&&) = delete;
  StmtRef(const StmtRef&) = delete;
  StmtRef& operator=(const StmtRef&) = delete;
  Stmt* operator->() const { return m_stmt; }
  Stmt& operator*() const { return *m_stmt; }

private:
  Stmt* m_stmt;
};

class Db {
public:
  Db() = default;
  ~Db();
  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // read_write: the file must exist. read_only: SQLite needs to create or map the wal index
  // (`-shm`) next to it. immutable: nothing is written or locked at all, for a database on
  // read-only storage whose wal index does not exist (SQLite cannot read a WAL database there
  // otherwise); only safe when nobody can write the file meanwhile.
  enum class OpenMode { read_write, read_only, immutable };
  // Opens `path` with the given busy timeout. Errors: k_unavailable naming the path and
  // SQLite's reason.
  static Expected<Db> open(const std::string& path, std::chrono::milliseconds busy_timeout,
                           OpenMode mode = OpenMode::read_write);

  sqlite3* handle() const { return m_db; }
  const std::string& path() const { return m_path; }
  std::chrono::milliseconds busy_timeout() const { return m_busy_timeout; }

  // Runs SQL without results (may hold several statements). Errors via error_from.
  Status exec(const std::string& sql, std::string_view doing);
  // The cached prepared statement for `sql`, reset and unbound. Errors via error_from.
  Expected<StmtRef> prepare(const std::string& sql);
  // One integer from a single-row query (e.g. a PRAGMA).
  Expected<int64_t> query_int(const std::string& sql, std::string_view doing);
  Expected<std::string> query_text(const std::string& sql, std::string_view doing);
  // Error for the last failed call, about `doing`.
  Error error(int rc, std::string_view doing) const;
  int64_t changes() const;

private:
  sqlite3* m_db = nullptr;
  std::string m_path;
  std::chrono::milliseconds m_busy_timeout{0};
  std::map<std::string, std::unique_ptr<Stmt>> m_cache;
};

} // namespace tpuctl::state::sqlite
