// The SQLite StateStore: the conformance suite, plus what only SQLite has: the file and its
// permissions, WAL, migrations by user_version, a schema newer than the binary, foreign files,
// and the busy-lock error.
#include <fstream>
#include <sys/stat.h>

#include <doctest/doctest.h>
#include <sqlite3.h>

#include "state/location.hpp"
#include "state/sqlite_store.hpp"
#include "tests/support/helpers.hpp"
#include "tests/unit/state/store_conformance.hpp"

using namespace tpuctl;
using namespace tpuctl::state;
using tpuctl::state::test::FakeClock;
using tpuctl::test::TempDir;

namespace {

class SqliteFixture : public state::test::StoreFixture {
public:
  std::unique_ptr<StateStore> open(Clock clock) override {
    SqliteOptions o;
    o.path = (m_dir.path() / "state.db").string();
    o.clock = std::move(clock);
    auto s = SqliteStore::open(o);
    REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    return std::move(*s);
  }

private:
  TempDir m_dir;
};

// A raw connection, as another program (or a newer tpuctl) would have.
class Raw {
public:
  explicit Raw(const std::string& path) {
    REQUIRE(sqlite3_open_v2(path.c_str(), &m_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                            nullptr) == SQLITE_OK);
  }
  ~Raw() { sqlite3_close_v2(m_db); }
  int exec(const std::string& sql) {
    return sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, nullptr);
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(m_db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* p = sqlite3_column_text(st, 0);
      out = p ? reinterpret_cast<const char*>(p) : "";
    }
    sqlite3_finalize(st);
    return out;
  }

private:
  sqlite3* m_db = nullptr;
};

unsigned mode_of(const std::filesystem::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

Expected<std::unique_ptr<SqliteStore>>
open_at(const std::string& path, std::chrono::milliseconds busy = std::chrono::seconds(10)) {
  SqliteOptions o;
  o.path = path;
  o.busy_timeout = busy;
  return SqliteStore::open(o);
}

} // namespace

TEST_SUITE_BEGIN("state");

TEST_CASE("state::SqliteStore passes the StateStore conformance suite") {
  state::test::run_store_conformance([] { return std::make_unique<SqliteFixture>(); });
}

TEST_CASE("state::SqliteStore migrates a schema 1 file: its events keep an empty actor, new "
          "ones record the store's") {
  TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  {
    auto s = open_at(path);
    REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    REQUIRE((*s)->commit({CreateOp{pool_key("p"), Json{{"name", "p"}}},
                          EventOp{Event{0, 0, "p", Kind::pool, "p", "CREATED", "", "",
                                        Initiator::user, Json::object(), ""}}}));
  }
  // What tpuctl schema 1 left: the events table without its actor column.
  {
    Raw raw(path);
    REQUIRE(raw.exec("ALTER TABLE events DROP COLUMN actor; PRAGMA user_version = 1") == SQLITE_OK);
  }
  auto s = open_at(path);
  REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
  CHECK((*s)->info().schema_version == k_schema_version);
  (*s)->set_actor("carol@ci-3", false);
  REQUIRE((*s)->commit({EventOp{
      Event{0, 0, "p", Kind::pool, "p", "CHANGED", "", "", Initiator::user, Json::object(), ""}}}));
  auto events = (*s)->events({});
  REQUIRE(events);
  REQUIRE(events->size() == 2);
  CHECK((*events)[0].actor.empty()); // recorded before actors were
  CHECK((*events)[1].actor == "carol@ci-3");
  CHECK(Raw(path).text("PRAGMA user_version") == std::to_string(k_schema_version));
}

TEST_CASE("state::SqliteStore creates and migrates an empty file to the current schema") {
  TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  std::ofstream(path).flush(); // an empty file, as `touch` leaves it
  auto s = open_at(path);
  REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
  CHECK((*s)->info().schema_version == k_schema_version);
  CHECK((*s)->info().location == "sqlite:" + path);
  CHECK((*s)->info().writable);
  Raw raw(path);
  CHECK(raw.text("PRAGMA user_version") == std::to_string(k_schema_version));
  CHECK(raw.text("PRAGMA application_id") == std::to_string(k_application_id));
  CHECK(raw.text("PRAGMA journal_mode") == "wal");
  CHECK(raw.text("SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_schema WHERE "
                 "type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name)") ==
        "claims,events,heartbeats,meta,records");
  CHECK(raw.text("SELECT value FROM meta WHERE key = 'revision'") == "0");
}

TEST_CASE("state::SqliteStore opens an existing store again without migrating twice") {
  TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  {
    auto s = open_at(path);
    REQUIRE(s);
    REQUIRE((*s)->create(pool_key("p"), {{"n", 1}}));
  }
  auto again = open_at(path);
  REQUIRE(again);
  CHECK((*again)->get(pool_key("p"))->doc["n"] == 1);
}

TEST_CASE("state::SqliteStore with a schema newer than tpuctl reads but refuses every write") {
  TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  {
    auto s = open_at(path);
    REQUIRE(s);
    REQUIRE((*s)->create(pool_key("p"), {{"n", 1}}));
  }
  REQUIRE(Raw(path).exec("PRAGMA user_version = 7") == SQLITE_OK);
  auto s = open_at(path);
  REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
  auto& store = **s;
  CHECK(store.info().schema_version == 7);
  CHECK(!store.info().writable);
  CHECK(store.get(pool_key("p"))->doc["n"] == 1);
  auto w = store.create(pool_key("q"), Json::object());
  REQUIRE(!w);
  CHECK(w.error().kind == ErrorKind::failure);
  CHECK(w.error().reason == reason::k_schema_too_new);
  CHECK(w.error().message == "state schema v7 in '" + path +
                                 "' is newer than this tpuctl supports (v" +
                                 std::to_string(k_schema_version) + "); upgrade tpuctl");
  auto hb = store.put_heartbeat("p", "h1", Json::object(), std::chrono::seconds(5));
  REQUIRE(!hb);
  CHECK(hb.error().reason == reason::k_schema_too_new);
  auto t =
      store.transact([](StateStore&) -> Expected<std::vector<Op>> { return std::vector<Op>{}; });
  REQUIRE(!t);
  CHECK(t.error().reason == reason::k_schema_too_new);
  CHECK(Raw(path).text("PRAGMA user_version") == "7"); // never downgraded
}

TEST_CASE("state::SqliteStore refuses files that are not tpuctl state stores") {
  TempDir tmp;
  SUBCASE("a text file") {
    std::string path = (tmp.path() / "notes.txt").string();
    std::ofstream(path) << "this is not a database, just some notes that are long enough\n";
    auto s = open_at(path);
    REQUIRE(!s);
    CHECK(s.error().reason == reason::k_unavailable);
    CHECK(s.error().message.find("'" + path + "' is not a tpuctl state database") !=
          std::string::npos);
  }
  SUBCASE("another program's SQLite database") {
    std::string path = (tmp.path() / "other.db").string();
    REQUIRE(Raw(path).exec("CREATE TABLE bookmarks(url TEXT)") == SQLITE_OK);
    auto s = open_at(path);
    REQUIRE(!s);
    CHECK(s.error().message.find("SQLite database of another program") != std::string::npos);
    CHECK(Raw(path).text("PRAGMA user_version") == "0"); // left untouched
  }
  SUBCASE("a directory") {
    auto s = open_at(tmp.path().string());
    REQUIRE(!s);
    CHECK(s.error().message.find("is not a regular file") != std::string::npos);
  }
}

TEST_CASE("state::SqliteStore reports a lock held past busy_timeout as busy, never raw sqlite") {
  TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  auto s = open_at(path, std::chrono::milliseconds(200));
  REQUIRE(s);
  REQUIRE((*s)->create(pool_key("p"), Json::object()));
  Raw holder(path);
  REQUIRE(holder.exec("BEGIN IMMEDIATE") == SQLITE_OK);
  auto w = (*s)->create(pool_key("q"), Json::object());
  REQUIRE(!w);
  CHECK(w.error().reason == reason::k_busy);
  CHECK(w.error().message == "state store busy: waited 0.2 s for '" + path +
                                 "' while other tpuctl processes held its lock; try again, or "
                                 "raise the wait with TPUCTL_STATE_BUSY_TIMEOUT");
  auto t =
      (*s)->transact([](StateStore&) -> Expected<std::vector<Op>> { return std::vector<Op>{}; });
  REQUIRE(!t);
  CHECK(t.error().reason == reason::k_busy);
  // WAL: readers are not blocked by the writer.
  CHECK((*s)->get(pool_key("p")));
  REQUIRE(holder.exec("COMMIT") == SQLITE_OK);
  CHECK((*s)->create(pool_key("q"), Json::object()));
}

TEST_CASE("state::SqliteStore runs a transact fn inside its write transaction") {
  TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  auto s = open_at(path, std::chrono::milliseconds(100));
  REQUIRE(s);
  REQUIRE((*s)->create(pool_key("p"), Json::object()));
  auto other = open_at(path, std::chrono::milliseconds(100));
  REQUIRE(other);
  SUBCASE("another writer is locked out while fn runs") {
    auto r = (*s)->transact([&](StateStore&) -> Expected<std::vector<Op>> {
      auto blocked = (*other)->create(pool_key("x"), Json::object());
      REQUIRE(!blocked);
      CHECK(blocked.error().reason == reason::k_busy);
      return std::vector<Op>{CreateOp{pool_key("y"), Json::object()}};
    });
    CHECK(r);
    CHECK((*other)->find(pool_key("y"))->has_value());
  }
  SUBCASE("a commit made inside fn is undone when fn then fails") {
    auto r = (*s)->transact([](StateStore& st) -> Expected<std::vector<Op>> {
      TPUCTL_TRY(st.commit({CreateOp{pool_key("q"), Json::object()}}));
      CHECK(st.find(pool_key("q"))->has_value());
      return Error(ErrorKind::failure, "changed my mind");
    });
    REQUIRE(!r);
    CHECK(!(*s)->find(pool_key("q"))->has_value());
  }
}

TEST_CASE("state::SqliteStore keeps the database and its WAL files private (0600)") {
  TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  SUBCASE("a new file") {
    ::umask(022);
    auto s = open_at(path);
    REQUIRE(s);
    REQUIRE((*s)->create(pool_key("p"), Json::object())); // makes the -wal and -shm files
    CHECK(mode_of(path) == 0600);
    CHECK(mode_of(path + "-wal") == 0600);
    CHECK(mode_of(path + "-shm") == 0600);
  }
  SUBCASE("an existing file readable by others is tightened") {
    std::ofstream(path).flush();
    REQUIRE(::chmod(path.c_str(), 0644) == 0);
    auto s = open_at(path);
    REQUIRE(s);
    CHECK(mode_of(path) == 0600);
  }
}

TEST_CASE("state::open_store creates the default directory 0700 and the file 0600, and only "
          "when told to: at open, or at the first write") {
  TempDir tmp;
  OpenOptions o;
  o.env.xdg_state_home = (tmp.path() / "xdg" / "state").string();
  o.env.home = (tmp.path() / "home").string();
  auto dir = tmp.path() / "xdg" / "state" / "tpuctl";
  SUBCASE("never: a missing store is not_found, naming it, and nothing is created") {
    auto s = open_store("", o);
    REQUIRE(!s);
    CHECK(s.error().kind == ErrorKind::not_found);
    CHECK(s.error().reason == reason::k_no_store);
    CHECK(s.error().message.find((dir / "state.db").string()) != std::string::npos);
    CHECK(!std::filesystem::exists(tmp.path() / "xdg"));
  }
  SUBCASE("on the first write: reads see an empty store and create nothing") {
    o.create = Creation::on_first_write;
    auto s = open_store("", o);
    REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    CHECK((*s)->list(Kind::pool, "")->records.empty());
    CHECK(!(*s)->find(pool_key("p"))->has_value());
    CHECK((*s)->snapshot("p").error().kind == ErrorKind::not_found);
    // A transaction that fails, or writes nothing, creates nothing either.
    CHECK(!(*s)->transact([](StateStore&) -> Expected<std::vector<Op>> {
      return Error(ErrorKind::usage, "bad input");
    }));
    CHECK(
        (*s)->transact([](StateStore&) -> Expected<std::vector<Op>> { return std::vector<Op>{}; }));
    CHECK(!(*s)->commit({CreateOp{pool_key("bad/name"), Json::object()}}));
    CHECK(!std::filesystem::exists(tmp.path() / "xdg"));
    REQUIRE((*s)->create(pool_key("p"), Json::object()));
    CHECK((*s)->find(pool_key("p"))->has_value());
    CHECK((*s)->info().location == "sqlite:" + (dir / "state.db").string());
    CHECK(mode_of(dir) == 0700);
    CHECK(mode_of(tmp.path() / "xdg") == 0700);
    CHECK(mode_of(dir / "state.db") == 0600);
  }
  SUBCASE("on the first write, all or nothing: a fn's nested commits are one transaction, and "
          "a failure leaves no store and no directory behind") {
    o.create = Creation::on_first_write;
    auto s = open_store("", o);
    REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    auto failed = (*s)->transact([](StateStore& t) -> Expected<std::vector<Op>> {
      TPUCTL_TRY(t.commit({CreateOp{pool_key("p"), Json::object()}}));
      return Error(ErrorKind::failure, "a later step failed");
    });
    REQUIRE(!failed);
    CHECK(failed.error().message == "a later step failed");
    CHECK(!std::filesystem::exists(tmp.path() / "xdg"));
    auto done = (*s)->transact([](StateStore& t) -> Expected<std::vector<Op>> {
      TPUCTL_TRY(t.commit({CreateOp{pool_key("p"), Json::object()}}));
      TPUCTL_TRY(t.commit({CreateOp{pool_key("q"), Json::object()}}));
      return std::vector<Op>{};
    });
    REQUIRE_MESSAGE(done, (done ? "" : done.error().message));
    CHECK((*s)->find(pool_key("p"))->has_value());
    CHECK((*s)->find(pool_key("q"))->has_value());
  }
  SUBCASE("at open") {
    o.create = Creation::at_open;
    auto s = open_store("", o);
    REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    CHECK(mode_of(dir / "state.db") == 0600);
  }
  CHECK(!std::filesystem::exists(tmp.path() / "home"));
}

TEST_CASE("state::SqliteStore on storage made read-only serves reads, refuses writes saying "
          "why, and leaves the file's mode alone") {
  TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  {
    auto s = open_at(path);
    REQUIRE(s);
    REQUIRE((*s)->create(pool_key("p"), Json::object()));
  }
  REQUIRE(::chmod(path.c_str(), 0444) == 0);
  auto s = open_at(path);
  REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
  CHECK(!(*s)->info().writable);
  CHECK((*s)->info().read_only_because == "its mode is 0444");
  CHECK((*s)->find(pool_key("p"))->has_value());
  auto refused = (*s)->create(pool_key("q"), Json::object());
  REQUIRE(!refused);
  CHECK(refused.error().reason == reason::k_read_only);
  CHECK(refused.error().message.find("is read-only (its mode is 0444)") != std::string::npos);
  CHECK(!(*s)->put_heartbeat("p", "h", Json::object(), std::chrono::seconds(5)));
  CHECK(mode_of(path) == 0444);
}

TEST_CASE("state::SqliteStore notices its file deleted or replaced under it") {
  TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  auto s = open_at(path);
  REQUIRE(s);
  REQUIRE((*s)->create(pool_key("p"), Json::object()));
  SUBCASE("replaced by another file") {
    std::filesystem::copy_file(path, path + ".copy");
    std::filesystem::rename(path + ".copy", path);
    auto r = (*s)->find(pool_key("p"));
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_store_replaced);
    CHECK(r.error().message.find("was replaced by another file") != std::string::npos);
  }
  SUBCASE("deleted") {
    std::filesystem::remove(path);
    auto r = (*s)->create(pool_key("q"), Json::object());
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_store_replaced);
    CHECK(r.error().message.find("was deleted or moved away") != std::string::npos);
  }
}

TEST_CASE("state::open_store opens sqlite URLs, and etcd ones without falling back to sqlite") {
  TempDir tmp;
  OpenOptions o;
  o.env.cwd = tmp.path().string();
  SUBCASE("a relative sqlite: path lands in the working directory") {
    o.create = Creation::at_open;
    auto s = open_store("sqlite:sub/s.db", o);
    REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    CHECK(std::filesystem::exists(tmp.path() / "sub" / "s.db"));
  }
  SUBCASE("an etcd nobody listens at is unavailable, naming the endpoint; no file appears") {
    // 127.130.0.0/16 belongs to the etcd tests; nothing listens on this address.
    auto s = open_store("etcd://127.130.255.254:23790", o);
    REQUIRE(!s);
    CHECK(s.error().kind == ErrorKind::failure);
    CHECK(s.error().reason == reason::k_unavailable);
    CHECK(s.error().message.find("http://127.130.255.254:23790") != std::string::npos);
    CHECK(std::filesystem::is_empty(tmp.path()));
  }
  SUBCASE("TLS files for a plain-http etcd URL, or a cert without its key, are usage errors") {
    o.etcd.cacert = "/ca.pem";
    auto s = open_store("etcd://127.130.255.254:23790", o);
    REQUIRE(!s);
    CHECK(s.error().kind == ErrorKind::usage);
    CHECK(s.error().message.find("etcd+https://127.130.255.254:23790") != std::string::npos);
    o.etcd.cacert.clear();
    o.etcd.cert = "/c.pem";
    auto half = open_store("etcd+https://127.130.255.254:23790", o);
    REQUIRE(!half);
    CHECK(half.error().kind == ErrorKind::usage);
  }
  SUBCASE("an unknown scheme is a usage error") {
    auto s = open_store("redis://x", o);
    REQUIRE(!s);
    CHECK(s.error().kind == ErrorKind::usage);
  }
}

TEST_CASE("state::SqliteStore's claims table itself refuses a double claim or a missing host") {
  TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  {
    auto s = open_at(path);
    REQUIRE(s);
    REQUIRE((*s)->create(pool_key("p"), Json::object()));
    REQUIRE((*s)->create(host_key("p", "h1"), Json::object()));
    REQUIRE((*s)->claim_hosts("p", {"h1"}, "qr-a"));
  }
  // Even SQL that skips tpuctl's checks cannot break the invariants.
  Raw raw(path);
  REQUIRE(raw.exec("PRAGMA foreign_keys = ON") == SQLITE_OK);
  CHECK(raw.exec("INSERT INTO claims(pool, host, owner, claimed_at, revision) "
                 "VALUES ('p', 'h1', 'qr-b', 0, 9)") == SQLITE_CONSTRAINT);
  CHECK(raw.exec("INSERT INTO claims(pool, host, owner, claimed_at, revision) "
                 "VALUES ('p', 'h9', 'qr-b', 0, 9)") == SQLITE_CONSTRAINT);
  CHECK(raw.exec("DELETE FROM records WHERE kind = 'host' AND id = 'h1'") == SQLITE_CONSTRAINT);
  CHECK(raw.text("SELECT owner FROM claims WHERE pool = 'p' AND host = 'h1'") == "qr-a");
}
