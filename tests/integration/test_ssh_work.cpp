// Who does the SSH work of a shared pool, through the real binary on a real etcd with
// authentication on (alice and bob, and the controller's own user ctl, each with a role on the
// team's prefix) and real sshd on the address block 127.0.246.x (owned by this file):
//  * a pool made on etcd gives each owner their own work: Bob's commands leave Alice's request
//    waiting, saying for whom, and Alice's own command carries it on;
//  * a controller pool is carried only by the elected `tpuctl controller run`: two controllers
//    elect one leader, the leader is SIGKILLed in the middle of provisioning, and the other
//    takes the leadership over and finishes the request; workloads there are started and
//    watched by the monitors the leader starts.
#include <csignal>
#include <fstream>
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
const std::map<std::string, std::string> k_ctl = tpuctl::test::etcd_user("ctl");

// The process's state letter in /proc/PID/stat ('T' when stopped); ' ' when it is gone.
char process_state(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) {
    return ' ';
  }
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? ' ' : line[close + 2];
}

} // namespace

TEST_CASE("ssh work: on an etcd pool each owner carries their own requests; another's command "
          "leaves them waiting and says for whom") {
  EtcdCluster etcd(1);
  etcd.enable_auth("/team/", {{"alice", "alice-pw"}, {"bob", "bob-pw"}});
  WorkloadEnv env(4, "127.0.246.2", "", 0, etcd.url("/team/"), k_alice);
  auto pool = env.run_json({"pool", "describe"});
  CHECK(pool["ssh_work"] == "owner"); // the default of a pool made on etcd
  // Bob takes the whole pool; Alice's request waits for room.
  auto b1 = env.run_with({"qr", "create", "b1", "--accelerator-type", "v5litepod-16"}, k_bob);
  REQUIRE_MESSAGE(b1.exit_code == 0, b1.err);
  auto a1 = env.run({"qr", "create", "a1", "--accelerator-type", "v5litepod-4", "--async"});
  REQUIRE_MESSAGE(a1.exit_code == 0, a1.err);
  CHECK(env.describe("a1")["state"] == "WAITING_FOR_RESOURCES");
  // Bob's delete frees the hosts: Alice's request is placed (PROVISIONING), but neither Bob's
  // command nor anything it starts provisions it with Bob's keys: it waits for Alice.
  auto freed = env.run_with({"qr", "delete", "b1", "--force"}, k_bob);
  REQUIRE_MESSAGE(freed.exit_code == 0, freed.err);
  auto listed = env.run_with({"qr", "list", "--format", "json"}, k_bob);
  REQUIRE(listed.exit_code == 0);
  auto waiting = env.describe("a1");
  CHECK(waiting["state"] == "PROVISIONING");
  CHECK_MESSAGE(contains(waiting["waiting_for"].get<std::string>(), "waiting for its owner alice"),
                waiting.dump());
  CHECK(contains(waiting["reason"].get<std::string>(), "waiting for its owner alice"));
  CHECK_FALSE(waiting["provisioning"].contains("report")); // nothing was provisioned
  // Alice's own command carries it on, and the note goes.
  auto done = env.run({"qr", "wait", "a1", "--timeout", "120s"});
  REQUIRE_MESSAGE(done.exit_code == 0, done.err);
  auto active = env.describe("a1");
  CHECK(active["state"] == "ACTIVE");
  CHECK(active["waiting_for"] == "");
  // Bad input changes nothing: an unknown policy; a controller needs no such store rule here
  // (etcd holds elections), so it is accepted, and set back.
  auto bad = env.run({"pool", "set-ssh-work", "--by", "everyone"});
  CHECK(bad.exit_code == 2);
  CHECK_MESSAGE(bad.err == "tpuctl: error: who does the SSH work: 'everyone' is not one of owner, "
                           "controller, anyone\n",
                bad.err);
  CHECK(env.run_json({"pool", "describe"})["ssh_work"] == "owner");
  auto admins = env.run({"pool", "set-admins", "--admins", "alice"});
  REQUIRE(admins.exit_code == 0);
  CHECK(env.run_with({"pool", "set-ssh-work", "--by", "anyone"}, k_bob).exit_code == 5);
  CHECK(env.run_json({"pool", "describe"})["ssh_work"] == "owner");
}

TEST_CASE("ssh work: a controller pool is carried by the elected controller; its leader "
          "SIGKILLed mid-provisioning, the other takes over and finishes the request") {
  EtcdCluster etcd(1);
  etcd.enable_auth("/team/", {{"alice", "alice-pw"}, {"bob", "bob-pw"}, {"ctl", "ctl-pw"}});
  WorkloadEnv env(4, "127.0.246.20", "", 0, etcd.url("/team/"), k_alice);
  auto set = env.run({"pool", "set-ssh-work", "--by", "controller", "--format", "json"});
  REQUIRE_MESSAGE(set.exit_code == 0, set.err);
  CHECK(json::parse(set.out)["ssh_work"] == "controller");

  // Controller A leads, and stops itself once it has claimed the hosts of a request (the
  // failpoint), so it can be SIGKILLed in the middle of provisioning; B stands by.
  auto a_env = k_ctl;
  a_env["TPUCTL_FAILPOINT"] = "provision.claimed:stop";
  auto a = env.start({"controller", "run", "--interval", "500ms"}, "controller-a", a_env);
  REQUIRE(wait_until([&] { return contains(a->err(), "leading as"); }, std::chrono::seconds(30)));
  auto b = env.start({"controller", "run", "--interval", "500ms"}, "controller-b", k_ctl);
  REQUIRE(wait_until([&] { return contains(b->err(), "standing by"); }, std::chrono::seconds(30)));

  // Alice's request is recorded by her command and carried by the controller alone.
  auto a1 = env.run({"qr", "create", "a1", "--accelerator-type", "v5litepod-4", "--async"});
  REQUIRE_MESSAGE(a1.exit_code == 0, a1.err);
  REQUIRE(wait_until([&] { return process_state(a->pid()) == 'T'; }, std::chrono::seconds(60)));
  CHECK(env.describe("a1")["state"] == "PROVISIONING");
  ::kill(a->pid(), SIGKILL);
  CHECK(a->wait(std::chrono::seconds(10)).value_or(0) == 128 + SIGKILL);

  // B leads once A's lease runs out and finishes the provisioning A held.
  auto done = env.run({"qr", "wait", "a1", "--timeout", "120s"});
  REQUIRE_MESSAGE(done.exit_code == 0, (done.err + "\nB: " + b->err()));
  CHECK(env.describe("a1")["state"] == "ACTIVE");
  CHECK(contains(b->err(), "leading as"));

  // A workload there: recorded by Alice's command, started and watched by the controller's
  // monitor (Alice's command starts none).
  auto c = env.run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-4"});
  REQUIRE_MESSAGE(c.exit_code == 0, (c.err + "\nB: " + b->err()));
  auto w = env.run({"workload", "create", "--cluster", "c", "--workload", "w", "--command",
                    "sleep 300", "--format", "json"});
  REQUIRE_MESSAGE(w.exit_code == 0, w.err);
  const json created = json::parse(w.out);
  env.uids.push_back(created["uid"]);
  CHECK(created["state"] == "QUEUED");
  CHECK(contains(created["message"].get<std::string>(), "waiting for the pool's controller"));
  REQUIRE_MESSAGE(wait_until(
                      [&] {
                        return env.run_json({"workload", "describe", "w"})["state"] == "RUNNING";
                      },
                      std::chrono::seconds(90)),
                  (env.run({"workload", "describe", "w"}).out + "\nB: " + b->err()));
  auto deleted = env.run({"workload", "delete", "w"});
  CHECK_MESSAGE(deleted.exit_code == 0, deleted.err);
  ::kill(b->pid(), SIGINT);
  CHECK(b->wait(std::chrono::seconds(30)).has_value());
}

TEST_CASE("ssh work: a pool on SQLite is anyone's; a controller, which needs elections, is refused "
          "there in one line and nothing changes") {
  WorkloadEnv env(1, "127.0.246.40");
  CHECK(env.run_json({"pool", "describe"})["ssh_work"] == "anyone");
  auto refused = env.run({"pool", "set-ssh-work", "--by", "controller"});
  CHECK(refused.exit_code == 2);
  CHECK_MESSAGE(contains(refused.err, "a controller is elected in an etcd store"), refused.err);
  CHECK(env.run_json({"pool", "describe"})["ssh_work"] == "anyone");
  auto owner = env.run({"pool", "set-ssh-work", "--by", "owner", "--format", "json"});
  REQUIRE_MESSAGE(owner.exit_code == 0, owner.err);
  CHECK(env.run_json({"pool", "describe"})["ssh_work"] == "owner");
  // Its owner's own command still carries everything on.
  auto q = env.run({"qr", "create", "q", "--accelerator-type", "v5litepod-4"});
  CHECK_MESSAGE(q.exit_code == 0, q.err);
  CHECK(env.describe("q")["state"] == "ACTIVE");
}
