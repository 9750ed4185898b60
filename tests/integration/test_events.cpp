// The audit trail through the real binary: `tpuctl events` lists who changed what, when and with
// what result, filters by object, actor, owner, action and age, follows new events with --watch,
// and the log keeps its retention on SQLite and on a real etcd. Real sshd on 127.0.246.6x (this
// file's), real SQLite, real etcd.
#include <chrono>
#include <pwd.h>
#include <string>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/etcd_fixture.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/workload_env.hpp"
#include "util/time_text.hpp"

using nlohmann::json;
using tpuctl::test::contains;
using tpuctl::test::EtcdCluster;
using tpuctl::test::WorkloadEnv;

TEST_SUITE_BEGIN("integration");

namespace {

std::string me() {
  const passwd* pw = ::getpwuid(::geteuid());
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(pw != nullptr ? pw->pw_name : "?") + "@" + host;
}

// Drains and undrains `host` `times` times: two commits, two events, each.
void churn(const WorkloadEnv& env, const std::string& host, int times) {
  for (int i = 0; i < times; ++i) {
    REQUIRE(env.run({"pool", "drain", host, "--reason", "churn"}).exit_code == 0);
    REQUIRE(env.run({"pool", "undrain", host}).exit_code == 0);
  }
}

} // namespace

TEST_CASE("events: who changed what and when, filtered by object, actor, owner, action and age; "
          "--watch follows; bad filters are one line") {
  WorkloadEnv env(1, "127.0.246.60");
  REQUIRE(env.run({"qr", "create", "q", "--accelerator-type", "v5litepod-4"}).exit_code == 0);
  REQUIRE(env.run({"qr", "delete", "q", "--force"}).exit_code == 0);
  auto all = env.run_json({"events"});
  REQUIRE(all.size() >= 4);
  for (const auto& e : all) {
    CHECK(e["actor"] == me());
    CHECK(!e["time"].get<std::string>().empty());
    CHECK(!e["action"].get<std::string>().empty());
    CHECK(!e["result"].get<std::string>().empty());
  }
  CHECK(all[0]["object"] == "pool/local"); // the pool's creation comes first
  auto q = env.run_json({"events", "--object", "queued_resource/q"});
  REQUIRE(q.size() >= 3);
  for (const auto& e : q) {
    CHECK(e["object"] == "queued_resource/q");
  }
  CHECK(q.back()["action"] == "DELETED");
  bool active = false;
  for (const auto& e : q) {
    active = active || e["result"] == "ACTIVE";
  }
  CHECK(active);
  // The owner of a deleted object is still known (the actor of its first event).
  CHECK(env.run_json({"events", "--owner", me(), "--object", "q"}).size() == q.size());
  CHECK(env.run_json({"events", "--owner", "nobody@nowhere"}).empty());
  CHECK(env.run_json({"events", "--actor", "nobody@nowhere"}).empty());
  CHECK(env.run_json({"events", "--type", "DELETED"}).size() == 1);
  CHECK(env.run_json({"events", "--since", "1h"}).size() == all.size());
  auto table = env.run({"events"});
  CHECK(contains(table.out, "ACTOR"));
  CHECK(contains(table.out, "queued_resource/q"));

  auto bad = env.run({"events", "--object", "thing/q"});
  CHECK(bad.exit_code == 2);
  CHECK_MESSAGE(contains(bad.err, "--object 'thing/q'"), bad.err);
  CHECK(env.run({"events", "--since", "yesterday"}).exit_code == 2);

  // A cluster has its own lines beside its request's; a restore ends each pool's log.
  REQUIRE(env.run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-4"}).exit_code ==
          0);
  REQUIRE(env.run({"cluster", "delete", "c"}).exit_code == 0);
  auto cluster = env.run_json({"events", "--object", "cluster/c"});
  REQUIRE(cluster.size() == 2);
  CHECK(cluster[0]["action"] == "CREATED");
  CHECK(cluster[1]["action"] == "DELETED");
  const std::string backup = (env.dir.path() / "backup.db").string();
  REQUIRE(env.run({"state", "backup", backup}).exit_code == 0);
  auto restored = env.run({"state", "restore", backup, "--force"});
  REQUIRE_MESSAGE(restored.exit_code == 0, restored.err);
  auto restores = env.run_json({"events", "--type", "STATE_RESTORED"});
  REQUIRE(restores.size() == 1);
  CHECK(restores[0]["object"] == "pool/local");
  CHECK(env.run_json({"events", "--object", "q"}).size() == q.size()); // the log came back too

  // --watch prints what is there, then each new event as it is committed.
  auto watch = env.start({"events", "--watch", "--timeout", "20s", "--format", "json"}, "watch");
  REQUIRE(tpuctl::test::wait_until([&] { return contains(watch->out(), "queued_resource/q"); },
                                   std::chrono::seconds(15)));
  REQUIRE(env.run({"pool", "drain", "127.0.246.60", "--reason", "disk"}).exit_code == 0);
  REQUIRE(tpuctl::test::wait_until([&] { return contains(watch->out(), "HOST_DRAINED"); },
                                   std::chrono::seconds(15)));
  CHECK(watch->wait(std::chrono::seconds(30)).value_or(-1) == 0);
}

TEST_CASE("events: the log keeps its retention on SQLite and on etcd (TPUCTL_EVENT_MAX)") {
  for (const bool on_etcd : {false, true}) {
    CAPTURE(on_etcd);
    std::unique_ptr<EtcdCluster> etcd;
    if (on_etcd) {
      etcd = std::make_unique<EtcdCluster>(1);
    }
    WorkloadEnv env(1, on_etcd ? "127.0.246.62" : "127.0.246.61", "", 0,
                    on_etcd ? etcd->url("/events/") : "", {{"TPUCTL_EVENT_MAX", "10"}});
    const std::string host = on_etcd ? "127.0.246.62" : "127.0.246.61";
    // 160 commits with an event each: at least two of them at a revision that compacts.
    churn(env, host, 80);
    auto kept = env.run_json({"events"});
    CHECK(kept.size() >= 10);
    // At most the 10 newest at the last compaction and what came after it (fewer than 64).
    CHECK_MESSAGE(kept.size() < 10 + 64 + 4, kept.size());
    CHECK(kept.back()["action"] == "HOST_UNDRAINED"); // the newest is always kept
    // Without a limit every one stays.
    WorkloadEnv unlimited(1, on_etcd ? "127.0.246.64" : "127.0.246.63", "", 0,
                          on_etcd ? etcd->url("/events2/") : "", {{"TPUCTL_EVENT_MAX", "0"}});
    churn(unlimited, on_etcd ? "127.0.246.64" : "127.0.246.63", 80);
    CHECK(unlimited.run_json({"events"}).size() >= 160);
  }
}

TEST_CASE("usage: chip-hours held equal the requests' own ACTIVE time, per request and per owner, "
          "as table, json and csv") {
  WorkloadEnv env(2, "127.0.246.65");
  REQUIRE(env.run({"qr", "create", "q", "--accelerator-type", "v5litepod-4"}).exit_code == 0);
  REQUIRE(env.run({"qr", "create", "live", "--accelerator-type", "v5litepod-4"}).exit_code == 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  REQUIRE(env.run({"qr", "delete", "q", "--force"}).exit_code == 0);
  // q's ACTIVE time, as its own transitions say.
  int64_t active_at = 0, left_at = 0;
  for (const auto& e : env.run_json({"events", "--object", "queued_resource/q"})) {
    auto at = tpuctl::util::parse_timestamp(e["time"].get<std::string>(), "time");
    REQUIRE(at);
    if (e["to"] == "ACTIVE") {
      active_at = *at;
    } else if (e["from"] == "ACTIVE" && left_at == 0) {
      left_at = *at;
    }
  }
  REQUIRE(active_at > 0);
  REQUIRE(left_at > active_at);
  auto rows = env.run_json({"usage", "--by", "request", "--since", "1h"});
  REQUIRE(rows.size() == 2);
  json q, live;
  for (const auto& r : rows) {
    (r["request"] == "q" ? q : live) = r;
  }
  CHECK(q["chips"] == 4);
  CHECK(q["active_ms"] == left_at - active_at);
  CHECK(q["chip_hours"].get<double>() ==
        doctest::Approx(4.0 * static_cast<double>(left_at - active_at) / 3600000.0).epsilon(0.01));
  CHECK(q["owner"] == me());
  // Still ACTIVE: until the window's end.
  CHECK(live["active_ms"].get<int64_t>() > 0);
  auto by_owner = env.run_json({"usage"});
  REQUIRE(by_owner.size() == 1);
  CHECK(by_owner[0]["owner"] == me());
  CHECK(by_owner[0]["requests"] == 2);
  auto csv = env.run({"usage", "--format", "csv(owner,requests)"});
  REQUIRE(csv.exit_code == 0);
  CHECK(csv.out == "owner,requests\n" + me() + ",2\n");
  CHECK(contains(env.run({"usage"}).out, "CHIP_HOURS"));
  // Bad input is one line (exit 2).
  CHECK(env.run({"usage", "--by", "team"}).exit_code == 2);
  CHECK(env.run({"usage", "--since", "soon"}).exit_code == 2);
}
