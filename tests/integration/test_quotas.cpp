// Projects and quotas through the real binary on a real etcd with authentication on (alice, the
// pool's admin, and bob, each with a role on the team's prefix) and real sshd on the address
// block 127.0.247.x (owned by this file), on an owner-driven pool (each owner's commands do their
// own SSH work):
//  * only an admin sets quotas; bad input (a negative quota, a bad project id, a quota below
//    what is in use, an unknown project) is one line and changes nothing;
//  * a guaranteed request over its project's quota waits naming the quota and its users; one
//    bigger than the whole quota is refused at create (exit 3);
//  * projects waiting in one tier are served by fair share, shown in the pending reason;
//  * spot borrows beyond the quota, and another project's spot request within its quota
//    reclaims it;
//  * usage per project adds up the requests' ACTIVE time; every quota change is an event, and
//    `events --project` reads one project's trail.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/etcd_fixture.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/workload_env.hpp"

using nlohmann::json;
using tpuctl::test::contains;
using tpuctl::test::EtcdCluster;
using tpuctl::test::wait_until;
using tpuctl::test::WorkloadEnv;

TEST_SUITE_BEGIN("integration");

namespace {

const std::map<std::string, std::string> k_alice = tpuctl::test::etcd_user("alice");
const std::map<std::string, std::string> k_bob = tpuctl::test::etcd_user("bob");

// One error line on stderr, nothing on stdout.
void check_one_line(const tpuctl::util::ProcessResult& r, int exit_code, const std::string& part) {
  CHECK_MESSAGE(r.exit_code == exit_code, r.err);
  CHECK(r.out.empty());
  CHECK_MESSAGE(r.err.rfind("tpuctl: error: ", 0) == 0, r.err);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_MESSAGE(contains(r.err, part), r.err);
}

json quota_row(WorkloadEnv& env, const std::string& project) {
  for (const auto& row : env.run_json({"pool", "quota", "list"})) {
    if (row["project"] == project) {
      return row;
    }
  }
  return json();
}

} // namespace

TEST_CASE("quotas: admins set them, requests wait within them, fair share orders projects, spot "
          "borrows and is reclaimed, usage and events per project; bad input changes nothing") {
  EtcdCluster etcd(1);
  etcd.enable_auth("/team/", {{"alice", "alice-pw"}, {"bob", "bob-pw"}});
  WorkloadEnv env(4, "127.0.247.2", "", 0, etcd.url("/team/"), k_alice); // 4 hosts, 16 chips
  REQUIRE(env.run({"pool", "set-admins", "--admins", "alice"}).exit_code == 0);

  // Only an admin sets a quota; bad input is one line, and nothing changes.
  check_one_line(env.run_with({"pool", "quota", "set", "ml", "--chips", "8"}, k_bob), 5,
                 "only the admins of pool 'local'");
  CHECK(env.run_json({"pool", "quota", "list"}).empty());
  auto set = env.run({"pool", "quota", "set", "ml", "--chips", "8", "--format", "json"});
  REQUIRE_MESSAGE(set.exit_code == 0, set.err);
  CHECK(json::parse(set.out)["quota"] == 8);
  REQUIRE(env.run({"pool", "quota", "set", "infra", "--chips", "4"}).exit_code == 0);
  check_one_line(env.run({"pool", "quota", "set", "ml", "--chips", "-3"}), 2,
                 "quota -3 for project 'ml' is negative");
  check_one_line(env.run({"pool", "quota", "set", "ML_team", "--chips", "3"}), 2,
                 "'ML_team' is not a project id");
  check_one_line(env.run({"pool", "quota", "unset", "nosuch"}), 4,
                 "project 'nosuch' has no quota in pool 'local' (projects with one: infra, ml)");
  check_one_line(
      env.run({"qr", "create", "x", "--accelerator-type", "v5litepod-4", "--project", "No Such"}),
      2, "is not a project id");
  CHECK(quota_row(env, "ml")["quota"] == 8);
  CHECK(env.run_json({"pool", "describe"})["quotas"] == json{{"infra", 4}, {"ml", 8}});

  // Two of ml's requests fill its quota; the third waits, naming the quota and its users.
  for (const char* id : {"a1", "a2"}) {
    auto r = env.run({"qr", "create", id, "--accelerator-type", "v5litepod-4", "--project", "ml"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  }
  REQUIRE(env.run({"qr", "create", "a3", "--accelerator-type", "v5litepod-4", "--project", "ml",
                   "--async"})
              .exit_code == 0);
  auto a3 = env.describe("a3");
  CHECK(a3["state"] == "WAITING_FOR_RESOURCES");
  CHECK(a3["project"] == "ml");
  CHECK_MESSAGE(contains(a3["pending_reason"].get<std::string>(),
                         "over quota: project 'ml' has a quota of 8 chips in pool 'local', of "
                         "which 8 are in use ('a1' 4, 'a2' 4)"),
                a3.dump());
  // More than the whole quota: refused at once (exit 3), nothing stored.
  check_one_line(
      env.run({"qr", "create", "big", "--accelerator-type", "v5litepod-16", "--project", "ml"}), 3,
      "needs 16 chips, more than project 'ml''s whole quota of 8 in pool 'local'");
  CHECK(env.run({"qr", "describe", "big"}).exit_code == 4);
  // A quota below what the project's slices hold is refused, naming them.
  check_one_line(env.run({"pool", "quota", "set", "ml", "--chips", "4"}), 2,
                 "below the 8 chips its reserved and standard slices hold in pool 'local' ('a1' "
                 "4, 'a2' 4)");
  CHECK(quota_row(env, "ml")["quota"] == 8);
  CHECK(quota_row(env, "ml")["guaranteed_chips"] == 8);
  CHECK(quota_row(env, "ml")["waiting_chips"] == 4);

  // Fair share: a quota raised, a3 is placed, and bob's research request fills the pool. Then
  // ml (12 of 16 chips) and infra (0 of 4) both wait in the standard tier, ml first; the host
  // bob frees goes to infra.
  REQUIRE(env.run({"pool", "quota", "set", "ml", "--chips", "16"}).exit_code == 0);
  REQUIRE(env.run({"qr", "wait", "a3", "--timeout", "120s"}).exit_code == 0);
  auto r1 = env.run_with(
      {"qr", "create", "r1", "--accelerator-type", "v5litepod-4", "--project", "research"}, k_bob);
  REQUIRE_MESSAGE(r1.exit_code == 0, r1.err);
  REQUIRE(env.run({"qr", "create", "m5", "--accelerator-type", "v5litepod-4", "--project", "ml",
                   "--async"})
              .exit_code == 0);
  REQUIRE(env.run_with({"qr", "create", "i1", "--accelerator-type", "v5litepod-4", "--project",
                        "infra", "--async"},
                       k_bob)
              .exit_code == 0);
  auto m5 = env.describe("m5");
  CHECK(m5["state"] == "WAITING_FOR_RESOURCES");
  CHECK_MESSAGE(contains(m5["pending_reason"].get<std::string>(),
                         "fair share in tier standard: infra 0.00, ml 0.75 (the lowest is served "
                         "first)"),
                m5.dump());
  REQUIRE(env.run_with({"qr", "delete", "r1", "--force"}, k_bob).exit_code == 0);
  auto i1 = env.run_with({"qr", "wait", "i1", "--timeout", "120s"}, k_bob);
  REQUIRE_MESSAGE(i1.exit_code == 0, i1.err);
  CHECK(env.describe("m5")["state"] == "WAITING_FOR_RESOURCES");

  // Borrowing: ml at 8 of 8 again, its spot request borrows the host a3 leaves.
  REQUIRE(env.run({"qr", "delete", "m5", "--force"}).exit_code == 0);
  REQUIRE(env.run({"qr", "delete", "a3", "--force"}).exit_code == 0);
  REQUIRE(env.run({"pool", "quota", "set", "ml", "--chips", "8"}).exit_code == 0);
  auto s1 = env.run(
      {"qr", "create", "s1", "--accelerator-type", "v5litepod-4", "--project", "ml", "--spot"});
  REQUIRE_MESSAGE(s1.exit_code == 0, s1.err);
  CHECK(quota_row(env, "ml")["borrowed_chips"] == 4);
  // Reclaim: infra, within its (raised) quota, takes back what ml borrows. Alice's own commands
  // stop her slice (the pool's SSH work is each owner's); bob's carry his request on.
  REQUIRE(env.run({"pool", "quota", "set", "infra", "--chips", "8"}).exit_code == 0);
  REQUIRE(env.run_with({"qr", "create", "b1", "--accelerator-type", "v5litepod-4", "--project",
                        "infra", "--spot", "--async"},
                       k_bob)
              .exit_code == 0);
  auto preempted = env.describe("s1"); // SUSPENDING, or SUSPENDED once alice's command stopped it
  CHECK_MESSAGE((preempted["state"] == "SUSPENDING" || preempted["state"] == "SUSPENDED"),
                preempted.dump());
  bool reclaimed = false;
  for (const auto& h : preempted["history"]) {
    reclaimed = reclaimed || (h["to"] == "SUSPENDING" &&
                              h["reason"] == "preempted by 'b1' (spot, reclaiming the chips "
                                             "project 'ml' borrowed beyond its quota)");
  }
  CHECK_MESSAGE(reclaimed, preempted.dump());
  CHECK(env.run({"qr", "wait", "s1", "--for", "SUSPENDED", "--timeout", "120s"}).exit_code == 0);
  auto b1 = env.run_with({"qr", "wait", "b1", "--timeout", "120s"}, k_bob);
  REQUIRE_MESSAGE(b1.exit_code == 0, b1.err);
  CHECK(env.describe("a1")["state"] == "ACTIVE"); // within ml's quota: never reclaimed
  CHECK(env.describe("a2")["state"] == "ACTIVE");

  // Usage: every request gone, each project's chip-hours are its requests' ACTIVE time.
  for (const char* id : {"a1", "a2", "s1"}) {
    REQUIRE(env.run({"qr", "delete", id, "--force"}).exit_code == 0);
  }
  for (const char* id : {"i1", "b1"}) {
    REQUIRE(env.run_with({"qr", "delete", id, "--force"}, k_bob).exit_code == 0);
  }
  auto requests = env.run_json({"usage", "--by", "request", "--since", "1h"});
  std::map<std::string, double> chip_hours; // project -> from the requests' ACTIVE time
  for (const auto& r : requests) {
    CHECK(r["active_ms"].get<int64_t>() > 0);
    chip_hours[r["project"]] += r["active_ms"].get<double>() * r["chips"].get<int>() / 3600000.0;
  }
  CHECK(chip_hours.size() == 3); // ml, infra, research
  auto by_project = env.run_json({"usage", "--by", "project", "--since", "1h"});
  REQUIRE(by_project.size() == 3);
  for (const auto& row : by_project) {
    INFO(row.dump());
    // Rounded to 0.001 chip-hours in the report.
    CHECK(std::abs(row["chip_hours"].get<double>() - chip_hours[row["project"]]) <= 0.0006);
  }
  auto mine = env.run_json({"usage", "--project", "infra", "--since", "1h"});
  REQUIRE(mine.size() == 1);
  CHECK(mine[0]["project"] == "infra");
  CHECK(mine[0]["owner"] == "bob");
  CHECK(mine[0]["requests"] == 2);
  auto owners = env.run_json({"usage", "--by", "owner", "--project", "ml", "--since", "1h"});
  REQUIRE(owners.size() == 1); // only alice used ml
  CHECK(owners[0]["owner"] == "alice");
  CHECK(owners[0]["project"] == "ml");

  // The audit trail: every quota change with its actor, none for the refused ones; one
  // project's events are its requests' and its quota's.
  auto quota_events = env.run_json({"events", "--type", "QUOTA_SET"});
  REQUIRE(quota_events.size() == 5); // ml 8, infra 4, ml 16, ml 8, infra 8
  for (const auto& e : quota_events) {
    CHECK(e["actor"] == "alice");
  }
  CHECK(quota_events[0]["detail"]["previous"].is_null());
  auto admins = env.run_json({"events", "--type", "POOL_ADMINS_SET"});
  REQUIRE(admins.size() == 1);
  CHECK(admins[0]["actor"] == "alice");
  CHECK(admins[0]["detail"]["admins"] == json::array({"alice"}));
  // The reclaim is in s1's trail: the service suspended it, for b1, and why.
  bool reclaim_event = false;
  for (const auto& e : env.run_json({"events", "--object", "queued_resource/s1"})) {
    reclaim_event = reclaim_event || (e["to"] == "SUSPENDING" && e["initiator"] == "SERVICE" &&
                                      contains(e["detail_text"].get<std::string>(),
                                               "reclaiming the chips project 'ml' borrowed"));
  }
  CHECK(reclaim_event);
  auto infra = env.run_json({"events", "--project", "infra"});
  REQUIRE(!infra.empty());
  for (const auto& e : infra) {
    INFO(e.dump());
    CHECK(e["project"] == "infra");
    CHECK((e["object"] == "pool/local" || e["object"] == "queued_resource/i1" ||
           e["object"] == "queued_resource/b1"));
  }
}
