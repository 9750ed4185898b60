// The StateStore conformance suite: the behaviour every backend must show, written against the
// interface only. A backend's test file calls run_store_conformance(factory) from one TEST_CASE;
// each behaviour is a SUBCASE, so doctest runs each on a fresh store. The etcd backend runs the
// same suite with its own fixture (a fresh key prefix per store).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "state/store.hpp"
#include "tests/support/pod_hosts.hpp"

namespace tpuctl::state::test {

// A clock that moves only when told; copies share the time.
class FakeClock {
public:
  FakeClock()
      : m_now(std::make_shared<std::chrono::system_clock::time_point>(
            std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000)))) {}
  Clock clock() const {
    auto now = m_now;
    return [now] { return *now; };
  }
  void advance(std::chrono::milliseconds d) { *m_now += d; }
  int64_t now_ms() const { return to_unix_ms(*m_now); }

private:
  std::shared_ptr<std::chrono::system_clock::time_point> m_now;
};

// One empty store per fixture; open() gives further handles on the same data (as a second
// tpuctl process would have), all driven by `clock`.
class StoreFixture {
public:
  virtual ~StoreFixture() = default;
  virtual std::unique_ptr<StateStore> open(Clock clock) = 0;
};
using FixtureFactory = std::function<std::unique_ptr<StoreFixture>()>;

namespace conformance {

inline std::vector<std::string> ids(const std::vector<Record>& records) {
  std::vector<std::string> out;
  for (const auto& r : records) {
    out.push_back(r.key.kind == Kind::pool ? r.key.pool : r.key.id);
  }
  return out;
}

inline std::vector<std::string> claimed_hosts(StateStore& s, const std::string& pool) {
  auto c = s.claims(pool);
  REQUIRE(c);
  std::vector<std::string> out;
  for (const auto& claim : *c) {
    out.push_back(claim.host + "=" + claim.owner);
  }
  return out;
}

// A pool "p" with hosts h1..h4.
inline void seed_pool(StateStore& s, const std::string& pool = "p", int hosts = 4) {
  REQUIRE(s.create(pool_key(pool), {{"accelerator", "v5p-16"}}));
  for (int i = 1; i <= hosts; ++i) {
    std::string h = "h" + std::to_string(i);
    REQUIRE(s.create(host_key(pool, h), {{"addr", "10.0.0." + std::to_string(i)}}));
  }
}

inline void records(StateStore& s) {
  SUBCASE("create then get returns the document and a positive version") {
    auto c = s.create(pool_key("p"), {{"accelerator", "v5p-16"}});
    REQUIRE(c);
    auto r = s.get(pool_key("p"));
    REQUIRE(r);
    CHECK(r->doc["accelerator"] == "v5p-16");
    CHECK(r->version == c->revision);
    CHECK(r->create_revision == c->revision);
    CHECK(r->version > 0);
  }
  SUBCASE("create of an existing key fails already_exists and leaves the record alone") {
    REQUIRE(s.create(pool_key("p"), {{"n", 1}}));
    auto again = s.create(pool_key("p"), {{"n", 2}});
    REQUIRE(!again);
    CHECK(again.error().reason == reason::k_already_exists);
    CHECK(again.error().message == "pool 'p' already exists");
    CHECK(s.get(pool_key("p"))->doc["n"] == 1);
  }
  SUBCASE("get of a missing key is not_found naming it; find gives nullopt") {
    auto r = s.get(queued_resource_key("p", "qr-1"));
    REQUIRE(!r);
    CHECK(r.error().kind == ErrorKind::not_found);
    CHECK(r.error().reason == reason::k_not_found);
    CHECK(r.error().message == "queued resource 'qr-1' in pool 'p' does not exist");
    auto f = s.find(pool_key("nope"));
    REQUIRE(f);
    CHECK(!f->has_value());
  }
  SUBCASE("a record in a pool that does not exist is refused") {
    auto r = s.create(host_key("ghost", "h1"), {{"addr", "10.0.0.1"}});
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_not_found);
    CHECK(r.error().message.find("pool 'ghost' does not exist") != std::string::npos);
  }
  SUBCASE("update with the version read succeeds and gives a newer version") {
    REQUIRE(s.create(pool_key("p"), {{"n", 1}}));
    auto r = s.get(pool_key("p"));
    auto u = s.update(pool_key("p"), {{"n", 2}}, r->version);
    REQUIRE(u);
    auto after = s.get(pool_key("p"));
    CHECK(after->doc["n"] == 2);
    CHECK(after->version == u->revision);
    CHECK(after->version > r->version);
    CHECK(after->create_revision == r->create_revision);
  }
  SUBCASE("update with a stale version fails conflict and changes nothing") {
    REQUIRE(s.create(pool_key("p"), {{"n", 1}}));
    int64_t v1 = s.get(pool_key("p"))->version;
    REQUIRE(s.update(pool_key("p"), {{"n", 2}}, v1));
    auto stale = s.update(pool_key("p"), {{"n", 3}}, v1);
    REQUIRE(!stale);
    CHECK(stale.error().reason == reason::k_conflict);
    CHECK(stale.error().message.find("pool 'p' was changed by another tpuctl") !=
          std::string::npos);
    CHECK(s.get(pool_key("p"))->doc["n"] == 2);
  }
  SUBCASE("update of a missing record is not_found; k_any_version overwrites") {
    auto u = s.update(pool_key("p"), {{"n", 1}}, 5);
    REQUIRE(!u);
    CHECK(u.error().reason == reason::k_not_found);
    REQUIRE(s.create(pool_key("p"), {{"n", 1}}));
    REQUIRE(s.update(pool_key("p"), {{"n", 9}}, k_any_version));
    CHECK(s.get(pool_key("p"))->doc["n"] == 9);
  }
  SUBCASE("remove with a wrong version fails conflict; with the right one it removes") {
    seed_pool(s, "p", 1);
    auto qr = queued_resource_key("p", "qr-1");
    REQUIRE(s.create(qr, {{"state", "ACCEPTED"}}));
    int64_t v = s.get(qr)->version;
    auto wrong = s.remove(qr, v + 100);
    REQUIRE(!wrong);
    CHECK(wrong.error().reason == reason::k_conflict);
    CHECK(s.find(qr)->has_value());
    REQUIRE(s.remove(qr, v));
    CHECK(!s.find(qr)->has_value());
    auto again = s.remove(qr, v);
    REQUIRE(!again);
    CHECK(again.error().reason == reason::k_not_found);
  }
  SUBCASE("a document must be a JSON object and keys must be clean names") {
    auto arr = s.create(pool_key("p"), Json::array({1, 2}));
    REQUIRE(!arr);
    CHECK(arr.error().kind == ErrorKind::usage);
    CHECK(arr.error().reason == reason::k_invalid);
    auto slash = s.create(pool_key("a/b"), {{"n", 1}});
    REQUIRE(!slash);
    CHECK(slash.error().reason == reason::k_invalid);
    CHECK(slash.error().message.find("'a/b'") != std::string::npos);
    auto empty = s.create(host_key("p", ""), {{"n", 1}});
    REQUIRE(!empty);
    CHECK(empty.error().reason == reason::k_invalid);
  }
  SUBCASE("invalid UTF-8 in a document is stored with replacement characters, not thrown") {
    REQUIRE(s.create(pool_key("p"), {{"motd", std::string("caf\xe9")}}));
    CHECK(s.get(pool_key("p"))->doc["motd"] == "caf\xef\xbf\xbd");
  }
  SUBCASE("every kind, including cluster and workload, is stored and listed apart") {
    seed_pool(s, "p", 2);
    REQUIRE(s.create(record_key(Kind::cluster, "p", "c1"), {{"name", "c1"}}));
    REQUIRE(s.create(record_key(Kind::workload, "p", "w1"), {{"cluster", "c1"}}));
    REQUIRE(s.create(queued_resource_key("p", "h1"), {{"same id as a host", true}}));
    CHECK(ids(s.list(Kind::cluster, "p")->records) == std::vector<std::string>{"c1"});
    CHECK(ids(s.list(Kind::workload, "p")->records) == std::vector<std::string>{"w1"});
    CHECK(ids(s.list(Kind::host, "p")->records) == std::vector<std::string>{"h1", "h2"});
    CHECK(ids(s.list(Kind::queued_resource, "p")->records) == std::vector<std::string>{"h1"});
  }
}

inline void commits(StateStore& s) {
  SUBCASE("a commit applies every op or none") {
    seed_pool(s, "p", 1);
    int64_t pool_v = s.get(pool_key("p"))->version;
    REQUIRE(s.update(pool_key("p"), {{"n", 1}}, pool_v));
    int64_t before = s.list(Kind::pool, "")->revision;
    auto r = s.commit({
        CreateOp{queued_resource_key("p", "qr-1"), {{"state", "ACCEPTED"}}},
        ClaimOp{"p", {"h1"}, "qr-1", std::chrono::seconds(0)},
        EventOp{Event{0, 0, "p", Kind::queued_resource, "qr-1", "CREATED", "", "ACCEPTED",
                      Initiator::user, Json::object(), ""}},
        UpdateOp{pool_key("p"), {{"n", 2}}, pool_v}, // stale: the whole commit fails
    });
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_conflict);
    CHECK(!s.find(queued_resource_key("p", "qr-1"))->has_value());
    CHECK(claimed_hosts(s, "p").empty());
    CHECK(s.events({})->empty());
    CHECK(s.list(Kind::pool, "")->revision == before);
  }
  SUBCASE("every record written by one commit gets the commit's revision; revisions grow") {
    seed_pool(s, "p", 2);
    auto a = s.commit({CreateOp{queued_resource_key("p", "a"), {{"n", 1}}},
                       CreateOp{queued_resource_key("p", "b"), {{"n", 1}}}});
    REQUIRE(a);
    CHECK(s.get(queued_resource_key("p", "a"))->version == a->revision);
    CHECK(s.get(queued_resource_key("p", "b"))->version == a->revision);
    auto b = s.update(queued_resource_key("p", "a"), {{"n", 2}}, a->revision);
    REQUIRE(b);
    CHECK(b->revision > a->revision);
    CHECK(s.get(queued_resource_key("p", "b"))->version == a->revision);
    CHECK(s.list(Kind::queued_resource, "p")->revision >= b->revision);
  }
  SUBCASE("CheckOp guards a commit without writing") {
    seed_pool(s, "p", 1);
    int64_t v = s.get(pool_key("p"))->version;
    auto ok_check =
        s.commit({CheckOp{pool_key("p"), v}, CheckOp{queued_resource_key("p", "q"), k_absent},
                  CreateOp{queued_resource_key("p", "q"), {{"n", 1}}}});
    REQUIRE(ok_check);
    int64_t pool_v = s.get(pool_key("p"))->version;
    CHECK(pool_v == v); // a check does not bump the version
    auto absent = s.commit({CheckOp{queued_resource_key("p", "q"), k_absent},
                            CreateOp{queued_resource_key("p", "r"), {{"n", 1}}}});
    REQUIRE(!absent);
    CHECK(absent.error().reason == reason::k_conflict);
    CHECK(!s.find(queued_resource_key("p", "r"))->has_value());
    auto missing = s.commit({CheckOp{queued_resource_key("p", "zz"), k_any_version}});
    REQUIRE(!missing);
    CHECK(missing.error().reason == reason::k_not_found);
  }
  SUBCASE("list orders by pool then id and reads every pool when the pool is empty") {
    seed_pool(s, "pb", 2);
    seed_pool(s, "pa", 1);
    CHECK(ids(s.list(Kind::pool, "")->records) == std::vector<std::string>{"pa", "pb"});
    CHECK(ids(s.list(Kind::pool, "pb")->records) == std::vector<std::string>{"pb"});
    auto hosts = s.list(Kind::host, "")->records;
    REQUIRE(hosts.size() == 3);
    CHECK(hosts[0].key == host_key("pa", "h1"));
    CHECK(hosts[1].key == host_key("pb", "h1"));
    CHECK(hosts[2].key == host_key("pb", "h2"));
  }
  SUBCASE("snapshot returns the pool, its records and live claims; a missing pool is not_found") {
    seed_pool(s, "p", 3);
    seed_pool(s, "other", 1);
    REQUIRE(s.create(queued_resource_key("p", "qr-1"), {{"state", "ACTIVE"}}));
    REQUIRE(s.claim_hosts("p", {"h2"}, "qr-1"));
    auto snap = s.snapshot("p");
    REQUIRE(snap);
    CHECK(snap->pool.key == pool_key("p"));
    CHECK(snap->records.size() == 4); // 3 hosts + 1 queued resource, nothing from "other"
    REQUIRE(snap->claims.size() == 1);
    CHECK(snap->claims[0].host == "h2");
    CHECK(snap->claims[0].owner == "qr-1");
    CHECK(snap->revision >= snap->claims[0].revision);
    auto none = s.snapshot("nope");
    REQUIRE(!none);
    CHECK(none.error().kind == ErrorKind::not_found);
  }
  SUBCASE("an empty commit succeeds and writes nothing") {
    seed_pool(s, "p", 1);
    int64_t rev = s.list(Kind::pool, "")->revision;
    auto r = s.commit({});
    REQUIRE(r);
    CHECK(r->revision == rev);
  }
}

inline void claims(StateStore& s, FakeClock& clock) {
  seed_pool(s, "p", 4);
  SUBCASE("claiming free hosts records owner, time and revision") {
    auto r = s.claim_hosts("p", {"h1", "h2"}, "qr-a");
    REQUIRE(r);
    auto c = s.claims("p");
    REQUIRE(c->size() == 2);
    CHECK((*c)[0].host == "h1");
    CHECK((*c)[0].owner == "qr-a");
    CHECK((*c)[0].claimed_at_ms == clock.now_ms());
    CHECK((*c)[0].expires_at_ms == 0);
    CHECK((*c)[0].revision == r->revision);
  }
  SUBCASE("one busy host makes the whole claim fail, naming each busy host and its owner") {
    REQUIRE(s.claim_hosts("p", {"h1", "h2"}, "qr-a"));
    REQUIRE(s.claim_hosts("p", {"h4"}, "drain:maintenance"));
    auto r = s.claim_hosts("p", {"h2", "h3", "h4"}, "qr-b");
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_hosts_busy);
    CHECK(r.error().kind == ErrorKind::capacity);
    CHECK(r.error().message == "cannot claim hosts in pool 'p' for 'qr-b': 'h2' is claimed by "
                               "'qr-a', 'h4' is claimed by 'drain:maintenance'");
    CHECK(claimed_hosts(s, "p") ==
          std::vector<std::string>{"h1=qr-a", "h2=qr-a", "h4=drain:maintenance"});
  }
  SUBCASE("claiming a host twice for the same owner is also refused") {
    REQUIRE(s.claim_hosts("p", {"h1"}, "qr-a"));
    auto r = s.claim_hosts("p", {"h1"}, "qr-a");
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_hosts_busy);
  }
  SUBCASE("claiming a host with no host record is not_found naming every missing host") {
    auto r = s.claim_hosts("p", {"h1", "h8", "h9"}, "qr-a");
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_not_found);
    CHECK(r.error().message.find("'h8', 'h9'") != std::string::npos);
    CHECK(claimed_hosts(s, "p").empty());
  }
  SUBCASE("a host named twice in one claim is invalid") {
    auto r = s.claim_hosts("p", {"h1", "h1"}, "qr-a");
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_invalid);
  }
  SUBCASE("release frees only the owner's own claims, all or none") {
    REQUIRE(s.claim_hosts("p", {"h1", "h2"}, "qr-a"));
    REQUIRE(s.claim_hosts("p", {"h3"}, "qr-b"));
    auto theirs = s.release_hosts("p", {"h1"}, "qr-b");
    REQUIRE(!theirs);
    CHECK(theirs.error().reason == reason::k_not_owner);
    CHECK(theirs.error().message.find("'h1' is claimed by 'qr-a'") != std::string::npos);
    auto partly = s.release_hosts("p", {"h1", "h4"}, "qr-a");
    REQUIRE(!partly);
    CHECK(partly.error().reason == reason::k_not_owner);
    CHECK(partly.error().message.find("'h4' is not claimed") != std::string::npos);
    CHECK(claimed_hosts(s, "p") == std::vector<std::string>{"h1=qr-a", "h2=qr-a", "h3=qr-b"});
    REQUIRE(s.release_hosts("p", {"h1"}, "qr-a"));
    CHECK(claimed_hosts(s, "p") == std::vector<std::string>{"h2=qr-a", "h3=qr-b"});
  }
  SUBCASE("claims_of and release_all act on one owner only") {
    REQUIRE(s.claim_hosts("p", {"h1", "h3"}, "qr-a"));
    REQUIRE(s.claim_hosts("p", {"h2"}, "qr-b"));
    auto mine = s.claims_of("p", "qr-a");
    REQUIRE(mine->size() == 2);
    CHECK((*mine)[1].host == "h3");
    REQUIRE(s.release_all("p", "qr-a"));
    CHECK(claimed_hosts(s, "p") == std::vector<std::string>{"h2=qr-b"});
    CHECK(s.release_all("p", "qr-a")); // nothing left: fine
  }
  SUBCASE("a claimed host cannot be removed until its claim is released in the same commit") {
    REQUIRE(s.claim_hosts("p", {"h1"}, "drain:retire"));
    int64_t v = s.get(host_key("p", "h1"))->version;
    auto busy = s.remove(host_key("p", "h1"), v);
    REQUIRE(!busy);
    CHECK(busy.error().reason == reason::k_hosts_busy);
    CHECK(busy.error().message.find("'h1' is claimed by 'drain:retire'") != std::string::npos);
    REQUIRE(s.commit({ReleaseOp{"p", {"h1"}, "drain:retire"}, RemoveOp{host_key("p", "h1"), v}}));
    CHECK(!s.find(host_key("p", "h1"))->has_value());
    CHECK(claimed_hosts(s, "p").empty());
  }
  SUBCASE("a pool with claims cannot be removed; without them it goes with everything in it") {
    REQUIRE(s.create(queued_resource_key("p", "qr-a"), {{"state", "ACTIVE"}}));
    REQUIRE(s.claim_hosts("p", {"h1", "h2"}, "qr-a"));
    REQUIRE(s.put_heartbeat("p", "h1", {{"ok", true}}, std::chrono::seconds(30)));
    REQUIRE(s.commit({EventOp{Event{0, 0, "p", Kind::pool, "p", "CREATED", "", "", Initiator::user,
                                    Json::object(), ""}}}));
    int64_t v = s.get(pool_key("p"))->version;
    auto busy = s.remove(pool_key("p"), v);
    REQUIRE(!busy);
    CHECK(busy.error().reason == reason::k_hosts_busy);
    CHECK(busy.error().message.find("'h1' is claimed by 'qr-a', 'h2' is claimed by 'qr-a'") !=
          std::string::npos);
    REQUIRE(s.release_all("p", "qr-a"));
    REQUIRE(s.remove(pool_key("p"), v));
    CHECK(s.list(Kind::host, "p")->records.empty());
    CHECK(s.list(Kind::queued_resource, "p")->records.empty());
    CHECK(s.events(EventQuery{"p", std::nullopt, "", 0, 0})->empty());
    CHECK(s.live_heartbeats("p")->empty());
    // A new pool of the same name starts empty.
    REQUIRE(s.create(pool_key("p"), {{"n", 2}}));
    CHECK(s.snapshot("p")->records.empty());
  }
  SUBCASE("a provisional claim holds its hosts until its ttl passes, then frees them") {
    REQUIRE(s.commit({ClaimOp{"p", {"h1", "h2"}, "qr-a", std::chrono::seconds(30)}}));
    auto c = s.claims("p");
    REQUIRE(c->size() == 2);
    CHECK((*c)[0].expires_at_ms == clock.now_ms() + 30'000);
    clock.advance(std::chrono::seconds(29));
    auto early = s.claim_hosts("p", {"h1"}, "qr-b");
    REQUIRE(!early);
    CHECK(early.error().reason == reason::k_hosts_busy);
    clock.advance(std::chrono::seconds(2));
    CHECK(claimed_hosts(s, "p").empty());
    auto lapsed = s.release_hosts("p", {"h1"}, "qr-a");
    REQUIRE(!lapsed);
    CHECK(lapsed.error().reason == reason::k_not_owner);
    REQUIRE(s.claim_hosts("p", {"h1"}, "qr-b"));
    CHECK(claimed_hosts(s, "p") == std::vector<std::string>{"h1=qr-b"});
  }
  SUBCASE("a provisional claim becomes permanent by release and re-claim in one commit") {
    REQUIRE(s.commit({ClaimOp{"p", {"h1"}, "qr-a", std::chrono::seconds(30)}}));
    REQUIRE(s.commit(
        {ReleaseOp{"p", {"h1"}, "qr-a"}, ClaimOp{"p", {"h1"}, "qr-a", std::chrono::seconds(0)}}));
    clock.advance(std::chrono::hours(1));
    CHECK(claimed_hosts(s, "p") == std::vector<std::string>{"h1=qr-a"});
  }
}

// Who made each change: the store's actor, unless the event names its own.
inline void actors(StateStore& s) {
  seed_pool(s, "pa", 1);
  s.set_actor("dana@ci-1", false);
  REQUIRE(s.commit({EventOp{Event{0, 0, "pa", Kind::pool, "pa", "MINE", "", "", Initiator::user,
                                  Json::object(), ""}},
                    EventOp{Event{0, 0, "pa", Kind::pool, "pa", "THEIRS", "", "", Initiator::user,
                                  Json::object(), "erin"}}}));
  {
    auto mine = s.events(EventQuery{"pa", Kind::pool, "pa", 0, 0});
    REQUIRE(mine);
    std::map<std::string, std::string> actor;
    for (const auto& e : *mine) {
      actor[e.type] = e.actor;
    }
    CHECK(actor["MINE"] == "dana@ci-1");
    CHECK(actor["THEIRS"] == "erin");
  }
}

inline void events(StateStore& s, FakeClock& clock) {
  seed_pool(s, "p", 2);
  auto qr = queued_resource_key("p", "qr-1");
  auto transition = [&](const std::string& from, const std::string& to, Initiator who) {
    auto cur = s.get(qr);
    REQUIRE(cur);
    Json doc = cur->doc;
    doc["state"] = to;
    return s.commit({UpdateOp{qr, doc, cur->version}, EventOp{Event{0,
                                                                    0,
                                                                    "p",
                                                                    Kind::queued_resource,
                                                                    "qr-1",
                                                                    "STATE_CHANGED",
                                                                    from,
                                                                    to,
                                                                    who,
                                                                    {{"why", to}},
                                                                    ""}}});
  };
  REQUIRE(s.commit({CreateOp{qr, {{"state", "ACCEPTED"}}},
                    EventOp{Event{0, 0, "p", Kind::queued_resource, "qr-1", "CREATED", "",
                                  "ACCEPTED", Initiator::user, Json::object(), ""}}}));
  clock.advance(std::chrono::seconds(5));
  auto r2 = transition("ACCEPTED", "WAITING_FOR_RESOURCES", Initiator::service);
  REQUIRE(r2);
  clock.advance(std::chrono::seconds(5));
  auto r3 = transition("WAITING_FOR_RESOURCES", "PROVISIONING", Initiator::service);
  REQUIRE(r3);
  REQUIRE(s.commit({EventOp{Event{0, 0, "p", Kind::host, "h1", "HOST_ADDED", "", "",
                                  Initiator::user, Json::object(), ""}}}));

  SUBCASE("events come back in order with time, states, initiator and detail") {
    auto all = s.events({});
    REQUIRE(all);
    REQUIRE(all->size() == 4);
    const auto& e = *all;
    CHECK(e[0].type == "CREATED");
    CHECK(e[0].to_state == "ACCEPTED");
    CHECK(e[0].initiator == Initiator::user);
    CHECK(e[1].from_state == "ACCEPTED");
    CHECK(e[1].to_state == "WAITING_FOR_RESOURCES");
    CHECK(e[1].initiator == Initiator::service);
    CHECK(e[1].detail["why"] == "WAITING_FOR_RESOURCES");
    CHECK(e[1].time_ms == e[0].time_ms + 5000);
    CHECK(e[2].revision == r3->revision);
    CHECK(e[2].revision > e[1].revision);
    CHECK(e[1].revision > e[0].revision);
    CHECK(e[1].revision == r2->revision);
    CHECK(e[3].subject_kind == Kind::host);
  }
  SUBCASE("events after a revision are only the newer ones") {
    auto later = s.events(EventQuery{"p", std::nullopt, "", r2->revision, 0});
    REQUIRE(later);
    REQUIRE(later->size() == 2);
    CHECK((*later)[0].to_state == "PROVISIONING");
    CHECK((*later)[1].type == "HOST_ADDED");
  }
  SUBCASE("events filter by subject and kind, and limit counts from the oldest") {
    auto q = s.events(EventQuery{"p", Kind::queued_resource, "qr-1", 0, 0});
    REQUIRE(q);
    CHECK(q->size() == 3);
    auto first2 = s.events(EventQuery{"", std::nullopt, "", 0, 2});
    REQUIRE(first2->size() == 2);
    CHECK((*first2)[1].to_state == "WAITING_FOR_RESOURCES");
    CHECK(s.events(EventQuery{"other", std::nullopt, "", 0, 0})->empty());
  }
  SUBCASE("an event with an explicit time keeps it") {
    REQUIRE(s.commit({EventOp{
        Event{0, 12345, "p", Kind::pool, "p", "X", "", "", Initiator::user, Json::object(), ""}}}));
    CHECK(s.events({})->back().time_ms == 12345);
  }
}

inline void heartbeats(StateStore& s, FakeClock& clock) {
  seed_pool(s, "p", 2);
  SUBCASE("a heartbeat is live until its ttl passes by the store's clock") {
    REQUIRE(s.put_heartbeat("p", "h1", {{"load", 0.5}}, std::chrono::seconds(10)));
    clock.advance(std::chrono::seconds(4));
    REQUIRE(s.put_heartbeat("p", "h2", {{"load", 0.1}}, std::chrono::seconds(10)));
    auto live = s.live_heartbeats("p");
    REQUIRE(live->size() == 2);
    CHECK((*live)[0].host == "h1");
    CHECK((*live)[0].payload["load"] == 0.5);
    CHECK((*live)[0].ttl_ms == 10'000);
    clock.advance(std::chrono::seconds(6)); // h1: exactly 10 s old: dead
    live = s.live_heartbeats("p");
    REQUIRE(live->size() == 1);
    CHECK((*live)[0].host == "h2");
    REQUIRE(s.put_heartbeat("p", "h1", {{"load", 0.7}}, std::chrono::seconds(10)));
    live = s.live_heartbeats("p");
    REQUIRE(live->size() == 2);
    CHECK((*live)[0].payload["load"] == 0.7);
    CHECK((*live)[0].last_seen_ms == clock.now_ms());
  }
  SUBCASE("a removed host's heartbeat is gone, and a host added again has none until it beats") {
    REQUIRE(s.put_heartbeat("p", "h1", {{"load", 0.5}}, std::chrono::seconds(30)));
    REQUIRE(s.put_heartbeat("p", "h2", {{"load", 0.5}}, std::chrono::seconds(30)));
    int64_t v = s.get(host_key("p", "h1"))->version;
    REQUIRE(s.remove(host_key("p", "h1"), v));
    auto live = s.live_heartbeats("p");
    REQUIRE(live->size() == 1);
    CHECK((*live)[0].host == "h2");
    REQUIRE(s.create(host_key("p", "h1"), {{"addr", "10.0.0.1"}}));
    CHECK(s.live_heartbeats("p")->size() == 1);
    REQUIRE(s.put_heartbeat("p", "h1", {{"load", 0.9}}, std::chrono::seconds(30)));
    live = s.live_heartbeats("p");
    REQUIRE(live->size() == 2);
    CHECK((*live)[0].payload["load"] == 0.9);
  }
  SUBCASE("a heartbeat for a pool that does not exist is not_found") {
    auto r = s.put_heartbeat("nope", "h1", Json::object(), std::chrono::seconds(10));
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_not_found);
  }
}

inline void transactions(StateStore& s) {
  REQUIRE(s.create(pool_key("p"), {{"counter", 0}}));
  SUBCASE("transact reads, modifies and writes") {
    for (int i = 0; i < 3; ++i) {
      REQUIRE(s.transact([](StateStore& st) -> Expected<std::vector<Op>> {
        TPUCTL_TRY_ASSIGN(auto r, st.get(pool_key("p")));
        Json doc = r.doc;
        doc["counter"] = doc["counter"].get<int>() + 1;
        return std::vector<Op>{UpdateOp{pool_key("p"), doc, r.version}};
      }));
    }
    CHECK(s.get(pool_key("p"))->doc["counter"] == 3);
  }
  SUBCASE("transact re-runs fn after a conflict") {
    int64_t stale = s.get(pool_key("p"))->version;
    REQUIRE(s.update(pool_key("p"), {{"counter", 10}}, stale));
    int calls = 0;
    auto r = s.transact([&](StateStore& st) -> Expected<std::vector<Op>> {
      ++calls;
      int64_t v = stale;
      if (calls > 1) {
        TPUCTL_TRY_ASSIGN(auto cur, st.get(pool_key("p")));
        v = cur.version;
      }
      return std::vector<Op>{UpdateOp{pool_key("p"), {{"counter", 11}}, v}};
    });
    REQUIRE(r);
    CHECK(calls == 2);
    CHECK(s.get(pool_key("p"))->doc["counter"] == 11);
  }
  SUBCASE("transact gives up after max_attempts conflicts and says so") {
    int64_t stale = s.get(pool_key("p"))->version;
    REQUIRE(s.update(pool_key("p"), {{"counter", 10}}, stale));
    int calls = 0;
    TransactOptions opt;
    opt.max_attempts = 3;
    opt.base_backoff = std::chrono::milliseconds(1);
    auto r = s.transact(
        [&](StateStore&) -> Expected<std::vector<Op>> {
          ++calls;
          return std::vector<Op>{UpdateOp{pool_key("p"), {{"counter", 99}}, stale}};
        },
        opt);
    REQUIRE(!r);
    CHECK(calls == 3);
    CHECK(r.error().reason == reason::k_conflict);
    CHECK(r.error().message.find("gave up after 3 attempts") != std::string::npos);
  }
  SUBCASE("an error from fn is returned as it is and nothing is committed") {
    int calls = 0;
    auto r = s.transact([&](StateStore& st) -> Expected<std::vector<Op>> {
      ++calls;
      TPUCTL_TRY(st.get(pool_key("p")));
      return Error(ErrorKind::capacity, "no room", "mine");
    });
    REQUIRE(!r);
    CHECK(r.error().reason == "mine");
    CHECK(r.error().kind == ErrorKind::capacity);
    CHECK(r.error().message == "no room");
    CHECK(calls == 1);
    CHECK(s.get(pool_key("p"))->doc["counter"] == 0);
  }
  SUBCASE("other errors are not retried") {
    int calls = 0;
    auto r = s.transact([&](StateStore&) -> Expected<std::vector<Op>> {
      ++calls;
      return std::vector<Op>{CreateOp{pool_key("p"), Json::object()}};
    });
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_already_exists);
    CHECK(calls == 1);
  }
}

inline void waiting(StoreFixture& fixture, FakeClock& clock) {
  auto a = fixture.open(clock.clock());
  seed_pool(*a, "p", 2);
  int64_t rev = a->list(Kind::pool, "")->revision;
  SUBCASE("wait_for_change gives after_revision back when nothing changes before the timeout") {
    auto t0 = std::chrono::steady_clock::now();
    auto r = a->wait_for_change("p", rev, std::chrono::milliseconds(300));
    REQUIRE(r);
    CHECK(*r == rev);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(250));
  }
  SUBCASE("wait_for_change returns a newer revision once another handle commits") {
    auto b = fixture.open(clock.clock());
    REQUIRE(b->claim_hosts("p", {"h1"}, "qr-a"));
    auto r = a->wait_for_change("p", rev, std::chrono::seconds(5));
    REQUIRE(r);
    CHECK(*r > rev);
    CHECK(*r <= a->list(Kind::pool, "")->revision);
  }
}

inline void two_handles(StoreFixture& fixture, FakeClock& clock) {
  auto a = fixture.open(clock.clock());
  auto b = fixture.open(clock.clock());
  SUBCASE("a second handle sees committed writes and loses a CAS race cleanly") {
    REQUIRE(a->create(pool_key("p"), {{"n", 1}}));
    auto ra = a->get(pool_key("p"));
    auto rb = b->get(pool_key("p"));
    REQUIRE(rb);
    CHECK(rb->version == ra->version);
    REQUIRE(a->update(pool_key("p"), {{"n", 2}}, ra->version));
    auto lost = b->update(pool_key("p"), {{"n", 3}}, rb->version);
    REQUIRE(!lost);
    CHECK(lost.error().reason == reason::k_conflict);
    CHECK(b->get(pool_key("p"))->doc["n"] == 2);
  }
  SUBCASE("claims made through one handle block claims through the other") {
    seed_pool(*a, "p", 3);
    REQUIRE(a->claim_hosts("p", {"h1", "h2"}, "qr-a"));
    auto r = b->claim_hosts("p", {"h2", "h3"}, "qr-b");
    REQUIRE(!r);
    CHECK(r.error().reason == reason::k_hosts_busy);
    CHECK(claimed_hosts(*b, "p") == std::vector<std::string>{"h1=qr-a", "h2=qr-a"});
  }
}

using tpuctl::test::k_pod_hosts;
using tpuctl::test::pod_host_doc;
using tpuctl::test::pod_hosts;

inline void pod_scale(StateStore& s) {
  REQUIRE(s.create(pool_key("pod"), {{"generation", "tpu7x"}}));
  std::vector<Op> adds;
  for (int i = 0; i < k_pod_hosts; ++i) {
    adds.push_back(CreateOp{host_key("pod", pod_host_doc(i)["name"]), pod_host_doc(i)});
  }
  auto added = s.commit(adds);
  REQUIRE_MESSAGE(added, (added ? "" : added.error().message));
  const auto all = pod_hosts(0, k_pod_hosts);
  SUBCASE("2,304 hosts are added, claimed whole, refused whole and released in single commits") {
    auto hosts = s.list(Kind::host, "pod");
    REQUIRE(hosts->records.size() == k_pod_hosts);
    auto seventh = s.get(host_key("pod", all[7]));
    REQUIRE(seventh);
    CHECK(seventh->doc == pod_host_doc(7));
    CHECK(s.get(host_key("pod", all[1000]))->version == added->revision);
    auto claimed = s.claim_hosts("pod", all, "qr-pod");
    REQUIRE_MESSAGE(claimed, (claimed ? "" : claimed.error().message));
    auto claims = s.claims("pod");
    REQUIRE(claims->size() == k_pod_hosts);
    CHECK(std::all_of(claims->begin(), claims->end(), [&](const Claim& c) {
      return c.owner == "qr-pod" && c.revision == claimed->revision;
    }));
    auto again = s.claim_hosts("pod", {all[2303]}, "qr-late");
    REQUIRE(!again);
    CHECK(again.error().reason == reason::k_hosts_busy);
    CHECK(again.error().message.find("'" + all[2303] + "' is claimed by 'qr-pod'") !=
          std::string::npos);
    REQUIRE(s.release_all("pod", "qr-pod"));
    CHECK(s.claims("pod")->empty());
    auto missing = all;
    missing.push_back("10.9.9.9");
    auto refused = s.claim_hosts("pod", missing, "qr-pod");
    REQUIRE(!refused);
    CHECK(refused.error().reason == reason::k_not_found);
    CHECK(refused.error().message.find("'10.9.9.9'") != std::string::npos);
    CHECK(s.claims("pod")->empty());
  }
  SUBCASE("2,304 hosts are drained and removed in single commits") {
    std::vector<Op> drains;
    auto listed = s.list(Kind::host, "pod");
    REQUIRE(listed);
    for (const auto& r : listed->records) {
      Json doc = r.doc;
      doc["drain_reason"] = "retired";
      drains.push_back(UpdateOp{r.key, doc, r.version});
    }
    auto drained = s.commit(drains);
    REQUIRE_MESSAGE(drained, (drained ? "" : drained.error().message));
    auto hosts = s.list(Kind::host, "pod")->records;
    CHECK(std::all_of(hosts.begin(), hosts.end(), [&](const Record& r) {
      return r.doc["drain_reason"] == "retired" && r.version == drained->revision &&
             r.create_revision == added->revision;
    }));
    REQUIRE(s.claim_hosts("pod", {all[5]}, "drain:retired"));
    std::vector<Op> removes;
    for (const auto& r : hosts) {
      removes.push_back(RemoveOp{r.key, r.version});
    }
    auto busy = s.commit(removes);
    REQUIRE(!busy);
    CHECK(busy.error().reason == reason::k_hosts_busy);
    CHECK(s.list(Kind::host, "pod")->records.size() == k_pod_hosts);
    removes.insert(removes.begin(), ReleaseOp{"pod", {all[5]}, "drain:retired"});
    REQUIRE(s.commit(removes));
    CHECK(s.list(Kind::host, "pod")->records.empty());
    CHECK(s.claims("pod")->empty());
  }
}

// Eight clients claim overlapping 288-host slices of a 2,304-host pool at once, each with its
// own handle, through transact(): whatever wins, every host is claimed at most once, and every
// claim is whole (all 288 hosts of its owner, or none).
inline void concurrent_pod_claims(StoreFixture& fixture, FakeClock& clock) {
  auto a = fixture.open(clock.clock());
  REQUIRE(a->create(pool_key("pod"), {{"generation", "tpu7x"}}));
  std::vector<Op> adds;
  for (int i = 0; i < k_pod_hosts; ++i) {
    adds.push_back(CreateOp{host_key("pod", pod_host_doc(i)["name"]), pod_host_doc(i)});
  }
  REQUIRE(a->commit(adds));
  constexpr int k_clients = 8, k_slice = 288, k_stride = 270; // neighbours share 18 hosts
  std::vector<std::unique_ptr<StateStore>> handles;
  for (int c = 0; c < k_clients; ++c) {
    handles.push_back(fixture.open(clock.clock()));
  }
  std::vector<std::string> outcome(k_clients);
  std::vector<std::thread> threads;
  for (int c = 0; c < k_clients; ++c) {
    threads.emplace_back([&, c] {
      auto hosts = pod_hosts(c * k_stride, c * k_stride + k_slice);
      auto r = handles[static_cast<size_t>(c)]->transact(
          [&](StateStore& st) -> Expected<std::vector<Op>> {
            TPUCTL_TRY_ASSIGN(auto claims, st.claims("pod"));
            std::set<std::string> busy;
            for (const auto& cl : claims) {
              busy.insert(cl.host);
            }
            for (const auto& h : hosts) {
              if (busy.count(h)) {
                return Error(ErrorKind::capacity, "busy", "mine");
              }
            }
            return std::vector<Op>{ClaimOp{"pod", hosts, "qr-" + std::to_string(c)}};
          },
          TransactOptions{50, std::chrono::milliseconds(5), std::chrono::milliseconds(100)});
      outcome[static_cast<size_t>(c)] = r ? "claimed" : r.error().reason;
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  auto claims = a->claims("pod");
  REQUIRE(claims);
  std::map<std::string, int> per_owner;
  std::set<std::string> seen;
  for (const auto& c : *claims) {
    CHECK(seen.insert(c.host).second);
    ++per_owner[c.owner];
  }
  int winners = 0;
  for (int c = 0; c < k_clients; ++c) {
    std::string owner = "qr-" + std::to_string(c);
    INFO(owner << ": " << outcome[static_cast<size_t>(c)]);
    CHECK((outcome[static_cast<size_t>(c)] == "claimed" ||
           outcome[static_cast<size_t>(c)] == "mine"));
    if (outcome[static_cast<size_t>(c)] == "claimed") {
      ++winners;
      CHECK(per_owner[owner] == k_slice);
    } else {
      CHECK(per_owner.count(owner) == 0);
    }
  }
  // Winners never neighbour each other, and each loser lost to a winning neighbour.
  auto won = [&](int c) {
    return c >= 0 && c < k_clients && outcome[static_cast<size_t>(c)] == "claimed";
  };
  for (int c = 0; c < k_clients; ++c) {
    CHECK(!(won(c) && won(c + 1)));
    CHECK((won(c) || won(c - 1) || won(c + 1)));
  }
  CHECK(winners >= 3);
  CHECK(claims->size() == static_cast<size_t>(winners * k_slice));
}

} // namespace conformance

// Runs every behaviour against stores made by `factory`.
inline void run_store_conformance(const FixtureFactory& factory) {
  FakeClock clock;
  auto fixture = factory();
  REQUIRE(fixture);
  auto store = fixture->open(clock.clock());
  REQUIRE(store);
  CHECK(!store->info().backend.empty());
  CHECK(store->info().writable);
  CHECK(store->ping());
  SUBCASE("records") {
    conformance::records(*store);
  }
  SUBCASE("commits") {
    conformance::commits(*store);
  }
  SUBCASE("claims") {
    conformance::claims(*store, clock);
  }
  SUBCASE("events") {
    conformance::events(*store, clock);
  }
  SUBCASE("actors") {
    conformance::actors(*store);
  }
  SUBCASE("heartbeats") {
    conformance::heartbeats(*store, clock);
  }
  SUBCASE("transactions") {
    conformance::transactions(*store);
  }
  SUBCASE("two handles") {
    conformance::two_handles(*fixture, clock);
  }
  SUBCASE("waiting for changes") {
    conformance::waiting(*fixture, clock);
  }
  SUBCASE("pod scale") {
    conformance::pod_scale(*store);
  }
  SUBCASE("concurrent claims at pod scale") {
    conformance::concurrent_pod_claims(*fixture, clock);
  }
}

} // namespace tpuctl::state::test
