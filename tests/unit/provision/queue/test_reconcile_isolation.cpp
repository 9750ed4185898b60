// reconcile_pool when the store refuses part of a pass for good (too large to record): the
// request whose change cannot be recorded fails on its own, or is left out when even that
// cannot be recorded, and every other request still moves. A real SQLite store behind a
// decorator that refuses chosen commits as etcd refuses a transaction above its limits.
#include <doctest/doctest.h>

#include "provision/pool/pools.hpp"
#include "provision/queue/reconcile.hpp"
#include "provision/slice/qr_ops.hpp"
#include "state/location.hpp"
#include "tests/support/helpers.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

namespace {

// Forwards everything to `inner`; commit() refuses, with reason k_invalid, what `refuse` picks.
class RefusingStore final : public state::StateStore {
public:
  using Pick = std::function<bool(const std::vector<state::Op>&)>;
  RefusingStore(state::StateStore& inner, Pick refuse,
                std::string_view why = state::reason::k_invalid)
      : m_inner(inner), m_refuse(std::move(refuse)), m_why(why) {}

  state::StoreInfo info() const override { return m_inner.info(); }
  Status ping() override { return m_inner.ping(); }
  Expected<std::optional<state::Record>> find(const state::Key& k) override {
    return m_inner.find(k);
  }
  Expected<state::Listing> list(state::Kind kind, const std::string& pool) override {
    return m_inner.list(kind, pool);
  }
  Expected<state::PoolSnapshot> snapshot(const std::string& pool) override {
    return m_inner.snapshot(pool);
  }
  Expected<std::vector<state::Claim>> claims(const std::string& pool) override {
    return m_inner.claims(pool);
  }
  Expected<std::vector<state::Event>> events(const state::EventQuery& q) override {
    return m_inner.events(q);
  }
  Expected<std::vector<state::Heartbeat>> live_heartbeats(const std::string& pool) override {
    return m_inner.live_heartbeats(pool);
  }
  Expected<int64_t> wait_for_change(const std::string& pool, int64_t after,
                                    std::chrono::milliseconds timeout) override {
    return m_inner.wait_for_change(pool, after, timeout);
  }
  Expected<state::CommitResult> commit(const std::vector<state::Op>& ops) override {
    if (m_refuse(ops)) {
      ++refused;
      return Error(ErrorKind::usage,
                   "this change is 2000000 bytes as one etcd transaction, above the store's "
                   "limit of 1572864",
                   std::string(m_why));
    }
    return m_inner.commit(ops);
  }
  Status put_heartbeat(const std::string& pool, const std::string& host, const state::Json& p,
                       std::chrono::seconds ttl) override {
    return m_inner.put_heartbeat(pool, host, p, ttl);
  }
  int refused = 0;

private:
  state::StateStore& m_inner;
  Pick m_refuse;
  std::string m_why;
};

// The largest ClaimOp in `ops` (0 when none).
size_t claim_size(const std::vector<state::Op>& ops) {
  size_t n = 0;
  for (const auto& op : ops) {
    if (auto* c = std::get_if<state::ClaimOp>(&op)) {
      n = std::max(n, c->hosts.size());
    }
  }
  return n;
}

// Whether `ops` write request `id`'s record.
bool writes(const std::vector<state::Op>& ops, const std::string& id) {
  for (const auto& op : ops) {
    if (auto* u = std::get_if<state::UpdateOp>(&op); u && u->key.id == id) {
      return true;
    }
  }
  return false;
}

struct Fixture {
  test::TempDir dir;
  std::unique_ptr<state::StateStore> store;
  Fixture() {
    state::OpenOptions o;
    o.create = state::Creation::at_open;
    auto s = state::open_store("sqlite:" + (dir.path() / "state.db").string(), o);
    REQUIRE(s);
    store = std::move(*s);
    auto layout = make_pool_layout("v5p", 4, "4x4x4"); // 16 hosts of 4 chips
    REQUIRE(layout);
    REQUIRE(create_pool(*store, "p", *layout));
    std::vector<util::HostSpec> specs;
    for (int i = 0; i < 16; ++i) {
      specs.push_back({"", "10.0.0." + std::to_string(i + 1), 0});
    }
    REQUIRE(add_hosts(*store, "p", specs, {}));
  }
  void request(const std::string& id, const std::string& type) {
    CreateRequest r;
    r.id = id;
    r.pool = "p";
    r.accelerator_type = type;
    auto c = create_queued_resource(*store, r, state::system_clock(), false);
    REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
  }
  QueuedResource get(const std::string& id) {
    auto q = load_queued_resource(*store, "p", id);
    REQUIRE(q);
    return *q;
  }
};

} // namespace

TEST_CASE("reconcile: a placement the store refuses fails that request alone, hosts freed") {
  Fixture f;
  f.request("big", "v5p-64");  // 8 hosts
  f.request("small", "v5p-8"); // 1 host
  RefusingStore refusing(*f.store, [](const auto& ops) { return claim_size(ops) > 4; });
  auto r = reconcile_pool(refusing, "p", state::system_clock());
  REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  CHECK(refusing.refused >= 2); // the whole pass, then big's own placement
  auto big = f.get("big");
  CHECK(big.state == QrState::failed);
  REQUIRE(big.error);
  CHECK(big.error->code == k_state_store_refused);
  CHECK(big.error->message.find("above the store's limit of 1572864") != std::string::npos);
  CHECK(big.nodes.empty());
  CHECK(f.get("small").state == QrState::provisioning);
  auto claims = f.store->claims("p");
  REQUIRE(claims->size() == 1);
  CHECK(claims->at(0).owner == "small");
  // The next pass has nothing left to refuse.
  refusing.refused = 0;
  REQUIRE(reconcile_pool(refusing, "p", state::system_clock()));
  CHECK(refusing.refused == 0);
}

TEST_CASE("reconcile: a request none of whose changes can be recorded is left out; others move") {
  Fixture f;
  f.request("stuck", "v5p-16"); // 2 hosts
  f.request("other", "v5p-16");
  RefusingStore refusing(*f.store, [](const auto& ops) { return writes(ops, "stuck"); });
  auto r = reconcile_pool(refusing, "p", state::system_clock());
  REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  CHECK(f.get("stuck").state == QrState::accepted); // nothing about it could be written
  CHECK(f.get("other").state == QrState::provisioning);
  CHECK(f.store->claims_of("p", "other")->size() == 2);
  CHECK(f.store->claims_of("p", "stuck")->empty());
}

TEST_CASE("reconcile: a store that is unavailable is an error; no request is failed for it") {
  Fixture f;
  f.request("a", "v5p-8");
  RefusingStore down(
      *f.store, [](const auto& ops) { return claim_size(ops) > 0; }, state::reason::k_unavailable);
  auto r = reconcile_pool(down, "p", state::system_clock());
  REQUIRE(!r);
  CHECK(r.error().reason == state::reason::k_unavailable);
  CHECK(f.get("a").state == QrState::accepted);
  CHECK(f.store->claims("p")->empty());
}

TEST_CASE("delete --force removes a request whose record the store will not rewrite") {
  Fixture f;
  f.request("held", "v5p-16");
  REQUIRE(reconcile_pool(*f.store, "p", state::system_clock()));
  REQUIRE(f.get("held").state == QrState::provisioning);
  RefusingStore refusing(*f.store, [](const auto& ops) { return writes(ops, "held"); });
  auto plain = begin_delete(refusing, "p", "held", false, state::system_clock(), true);
  REQUIRE(!plain); // without --force: it holds hosts
  auto forced = begin_delete(refusing, "p", "held", true, state::system_clock(), true);
  REQUIRE_MESSAGE(forced, (forced ? "" : forced.error().message));
  CHECK(!forced->has_value()); // gone at once, not DELETING
  CHECK(!f.store->find(state::queued_resource_key("p", "held"))->has_value());
  CHECK(f.store->claims("p")->empty());
  auto events = f.store->events(state::EventQuery{"p", std::nullopt, "held", 0, 0});
  REQUIRE(!events->empty());
  CHECK(events->back().detail["reason"].get<std::string>().find("removed at once") !=
        std::string::npos);
}
