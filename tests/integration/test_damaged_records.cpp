// A damaged queued-resource record (edited by hand, by a newer tpuctl, or by a disk) on SQLite
// and on etcd, through the binary: it is left out with one warning that names it and the fix,
// every other command on the pool works, and `qr delete --force` removes it. Hosts are
// addresses nothing listens on (127.135.x.y); etcd on 127.130.0.0/16 (etcd_fixture.hpp).
#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "state/etcd_client.hpp"
#include "state/etcd_wire.hpp"
#include "tests/support/etcd_fixture.hpp"
#include "tests/support/machine.hpp"

using nlohmann::json;
using namespace tpuctl;
using tpuctl::test::EtcdCluster;
using tpuctl::test::Machine;

namespace {

EtcdCluster& one() {
  static EtcdCluster c(1);
  return c;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

// Runs the checks on a machine whose store holds `bad` (damaged by `damage` with each of
// `values` in turn) and `good`.
void check_damaged(Machine& m, const std::vector<std::string>& values,
                   const std::function<void(const std::string& value)>& damage) {
  REQUIRE(m.run({"pool", "create", "p", "--generation", "v5e", "--shape", "4x4"}).exit_code == 0);
  REQUIRE(m.run({"pool", "add-hosts", "--pool", "p", "127.135.0.[2-5]"}).exit_code == 0);
  for (const char* id : {"bad", "good"}) {
    auto r = m.run({"qr", "create", id, "--pool", "p", "--accelerator-type", "v5litepod-4",
                    "--valid-after-duration", "1h", "--async"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  }
  for (const auto& value : values) {
    CAPTURE(value);
    damage(value);
    auto listed = m.run({"qr", "list", "--pool", "p", "--format", "json"});
    REQUIRE_MESSAGE(listed.exit_code == 0, listed.err);
    json list = json::parse(listed.out);
    REQUIRE(list.size() == 1);
    CHECK(list[0]["id"] == "good");
    CHECK(count(listed.err, "queued resource 'bad' in pool 'p' cannot be read") == 1);
    CHECK(listed.err.find("'tpuctl queued-resources delete bad --force' removes it") !=
          std::string::npos);
    auto described = m.run({"pool", "describe", "--pool", "p"});
    CHECK_MESSAGE(described.exit_code == 0, described.err);
    auto other = m.run({"qr", "create", "other", "--pool", "p", "--accelerator-type", "v5litepod-4",
                        "--valid-after-duration", "1h", "--async"});
    CHECK_MESSAGE(other.exit_code == 0, other.err);
    CHECK(m.run({"qr", "delete", "other", "--pool", "p"}).exit_code == 0);
    auto refused = m.run({"qr", "delete", "bad", "--pool", "p"});
    CHECK(refused.exit_code == 1);
    CHECK(refused.err.find("--force' removes its record") != std::string::npos);
    auto forced = m.run({"qr", "delete", "bad", "--pool", "p", "--force"});
    CHECK_MESSAGE(forced.exit_code == 0, forced.err);
    auto after = m.run({"qr", "list", "--pool", "p", "--format", "json"});
    CHECK(after.exit_code == 0);
    CHECK(after.err.find("cannot be read") == std::string::npos);
    CHECK(m.run({"qr", "describe", "bad", "--pool", "p"}).exit_code == 4);
    // Again, for the next kind of damage.
    REQUIRE(m.run({"qr", "create", "bad", "--pool", "p", "--accelerator-type", "v5litepod-4",
                   "--valid-after-duration", "1h", "--async"})
                .exit_code == 0);
  }
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("damaged record on SQLite: left out with a warning, the pool works, --force removes it") {
  Machine m;
  // SQLite's schema keeps doc valid JSON: a record that is not a queued resource, or not an
  // object at all.
  check_damaged(m, {R"({"id":5,"state":"ACTIVE"})", "[1,2]"}, [&](const std::string& value) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(m.sqlite_file().c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) ==
            SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db,
                               "UPDATE records SET doc = ? WHERE kind = 'queued_resource' AND "
                               "id = 'bad'",
                               -1, &st, nullptr) == SQLITE_OK);
    sqlite3_bind_text(st, 1, value.c_str(), -1, SQLITE_TRANSIENT);
    CHECK(sqlite3_step(st) == SQLITE_DONE);
    CHECK(sqlite3_changes(db) == 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
  });
}

TEST_CASE("damaged record on etcd: left out with a warning, the pool works, --force removes it") {
  std::string prefix = tpuctl::test::unique_prefix();
  Machine m(one().url(prefix));
  check_damaged(m, {R"({"id":5,"state":"ACTIVE"})", "{truncated"}, [&](const std::string& value) {
    state::etcd::Client raw(one().client_options());
    auto r =
        raw.post("/v3/kv/put", state::etcd::put_request(prefix + "queued_resource/p/bad", value),
                 state::etcd::Retry::anywhere);
    REQUIRE(r);
  });
}
