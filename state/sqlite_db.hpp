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
// tpuctl was doing ("open", "write", "read"). SQLITE_BUSY/LOCKED becomes reason k_busy with
// "state store busy: another tpuctl has held the lock for more than N s".
Error error_from(sqlite3* db, int rc, std::string_view doing, const std::string& path,
                 std::chrono::milliseconds busy_timeout);

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

  // Opens `path` read-write (the file must exist) with the given busy timeout.
  // Errors: k_unavailable naming the path and SQLite's reason.
  static Expected<Db> open(const std::string& path, std::chrono::milliseconds busy_timeout);

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
