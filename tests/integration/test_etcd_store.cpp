// The etcd StateStore against a real one-member etcd: the conformance suite every backend
// passes, then what only etcd has: leases that free provisional claims and heartbeats on their
// own, watches, the transaction limits, endpoint failover and an unreachable store.
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

TEST_CASE("EtcdStore: a provisional claim is freed by its etcd lease, not only by the clock") {
  EtcdFixture f;
  // A clock frozen at the claim's time: only etcd's lease can make the claim go away.
  FakeClock frozen;
  auto s = f.open(frozen.clock());
  state::test::conformance::seed_pool(*s, "p", 2);
  REQUIRE(s->commit({ClaimOp{"p", {"h1"}, "qr-dead", std::chrono::seconds(2)}}));
  REQUIRE(s->claims("p")->size() == 1);
  CHECK(eventually([&] { return s->claims("p")->empty(); }, std::chrono::seconds(8)));
  REQUIRE(s->claim_hosts("p", {"h1"}, "qr-b"));
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

TEST_CASE("EtcdStore: a commit above etcd's transaction limit is refused whole, naming counts") {
  EtcdFixture f;
  auto s = f.open(system_clock());
  REQUIRE(s->create(pool_key("p"), Json::object()));
  std::vector<Op> hosts;
  std::vector<std::string> names;
  for (int i = 0; i < 130; ++i) {
    names.push_back("h" + std::to_string(i));
    hosts.push_back(CreateOp{host_key("p", names.back()), Json::object()});
  }
  auto big = s->commit(hosts);
  REQUIRE(!big);
  CHECK(big.error().reason == reason::k_invalid);
  CHECK(big.error().message.find("above the store's limit of 128") != std::string::npos);
  CHECK(s->list(Kind::host, "p")->records.empty());
  // In batches it fits; a 127-host claim does not (127 claim compares, the hostset and the
  // commit marker), a 126-host one does.
  for (size_t i = 0; i < hosts.size(); i += 60) {
    std::vector<Op> batch(hosts.begin() + static_cast<long>(i),
                          hosts.begin() + static_cast<long>(std::min(hosts.size(), i + 60)));
    REQUIRE(s->commit(batch));
  }
  auto too_many = s->claim_hosts("p", {names.begin(), names.begin() + 127}, "qr-big");
  REQUIRE(!too_many);
  CHECK(too_many.error().message.find("at most 125 hosts") != std::string::npos);
  CHECK(s->claims("p")->empty());
  REQUIRE(s->claim_hosts("p", {names.begin(), names.begin() + 126}, "qr-big"));
  CHECK(s->claims("p")->size() == 126);
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
