// The etcd backend on a real three-member cluster under failures: the leader killed while 20
// threads (each with its own store, as separate tpuctl processes have) create slices, and two of
// three members down. What is checked is what a user would check afterwards: every slice exists
// once, no host is claimed twice, each slice's hosts are exactly its claims, and nothing written
// before an outage is lost.
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <doctest/doctest.h>

#include "state/location.hpp"
#include "tests/support/etcd_fixture.hpp"
#include "tests/support/helpers.hpp"

using namespace tpuctl;
using namespace tpuctl::state;
using tpuctl::test::EtcdCluster;
using tpuctl::test::unique_prefix;

namespace {

EtcdCluster& three() {
  static EtcdCluster c(3);
  return c;
}

std::unique_ptr<StateStore> open_url(const std::string& url,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  OpenOptions o;
  o.create = Creation::at_open;
  o.etcd.request_timeout = timeout;
  auto s = open_store(url, o);
  REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
  return std::move(*s);
}

// Every member back and serving (tests leave the cluster whole for the next one).
void heal() {
  for (int i = 0; i < three().size(); ++i) {
    three().restart(i);
  }
  three().wait_ready();
}

void seed(StateStore& s, const std::string& pool, int hosts) {
  REQUIRE(s.create(pool_key(pool), Json::object()));
  std::vector<Op> batch;
  for (int i = 0; i < hosts; ++i) {
    batch.push_back(CreateOp{host_key(pool, "h" + std::to_string(i)), Json::object()});
    if (batch.size() == 60 || i + 1 == hosts) {
      REQUIRE(s.commit(batch));
      batch.clear();
    }
  }
}

// One slice creation as a scheduler does it: read the pool, pick `n` free hosts, and write the
// request, its claims and its event in one commit. Idempotent: a request that exists (an earlier
// attempt that applied although its reply was lost) is done. Retries what a user would retry.
struct Outcome {
  bool created = false;
  int64_t revision = 0;
  std::vector<std::string> errors;
};

Outcome create_slice(StateStore& s, const std::string& id, size_t n, std::mt19937& rng) {
  Outcome out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(45);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = s.transact([&](StateStore& st) -> Expected<std::vector<Op>> {
      TPUCTL_TRY_ASSIGN(auto snap, st.snapshot("p"));
      std::set<std::string> busy;
      for (const auto& c : snap.claims) {
        busy.insert(c.host);
      }
      std::vector<std::string> free;
      for (const auto& rec : snap.records) {
        if (rec.key.kind == Kind::queued_resource && rec.key.id == id) {
          return std::vector<Op>{}; // already created
        }
        if (rec.key.kind == Kind::host && !busy.count(rec.key.id)) {
          free.push_back(rec.key.id);
        }
      }
      if (free.size() < n) {
        return Error(ErrorKind::capacity, "no room", std::string(reason::k_hosts_busy));
      }
      std::shuffle(free.begin(), free.end(), rng);
      free.resize(n);
      Event e{0,         0,  "p",      Kind::queued_resource, id,
              "CREATED", "", "ACTIVE", Initiator::user,       Json::object(),
              ""};
      return std::vector<Op>{CreateOp{queued_resource_key("p", id), {{"hosts", free}}},
                             ClaimOp{"p", free, id, std::chrono::seconds(0)}, EventOp{e}};
    });
    if (r) {
      out.created = true;
      out.revision = r->revision;
      return out;
    }
    out.errors.push_back(r.error().reason + ": " + r.error().message);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return out;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("etcd cluster: killing the leader during 20 concurrent slice creations claims no host "
          "twice and every creation completes") {
  heal();
  std::string url = three().url(unique_prefix());
  auto admin = open_url(url);
  constexpr int k_threads = 20, k_slices = 3, k_hosts_per_slice = 2;
  seed(*admin, "p", k_threads * k_slices * k_hosts_per_slice);

  std::vector<std::vector<Outcome>> results(k_threads);
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      OpenOptions o;
      o.create = Creation::at_open;
      auto s = open_store(url, o);
      if (!s) {
        results[static_cast<size_t>(t)].push_back({false, 0, {s.error().message}});
        return;
      }
      std::mt19937 rng(static_cast<unsigned>(t) + 1);
      for (int k = 0; k < k_slices; ++k) {
        std::string id = "s-" + std::to_string(t) + "-" + std::to_string(k);
        results[static_cast<size_t>(t)].push_back(create_slice(**s, id, k_hosts_per_slice, rng));
        ++done;
      }
    });
  }
  // Kill the leader once a few slices are in.
  while (done < 8) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  int leader = three().leader();
  three().kill(leader);
  int64_t done_at_kill = done;
  for (auto& th : threads) {
    th.join();
  }

  // Every creation completed, some of them after the kill (on the new leader).
  std::set<std::string> ids;
  for (int t = 0; t < k_threads; ++t) {
    for (int k = 0; k < k_slices; ++k) {
      const Outcome& o = results[static_cast<size_t>(t)][static_cast<size_t>(k)];
      CAPTURE(t);
      CAPTURE(k);
      CHECK_MESSAGE(o.created, (o.errors.empty() ? "" : o.errors.back()));
      ids.insert("s-" + std::to_string(t) + "-" + std::to_string(k));
    }
  }
  CHECK(done_at_kill < k_threads * k_slices);
  size_t retried = 0;
  for (const auto& per_thread : results) {
    for (const auto& o : per_thread) {
      retried += o.errors.size();
    }
  }
  MESSAGE("leader " << leader << " killed after " << done_at_kill << " of " << k_threads * k_slices
                    << " creations; " << retried << " attempts retried");

  // What a user checks afterwards, through a surviving member.
  auto after = open_url(url);
  auto qrs = after->list(Kind::queued_resource, "p");
  REQUIRE(qrs);
  CHECK(qrs->records.size() == ids.size());
  auto claims = after->claims("p");
  REQUIRE(claims);
  CHECK(claims->size() == static_cast<size_t>(k_threads * k_slices * k_hosts_per_slice));
  std::set<std::string> hosts;
  std::map<std::string, std::set<std::string>> by_owner;
  for (const auto& c : *claims) {
    CHECK(hosts.insert(c.host).second); // never twice
    by_owner[c.owner].insert(c.host);
  }
  for (const auto& r : qrs->records) {
    std::set<std::string> want;
    for (const auto& h : r.doc["hosts"]) {
      want.insert(h.get<std::string>());
    }
    CHECK(by_owner[r.key.id] == want); // the request's hosts are exactly its claims
  }
  CHECK(after->events(EventQuery{"p", std::nullopt, "", 0, 0})->size() == ids.size());

  // The killed member comes back with the same state.
  three().restart(leader);
  three().wait_ready();
  std::string only = three().endpoints()[static_cast<size_t>(leader)];
  auto rejoined = open_url("etcd://" + only.substr(7) + url.substr(url.find('/', 7)));
  bool caught_up = false;
  for (int i = 0; i < 50 && !caught_up; ++i) {
    auto c = rejoined->claims("p");
    caught_up = c && c->size() == claims->size();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(caught_up);
}

TEST_CASE("etcd cluster: two of three members down is a clear error that changes nothing; back "
          "up, the state is intact") {
  heal();
  std::string prefix = unique_prefix();
  std::string url = three().url(prefix);
  auto s = open_url(url, std::chrono::seconds(3));
  seed(*s, "p", 4);
  REQUIRE(s->claim_hosts("p", {"h1", "h2"}, "qr-a"));
  auto before = s->snapshot("p");
  REQUIRE(before);

  int leader = three().leader();
  int other = (leader + 1) % 3;
  three().kill(leader);
  three().kill(other);

  test::TempDir home;
  std::map<std::string, std::string> env{{"HOME", home.path().string()},
                                         {"XDG_STATE_HOME", (home.path() / "s").string()}};
  auto t0 = std::chrono::steady_clock::now();
  auto r = test::run_tpuctl({"--state", url, "pool", "create", "x", "--generation", "v5e"}, env);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(r.exit_code == 1);
  CAPTURE(r.err);
  for (const auto& ep : three().endpoints()) {
    CHECK(r.err.find(ep) != std::string::npos);
  }
  CHECK(r.err.find("no quorum") != std::string::npos);
  MESSAGE("a write without quorum failed after "
          << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took < std::chrono::seconds(120)); // it failed, it did not hang
  // Never a silent fallback: no SQLite file appeared.
  CHECK(!std::filesystem::exists(home.path() / "s" / "tpuctl" / "state.db"));
  auto claim = s->claim_hosts("p", {"h3"}, "qr-b");
  REQUIRE(!claim);
  CHECK(claim.error().reason == reason::k_unavailable);

  three().restart(leader);
  three().restart(other);
  three().wait_ready();
  auto healed = open_url(url);
  auto now = healed->snapshot("p");
  REQUIRE(now);
  CHECK(now->records.size() == before->records.size());
  REQUIRE(now->claims.size() == 2);
  CHECK(now->claims[0].owner == "qr-a");
  CHECK(now->claims[1].host == "h2");
  CHECK(!healed->find(pool_key("x"))->has_value());
  CHECK(now->revision == before->revision); // the refused writes were never sent
  auto later = healed->claim_hosts("p", {"h3"}, "qr-c");
  CHECK_MESSAGE(later, (later ? "" : later.error().message));
}
