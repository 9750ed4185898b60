// The backend-independent parts of state/store.hpp: kinds, keys, op validation and the optimistic
// transact loop (the one the etcd backend uses), driven here through two SQLite handles.
#include <doctest/doctest.h>

#include "state/sqlite_store.hpp"
#include "tests/support/helpers.hpp"

using namespace tpuctl;
using namespace tpuctl::state;

TEST_SUITE_BEGIN("state");

TEST_CASE("state::Kind names round-trip and describe keys for messages") {
  for (Kind k : all_kinds()) {
    CAPTURE(to_string(k));
    CHECK(parse_kind(to_string(k)) == k);
  }
  CHECK(all_kinds().size() == 5);
  CHECK(!parse_kind("queued resource"));
  CHECK(describe(pool_key("p")) == "pool 'p'");
  CHECK(describe(queued_resource_key("p", "q")) == "queued resource 'q' in pool 'p'");
  CHECK(describe(record_key(Kind::workload, "p", "w")) == "workload 'w' in pool 'p'");
  CHECK(parse_initiator(to_string(Initiator::service)) == Initiator::service);
  CHECK(to_string(Initiator::user) == "USER");
  CHECK(!parse_initiator("user"));
}

TEST_CASE("state::validate_op rejects malformed ops with reason invalid") {
  auto bad = [](const Op& op) {
    auto st = validate_op(op);
    REQUIRE(!st);
    CHECK(st.error().kind == ErrorKind::usage);
    CHECK(st.error().reason == reason::k_invalid);
    return st.error().message;
  };
  CHECK(validate_op(CreateOp{host_key("p", "h1"), Json::object()}));
  CHECK(bad(CreateOp{Key{Kind::pool, "p", "x"}, Json::object()}).find("pool key 'p' has id 'x'") !=
        std::string::npos);
  CHECK(bad(CreateOp{host_key("p", std::string("a\nb")), Json::object()}).find("control") !=
        std::string::npos);
  CHECK(bad(CreateOp{host_key("p", std::string(254, 'x')), Json::object()}).find("254 bytes") !=
        std::string::npos);
  CHECK(validate_op(CreateOp{host_key("p", std::string(253, 'x')), Json::object()}));
  bad(CreateOp{pool_key("p"), Json("text")});
  bad(UpdateOp{pool_key("p"), Json::object(), k_absent});
  bad(UpdateOp{pool_key("p"), Json::object(), -7});
  bad(RemoveOp{pool_key("p"), k_absent});
  CHECK(validate_op(CheckOp{pool_key("p"), k_absent}));
  bad(ClaimOp{"p", {}, "qr", std::chrono::seconds(0)});
  bad(ClaimOp{"p", {"h1"}, "", std::chrono::seconds(0)});
  bad(ClaimOp{"p", {"h1"}, "qr", std::chrono::seconds(-1)});
  CHECK(bad(ReleaseOp{"p", {"h1", "h2", "h1"}, "qr"}).find("'h1' is named twice") !=
        std::string::npos);
  CHECK(validate_op(ClaimOp{"p", {"h1"}, "drain:kernel upgrade", std::chrono::seconds(0)}));
  bad(EventOp{Event{0, 0, "p", Kind::pool, "p", "", "", "", Initiator::user, Json::object(), ""}});
  bad(EventOp{Event{0, 0, "p", Kind::pool, "p", "X", "", "", Initiator::user, Json::array(), ""}});
}

TEST_CASE("state::optimistic_transact retries a lost compare-and-swap with fresh reads") {
  tpuctl::test::TempDir tmp;
  SqliteOptions o;
  o.path = (tmp.path() / "state.db").string();
  auto a = SqliteStore::open(o);
  auto b = SqliteStore::open(o);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE((*a)->create(pool_key("p"), {{"counter", 0}}));
  TransactOptions opt;
  opt.base_backoff = std::chrono::milliseconds(1);

  SUBCASE("another process wins twice; the third attempt succeeds on its result") {
    int calls = 0;
    auto r = optimistic_transact(
        **a,
        [&](StateStore& s) -> Expected<std::vector<Op>> {
          ++calls;
          TPUCTL_TRY_ASSIGN(auto rec, s.get(pool_key("p")));
          if (calls <= 2) { // another tpuctl sneaks in between our read and our write
            auto theirs = (*b)->get(pool_key("p"));
            Json doc = theirs->doc;
            doc["counter"] = doc["counter"].get<int>() + 100;
            REQUIRE((*b)->update(pool_key("p"), doc, theirs->version));
          }
          Json doc = rec.doc;
          doc["counter"] = doc["counter"].get<int>() + 1;
          return std::vector<Op>{UpdateOp{pool_key("p"), doc, rec.version}};
        },
        opt);
    REQUIRE(r);
    CHECK(calls == 3);
    CHECK((*a)->get(pool_key("p"))->doc["counter"] == 201);
  }
  SUBCASE("it gives up after max_attempts and the error says why") {
    opt.max_attempts = 4;
    int calls = 0;
    auto r = optimistic_transact(
        **a,
        [&](StateStore& s) -> Expected<std::vector<Op>> {
          ++calls;
          TPUCTL_TRY_ASSIGN(auto rec, s.get(pool_key("p")));
          REQUIRE((*b)->update(pool_key("p"), {{"counter", calls}}, k_any_version));
          return std::vector<Op>{UpdateOp{pool_key("p"), {{"counter", -1}}, rec.version}};
        },
        opt);
    REQUIRE(!r);
    CHECK(calls == 4);
    CHECK(r.error().reason == reason::k_conflict);
    CHECK(r.error().message.find("pool 'p' was changed by another tpuctl") != std::string::npos);
    CHECK(r.error().message.find("(gave up after 4 attempts") != std::string::npos);
  }
}
