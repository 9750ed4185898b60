// The etcd StateStore against a real one-member etcd: the conformance suite every backend
// passes (2,304-host claims included), then what only etcd has: heartbeats on leases, pages
// pruned of lapsed claims, watches, claims of any size in one transaction and the limits that
// remain, endpoint failover, an unreachable store, and the upgrade of a schema-1 store.
#include <thread>

#include <doctest/doctest.h>

#include "state/etcd_store.hpp"
#include "state/location.hpp"
#include "tests/support/etcd_fixture.hpp"
#include "tests/unit/state/store_conformance.hpp"

using namespace tpuctl;
using namespace tpuctl::state;
using tpuctl::state::test::FakeClock;
using tpuctl::test::EtcdCluster;
using tpuctl::test::unique_prefix;

namespace {

// One etcd for the whole file (each store gets its own prefix).
EtcdCluster& cluster() {
  static EtcdCluster c(1);
  return c;
}

std::unique_ptr<StateStore> open_url(const std::string& url, Clock clock = system_clock(),
                                     EtcdAccess access = {}) {
  OpenOptions o;
  o.create = Creation::at_open;
  o.clock = std::move(clock);
  o.etcd = access;
  auto s = open_store(url, o);
  REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
  return std::move(*s);
}

class EtcdFixture : public state::test::StoreFixture {
public:
  EtcdFixture() : m_url(cluster().url(unique_prefix())) {}
  std::unique_ptr<StateStore> open(Clock clock) override { return open_url(m_url, clock); }
  const std::string& url() const { return m_url; }

private:
  std::string m_url;
};

// Polls `pred` every 100 ms for up to `timeout`.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("EtcdStore: the StateStore conformance suite") {
  state::test::run_store_conformance([] { return std::make_unique<EtcdFixture>(); });
}

TEST_CASE("EtcdStore: info names the backend and the canonical location") {
  EtcdFixture f;
  auto s = f.open(system_clock());
  auto info = s->info();
  CHECK(info.backend == "etcd");
  CHECK(info.location == f.url());
  CHECK(info.schema_version == k_etcd_schema_version);
  CHECK(info.writable);
}

TEST_CASE("EtcdStore: a lapsed provisional claim is pruned when its page is next written") {
  EtcdFixture f;
  FakeClock clock;
  auto s = f.open(clock.clock());
  state::test::conformance::seed_pool(*s, "p", 2);
  REQUIRE(s->commit({ClaimOp{"p", {"h1"}, "qr-dead", std::chrono::seconds(2)}}));
  REQUIRE(s->claims("p")->size() == 1);
  clock.advance(std::chrono::seconds(3));
  CHECK(s->claims("p")->empty());
  // The next write to the page drops it from the stored value too.
  REQUIRE(s->claim_hosts("p", {"h1"}, "qr-b"));
  auto* etcd_store = dynamic_cast<EtcdStore*>(s.get());
  REQUIRE(etcd_store);
  etcd::Client raw(cluster().client_options());
  auto reply =
      raw.post("/v3/kv/range", etcd::range_request(etcd_store->keys().claim_page_of("p", "h1")),
               etcd::Retry::anywhere);
  REQUIRE(reply);
  auto kvs = etcd::parse_kvs(*reply);
  REQUIRE(kvs);
  REQUIRE(kvs->size() == 1);
  CHECK((*kvs)[0].value.find("qr-dead") == std::string::npos);
  CHECK(s->claims("p")->at(0).owner == "qr-b");
}

TEST_CASE("EtcdStore: a heartbeat vanishes when its lease expires") {
  EtcdFixture f;
  FakeClock frozen;
  auto s = f.open(frozen.clock());
  state::test::conformance::seed_pool(*s, "p", 1);
  REQUIRE(s->put_heartbeat("p", "h1", {{"ok", true}}, std::chrono::seconds(2)));
  REQUIRE(s->live_heartbeats("p")->size() == 1);
  CHECK(eventually([&] { return s->live_heartbeats("p")->empty(); }, std::chrono::seconds(8)));
}

TEST_CASE("EtcdStore: wait_for_change wakes on a change to its pool and times out otherwise") {
  EtcdFixture f;
  auto a = f.open(system_clock());
  state::test::conformance::seed_pool(*a, "p", 1);
  state::test::conformance::seed_pool(*a, "other", 1);
  int64_t rev = a->list(Kind::pool, "")->revision;

  SUBCASE("nothing happens: the timeout passes and after_revision comes back") {
    auto t0 = std::chrono::steady_clock::now();
    auto r = a->wait_for_change("p", rev, std::chrono::milliseconds(600));
    REQUIRE(r);
    CHECK(*r == rev);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(500));
  }
  SUBCASE("a heartbeat and a change to another pool do not wake it; a claim in it does") {
    std::thread writer([url = f.url()] {
      auto b = open_url(url);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      REQUIRE(b->put_heartbeat("p", "h1", Json::object(), std::chrono::seconds(10)));
      REQUIRE(b->claim_hosts("other", {"h1"}, "x"));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      REQUIRE(b->claim_hosts("p", {"h1"}, "qr-a"));
    });
    auto r = a->wait_for_change("p", rev, std::chrono::seconds(10));
    writer.join();
    REQUIRE(r);
    auto claim = a->claims("p");
    REQUIRE(claim->size() == 1);
    CHECK(*r == claim->at(0).revision);
  }
  SUBCASE("a change already made after after_revision returns at once") {
    REQUIRE(a->claim_hosts("p", {"h1"}, "qr-a"));
    auto r = a->wait_for_change("", rev, std::chrono::seconds(5));
    REQUIRE(r);
    CHECK(*r > rev);
  }
}

TEST_CASE("EtcdStore: claims and host changes of any size are one transaction") {
  EtcdFixture f;
  auto s = f.open(system_clock());
  REQUIRE(s->create(pool_key("p"), Json::object()));
  std::vector<Op> hosts;
  std::vector<std::string> names;
  for (int i = 0; i < 600; ++i) {
    names.push_back("h" + std::to_string(i));
    hosts.push_back(CreateOp{host_key("p", names.back()), {{"addr", "10.0." + std::to_string(i)}}});
  }
  auto added = s->commit(hosts); // 600 creates: one txn of 16 host pages
  REQUIRE_MESSAGE(added, (added ? "" : added.error().message));
  auto listed = s->list(Kind::host, "p");
  REQUIRE(listed->records.size() == 600);
  for (const auto& r : listed->records) {
    CHECK(r.version == added->revision);
    CHECK(r.create_revision == added->revision);
  }
  auto big = s->claim_hosts("p", {names.begin(), names.begin() + 500}, "qr-big");
  REQUIRE_MESSAGE(big, (big ? "" : big.error().message));
  auto overlap = s->claim_hosts("p", {names.begin() + 499, names.end()}, "qr-other");
  REQUIRE(!overlap);
  CHECK(overlap.error().reason == reason::k_hosts_busy);
  CHECK(overlap.error().message.find("'h499' is claimed by 'qr-big'") != std::string::npos);
  CHECK(s->claims_of("p", "qr-other")->empty());
  REQUIRE(s->claim_hosts("p", {names.begin() + 500, names.end()}, "qr-other"));
  auto claims = s->claims("p");
  REQUIRE(claims->size() == 600);
  // A host the claims left alone keeps its version: only its page was rewritten.
  CHECK(s->get(host_key("p", "h3"))->version == added->revision);
  REQUIRE(s->release_all("p", "qr-big"));
  CHECK(s->claims("p")->size() == 100);
}

TEST_CASE("EtcdStore: a commit above etcd's request size is refused whole, naming its size") {
  EtcdFixture f;
  auto s = f.open(system_clock());
  REQUIRE(s->create(pool_key("p"), Json::object()));
  std::vector<Op> hosts;
  for (int i = 0; i < 200; ++i) {
    hosts.push_back(
        CreateOp{host_key("p", "h" + std::to_string(i)),
                 {{"blob", std::string(10000, static_cast<char>('a' + i % 26))}, {"i", i}}});
  }
  auto big = s->commit(hosts); // ~2 MB of distinct records
  REQUIRE(!big);
  CHECK(big.error().reason == reason::k_invalid);
  CHECK(big.error().message.find("above the store's limit of 1572864") != std::string::npos);
  CHECK(s->list(Kind::host, "p")->records.empty());
  // Too many one-key records at once: the op limit, named.
  std::vector<Op> qrs;
  for (int i = 0; i < 130; ++i) {
    qrs.push_back(CreateOp{queued_resource_key("p", "q" + std::to_string(i)), Json::object()});
  }
  auto many = s->commit(qrs);
  REQUIRE(!many);
  CHECK(many.error().message.find("above the store's limit of 128") != std::string::npos);
  CHECK(s->list(Kind::queued_resource, "p")->records.empty());
}

TEST_CASE("EtcdStore: a dead endpoint is skipped; no endpoint reachable names every one") {
  EtcdFixture f;
  std::string live = cluster().url(unique_prefix()).substr(std::string("etcd://").size());
  SUBCASE("a refused first endpoint fails over to the next") {
    auto s = open_url("etcd://127.130.255.254:23790," + live);
    REQUIRE(s->create(pool_key("p"), Json::object()));
    CHECK(s->get(pool_key("p")));
  }
  SUBCASE("nothing listens: k_unavailable naming both endpoints, no fallback") {
    OpenOptions o;
    auto s = open_store("etcd://127.130.255.254:23790,127.130.255.253:23790/x/", o);
    REQUIRE(!s);
    CHECK(s.error().reason == reason::k_unavailable);
    CHECK(s.error().kind == ErrorKind::failure);
    CHECK(s.error().message.find("http://127.130.255.254:23790") != std::string::npos);
    CHECK(s.error().message.find("http://127.130.255.253:23790") != std::string::npos);
  }
}

TEST_CASE("EtcdStore: a schema-1 store is moved to pages when opened, keeping every version") {
  // Schema 1 as an earlier tpuctl wrote it: one key per host and per claim, a hostset key.
  std::string prefix = unique_prefix();
  etcd::Client raw(cluster().client_options());
  auto put = [&](const std::string& key, const std::string& value) {
    auto r = raw.post("/v3/kv/put", etcd::put_request(prefix + key, value), etcd::Retry::anywhere);
    REQUIRE(r);
    return etcd::header_revision(*r);
  };
  put("meta/schema", R"({"schema":1})");
  put("pool/p", R"({"generation":"v5p"})");
  int64_t h1 = put("host/p/h1", R"({"addr":"10.0.0.1"})");
  put("host/p/h2", R"({"addr":"10.0.0.2"})");
  int64_t h2 = put("host/p/h2", R"({"addr":"10.0.0.22"})");
  put("host/p/h3", R"({"addr":"10.0.0.3"})");
  put("hostset/p", "x");
  put("queued_resource/p/q", R"({"state":"ACTIVE"})");
  int64_t c1 = put("claim/p/h1", R"({"owner":"q","claimed_at_ms":5,"expires_at_ms":0})");
  put("claim/p/h3", R"({"owner":"gone","claimed_at_ms":5,"expires_at_ms":6})"); // lapsed
  put("event/p/abc.0000", R"({"time_ms":7,"type":"CREATED","subject":"q"})");

  auto s = open_url(cluster().url(prefix));
  CHECK(s->info().schema_version == 2);
  auto hosts = s->list(Kind::host, "p");
  REQUIRE(hosts);
  REQUIRE(hosts->records.size() == 3);
  CHECK(hosts->records[0].doc["addr"] == "10.0.0.1");
  CHECK(hosts->records[0].version == h1);
  CHECK(hosts->records[0].create_revision == h1);
  CHECK(hosts->records[1].doc["addr"] == "10.0.0.22");
  CHECK(hosts->records[1].version == h2);
  CHECK(hosts->records[1].create_revision < h2);
  auto claims = s->claims("p");
  REQUIRE(claims->size() == 1);
  CHECK(claims->at(0).host == "h1");
  CHECK(claims->at(0).owner == "q");
  CHECK(claims->at(0).revision == c1);
  CHECK(s->events({})->at(0).type == "CREATED");
  CHECK(s->get(queued_resource_key("p", "q"))->doc["state"] == "ACTIVE");
  // Nothing of schema 1 is left, and the store works as any other.
  auto old = raw.post("/v3/kv/range",
                      etcd::range_request(prefix + "host/", {etcd::prefix_end(prefix + "host/")}),
                      etcd::Retry::anywhere);
  REQUIRE(old);
  CHECK(etcd::parse_kvs(*old)->empty());
  auto busy = s->claim_hosts("p", {"h1"}, "other");
  REQUIRE(!busy);
  CHECK(busy.error().reason == reason::k_hosts_busy);
  REQUIRE(s->claim_hosts("p", {"h2", "h3"}, "other"));
  // A second open finds nothing more to move.
  auto again = open_url(cluster().url(prefix));
  CHECK(again->claims("p")->size() == 3);
}
