// Who owns what in a shared pool, through the real binary: on an etcd store with authentication
// on (two etcd users with a role on the team's prefix) every pool, queued resource, cluster and
// workload records the etcd user that created it, list shows it (OWNER) and filters on it, and
// every event names its actor; on SQLite the owner is the operating-system user and host. Real
// sshd on the address block 127.0.245.x (owned by this file), real etcd, real SQLite.
#include <map>
#include <pwd.h>
#include <set>
#include <string>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "state/location.hpp"
#include "tests/support/etcd_fixture.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/workload_env.hpp"

using nlohmann::json;
using tpuctl::test::contains;
using tpuctl::test::EtcdCluster;
using tpuctl::test::WorkloadEnv;

TEST_SUITE_BEGIN("integration");

namespace {

const std::map<std::string, std::string> k_alice = tpuctl::test::etcd_user("alice");
const std::map<std::string, std::string> k_bob = tpuctl::test::etcd_user("bob");

// The ids of the rows of a json list.
std::set<std::string> ids(const json& rows, const std::string& field) {
  std::set<std::string> out;
  for (const auto& r : rows) {
    out.insert(r[field].get<std::string>());
  }
  return out;
}

} // namespace

TEST_CASE("owners: on an authenticated etcd each pool, queued resource, cluster and workload "
          "records the etcd user that made it; list shows and filters OWNER; events name their "
          "actor") {
  EtcdCluster etcd(1);
  etcd.enable_auth("/team/", {{"alice", "alice-pw"}, {"bob", "bob-pw"}});
  const std::string url = etcd.url("/team/");
  // Alice brings the pool up and takes a slice; Bob makes a cluster and runs a workload on it.
  WorkloadEnv env(2, "127.0.245.2", "", 0, url, k_alice);
  auto a1 = env.run({"qr", "create", "a1", "--accelerator-type", "v5litepod-4"});
  REQUIRE_MESSAGE(a1.exit_code == 0, a1.err);
  auto c =
      env.run_with({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-4"}, k_bob);
  REQUIRE_MESSAGE(c.exit_code == 0, c.err);
  auto w = env.run_with({"workload", "create", "--cluster", "c", "--workload", "w", "--command",
                         "sleep 300", "--format", "json"},
                        k_bob);
  REQUIRE_MESSAGE(w.exit_code == 0, w.err);
  env.uids.push_back(json::parse(w.out)["uid"]);

  CHECK(env.run_json({"pool", "list"})[0]["owner"] == "alice");
  auto qrs = env.run_json({"qr", "list"});
  REQUIRE(qrs.size() == 2);
  for (const auto& q : qrs) {
    CHECK(q["owner"] == (q["id"] == "a1" ? "alice" : "bob"));
  }
  CHECK(env.run_json({"qr", "describe", "a1"})["owner"] == "alice");
  CHECK(env.run_json({"cluster", "list"})[0]["owner"] == "bob");
  CHECK(env.run_json({"workload", "list"})[0]["owner"] == "bob");
  // The table has the column; --filter selects on it, whoever asks.
  auto table = env.run({"qr", "list"});
  CHECK(table.out.find("OWNER") != std::string::npos);
  CHECK(table.out.find("alice") != std::string::npos);
  CHECK(ids(env.run_json({"qr", "list", "--filter", "owner=alice"}), "id") ==
        std::set<std::string>{"a1"});
  auto bobs = env.run_with({"qr", "list", "--filter", "owner=bob", "--format", "json"}, k_alice);
  REQUIRE(bobs.exit_code == 0);
  CHECK(ids(json::parse(bobs.out), "id") == std::set<std::string>{"c"});

  // Every event names who made the change: the creates by their makers.
  tpuctl::state::OpenOptions o;
  o.etcd.user = "alice";
  o.etcd.password = "alice-pw";
  auto store = tpuctl::state::open_store(url, o);
  REQUIRE_MESSAGE(store, (store ? "" : store.error().message));
  auto events = (*store)->events({});
  REQUIRE(events);
  std::map<std::string, std::string> first_actor; // subject -> actor of its first event
  for (const auto& e : *events) {
    CHECK_MESSAGE(!e.actor.empty(), (e.subject + " " + e.type));
    first_actor.emplace(e.subject, e.actor);
  }
  CHECK(first_actor["local"] == "alice"); // the pool
  CHECK(first_actor["a1"] == "alice");
  CHECK(first_actor["c"] == "bob");

  // Another owner's work needs the intent: refused in one line naming both and the flag, and
  // nothing changes; with --override-owner it goes, recorded with both names.
  auto refused = env.run_with({"qr", "delete", "a1"}, k_bob);
  CHECK(refused.exit_code == 2);
  CHECK_MESSAGE(refused.err == "tpuctl: error: queued resource 'a1' belongs to alice, not to you "
                               "(bob): to delete it anyway, add --override-owner (recorded with "
                               "both names)\n",
                refused.err);
  CHECK(env.describe("a1")["state"] == "ACTIVE");
  // The override is recorded only once the action is done: a refused delete records nothing.
  auto not_forced = env.run_with({"qr", "delete", "a1", "--override-owner"}, k_bob);
  CHECK(not_forced.exit_code == 1);
  CHECK(env.run_with({"qr", "reset", "a1"}, k_bob).exit_code == 2);
  auto wl_refused = env.run({"workload", "delete", "w"}); // Alice, Bob's workload
  CHECK(wl_refused.exit_code == 2);
  CHECK(wl_refused.err.find("workload 'w' belongs to bob") != std::string::npos);
  CHECK(env.run_json({"workload", "describe", "w"})["owner"] == "bob");
  auto cluster_refused = env.run({"cluster", "delete", "c", "--force"});
  CHECK(cluster_refused.exit_code == 2);
  CHECK(cluster_refused.err.find("cluster 'c' belongs to bob") != std::string::npos);
  CHECK(env.run_json({"cluster", "list"}).size() == 1);

  auto overridden = env.run_with({"qr", "delete", "a1", "--force", "--override-owner"}, k_bob);
  CHECK_MESSAGE(overridden.exit_code == 0, overridden.err);
  // A pool on etcd gives each owner their own SSH work (pool set-ssh-work): Bob's delete is
  // recorded, and Alice's own tpuctl stops her slice's processes and finishes it.
  CHECK_MESSAGE(contains(overridden.err, "waiting for its owner alice"), overridden.err);
  auto deleting = env.describe("a1");
  CHECK(deleting["state"] == "DELETING");
  CHECK(contains(deleting["waiting_for"].get<std::string>(), "waiting for its owner alice"));
  auto finished = env.run({"qr", "wait", "a1", "--for", "delete", "--timeout", "120s"});
  CHECK_MESSAGE(finished.exit_code == 0, finished.err);
  CHECK(env.run_json({"qr", "list"}).size() == 1);
  auto after = (*store)->events({});
  REQUIRE(after);
  bool audited = false;
  for (const auto& e : *after) {
    if (e.type == "OWNER_OVERRIDDEN" && e.subject == "a1") {
      audited = e.actor == "bob" && e.detail["owner"] == "alice" && e.detail["action"] == "delete";
    }
  }
  CHECK(audited);
  int overrides = 0;
  for (const auto& e : *after) {
    overrides += e.type == "OWNER_OVERRIDDEN" ? 1 : 0;
  }
  CHECK(overrides == 1);
  // Pool changes limited to the pool's admins (and its owner): Bob may not drain a host or
  // change the admins; Alice may; bad input changes nothing.
  auto admins = env.run({"pool", "set-admins", "--admins", "carol", "--format", "json"});
  REQUIRE_MESSAGE(admins.exit_code == 0, admins.err);
  CHECK(json::parse(admins.out)["admins"] == json::array({"carol"}));
  auto not_admin = env.run_with({"pool", "drain", "127.0.245.3", "--reason", "disk"}, k_bob);
  CHECK(not_admin.exit_code == 5);
  CHECK_MESSAGE(not_admin.err == "tpuctl: error: only the admins of pool 'local' (carol, and its "
                                 "owner alice) may drain hosts of it, not bob: ask one of them\n",
                not_admin.err);
  CHECK(env.run_with({"pool", "set-admins", "--clear"}, k_bob).exit_code == 5);
  // A restore over the store replaces every pool: Bob may back it up, not restore over it.
  const std::string backup = (env.dir.path() / "team.db").string();
  REQUIRE(env.run_with({"state", "backup", backup}, k_bob).exit_code == 0);
  auto restore = env.run_with({"state", "restore", backup, "--force"}, k_bob);
  CHECK(restore.exit_code == 5);
  CHECK_MESSAGE(restore.err == "tpuctl: error: only the admins of pool 'local' (carol, and its "
                               "owner alice) may restore a backup over it, not bob: ask one of "
                               "them\n",
                restore.err);
  CHECK(env.run_json({"events", "--type", "STATE_RESTORED"}).empty());
  // Resizing another owner's cluster needs the intent too (a shrink evicts, a grow charges).
  auto resize = env.run(
      {"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-4", "--num-slices", "2"});
  CHECK(resize.exit_code == 2);
  CHECK_MESSAGE(contains(resize.err, "cluster 'c' belongs to bob, not to you (alice): to resize "
                                     "it anyway, add --override-owner"),
                resize.err);
  CHECK(env.run_json({"cluster", "describe", "c"})["num_slices"] == 1);
  CHECK(env.run({"pool", "set-admins"}).exit_code == 2);
  CHECK(env.run({"pool", "set-admins", "--admins", "a b"}).exit_code == 2);
  CHECK(env.run_json({"pool", "describe"})["admins"] == json::array({"carol"}));
  CHECK(env.run({"pool", "drain", "127.0.245.3", "--reason", "disk"}).exit_code == 0); // owner
  CHECK(env.run({"pool", "undrain", "127.0.245.3"}).exit_code == 0);
  CHECK(env.run({"pool", "set-admins", "--clear"}).exit_code == 0);

  // Bob's own workload and cluster go without the flag.
  CHECK(env.run_with({"workload", "delete", "w"}, k_bob).exit_code == 0);
  CHECK(env.run_with({"cluster", "delete", "c"}, k_bob).exit_code == 0);

  // The trail, as `tpuctl events` reads it: each change with its etcd user, the refused ones
  // nowhere.
  auto trail = [&](std::vector<std::string> filter) {
    filter.insert(filter.begin(), "events");
    return env.run_json(filter);
  };
  auto overridden_rows = trail({"--type", "OWNER_OVERRIDDEN"});
  REQUIRE(overridden_rows.size() == 1);
  CHECK(overridden_rows[0]["actor"] == "bob");
  CHECK(overridden_rows[0]["object"] == "queued_resource/a1");
  CHECK(overridden_rows[0]["detail"]["owner"] == "alice");
  auto drains = trail({"--type", "HOST_DRAINED"});
  REQUIRE(drains.size() == 1); // Alice's; Bob's was refused
  CHECK(drains[0]["actor"] == "alice");
  CHECK(drains[0]["object"] == "host/127.0.245.3");
  CHECK(trail({"--type", "POOL_ADMINS_SET", "--actor", "bob"}).empty());
  CHECK(trail({"--type", "POOL_ADMINS_SET", "--actor", "alice"}).size() == 2); // carol, cleared
  for (const auto& [object, maker] : std::map<std::string, std::string>{
           {"cluster/c", "bob"}, {"workload/w", "bob"}, {"queued_resource/a1", "alice"}}) {
    auto rows = trail({"--object", object});
    REQUIRE_MESSAGE(rows.size() >= 2, object);
    CHECK(rows.front()["action"] == "CREATED");
    CHECK(rows.front()["actor"] == maker);
    CHECK(rows.back()["action"] == "DELETED");
  }
  CHECK(trail({"--object", "queued_resource/a1"}).back()["actor"] ==
        "alice"); // her tpuctl ended it
}

TEST_CASE("owners: on SQLite the owner is the operating-system user and host") {
  WorkloadEnv env(1, "127.0.245.20");
  REQUIRE(env.run({"qr", "create", "q", "--accelerator-type", "v5litepod-4"}).exit_code == 0);
  const passwd* pw = ::getpwuid(::geteuid());
  REQUIRE(pw != nullptr);
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  const std::string me = std::string(pw->pw_name) + "@" + host;
  CHECK(env.run_json({"qr", "describe", "q"})["owner"] == me);
  CHECK(env.run_json({"pool", "list"})[0]["owner"] == me);
  CHECK(env.run({"qr", "describe", "q"}).out.find("owner:") != std::string::npos);
}
