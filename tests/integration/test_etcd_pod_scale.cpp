// Pod scale on the shared store, through the real binary and a real etcd (issue 16): slices above
// the old 125-host cap on real sshd hosts, a whole 2,304-host tpu7x pod claimed and released,
// a request whose placement the store refuses failing on its own while every other command
// works, a delete that does only its own work, and eight concurrent 288-host requests from two
// machines while the etcd leader is killed.
//
// Addresses: sshd pools on 127.132.S.x (S probed free), hosts nothing listens on in 127.133.x.y
// and 127.134.x.y (connection refused at once); etcd on 127.130.0.0/16 (etcd_fixture.hpp).
#include <csignal>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "provision/queue/reconcile.hpp"
#include "state/location.hpp"
#include "tests/support/etcd_fixture.hpp"
#include "tests/support/machine.hpp"

using nlohmann::json;
using namespace tpuctl;
using tpuctl::test::EtcdCluster;
using tpuctl::test::Machine;
using tpuctl::test::unique_prefix;

namespace {

EtcdCluster& one() {
  static EtcdCluster c(1);
  return c;
}

std::string sshd_base(int hosts) {
  return test::free_address_base("127.132.", 0, 250, hosts);
}

// host name -> owner, for every claimed host of the pool.
std::map<std::string, std::string> claims_of(const Machine& m, const std::string& pool) {
  std::map<std::string, std::string> out;
  for (const auto& h : m.run_json({"pool", "hosts", "--pool", pool})) {
    if (!h["claimed_by"].get<std::string>().empty()) {
      out[h["name"]] = h["claimed_by"];
    }
  }
  return out;
}

std::vector<std::string> states_of(const json& qr) {
  std::vector<std::string> out;
  for (const auto& h : qr["history"]) {
    out.push_back(h["to"]);
  }
  return out;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("pod scale: a 128-host v5p-1024 slice of real sshd hosts becomes ACTIVE on etcd") {
  Machine m(one().url(unique_prefix()));
  auto up = m.run({"pool", "local-up", "--hosts", "128", "--generation", "v5p", "--address-base",
                   sshd_base(128), "--port", "2222"});
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  auto created =
      m.run({"qr", "create", "big", "--accelerator-type", "v5p-1024", "--format", "json"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  json qr = json::parse(created.out);
  CHECK(qr["state"] == "ACTIVE");
  REQUIRE(qr["nodes"].size() == 1);
  CHECK(qr["nodes"][0]["workers"].size() == 128);
  auto claims = claims_of(m, "local");
  CHECK(claims.size() == 128);
  for (const auto& w : qr["nodes"][0]["workers"]) {
    CHECK(claims[w["host"]] == "big");
  }
  // The environment every worker gets names all 128 workers.
  auto env = m.run({"ssh", "big", "--worker=all", "--command",
                    "echo $TPU_WORKER_ID $(echo $TPU_WORKER_HOSTNAMES | tr , '\\n' | wc -l)"});
  REQUIRE_MESSAGE(env.exit_code == 0, env.err);
  std::set<std::string> ids;
  std::istringstream lines(env.out);
  for (std::string line; std::getline(lines, line);) {
    CHECK(line.substr(line.rfind(' ') + 1) == "128");
    ids.insert(line.substr(0, line.rfind(' ')));
  }
  CHECK(ids.size() == 128);
  auto listed = m.run({"qr", "list"});
  CHECK(listed.exit_code == 0);
  auto del = m.run({"qr", "delete", "big", "--force"});
  CHECK_MESSAGE(del.exit_code == 0, del.err);
  CHECK(claims_of(m, "local").empty());
  auto down = m.run({"pool", "local-down"});
  CHECK_MESSAGE(down.exit_code == 0, down.err);
}

TEST_CASE("pod scale: a whole tpu7x pod of 2,304 hosts is migrated to etcd, claimed, released, "
          "drained and removed in single commands") {
  // Made on SQLite, moved to etcd as a team would when it starts sharing it.
  Machine m;
  REQUIRE(m.run({"pool", "create", "pod", "--generation", "tpu7x"}).exit_code == 0);
  // Nothing listens on these: provisioning fails at the push, on every worker.
  const std::string all = "127.133.[0-8].[0-255]";
  auto added = m.run({"pool", "add-hosts", "--pool", "pod", all});
  REQUIRE_MESSAGE(added.exit_code == 0, added.err);
  std::string url = one().url(unique_prefix());
  auto migrated = m.run({"state", "migrate", "--to", url});
  REQUIRE_MESSAGE(migrated.exit_code == 0, migrated.err);
  m.vars["TPUCTL_STATE"] = url;
  auto pool = m.run_json({"pool", "describe", "--pool", "pod"});
  CHECK(pool["hosts"] == 2304);
  CHECK(pool["host_list"].size() == 2304);

  auto created = m.run({"qr", "create", "whole", "--pool", "pod", "--accelerator-type",
                        "tpu7x-18432", "--format", "json"});
  CHECK(created.exit_code == 1); // FAILED
  json qr = m.run_json({"qr", "describe", "whole", "--pool", "pod"});
  CHECK(qr["state"] == "FAILED");
  CHECK(states_of(qr) ==
        std::vector<std::string>{"ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "FAILED"});
  CHECK(qr["history"][2]["reason"] == "placed on 2304 hosts");
  CHECK(qr["error"]["message"].get<std::string>().find("agent push failed") != std::string::npos);
  CHECK(claims_of(m, "pod").empty());
  CHECK(m.run({"qr", "list", "--pool", "pod"}).exit_code == 0);
  CHECK(m.run({"qr", "delete", "whole", "--pool", "pod"}).exit_code == 0);

  // Bulk host changes of the whole pod, each one command and one transaction.
  auto drained = m.run({"pool", "drain", "--pool", "pod", all, "--reason", "retired"});
  REQUIRE_MESSAGE(drained.exit_code == 0, drained.err);
  CHECK(m.run_json({"pool", "describe", "--pool", "pod"})["drained"] == 2304);
  auto undrained = m.run({"pool", "undrain", "--pool", "pod", all});
  REQUIRE_MESSAGE(undrained.exit_code == 0, undrained.err);
  CHECK(m.run_json({"pool", "describe", "--pool", "pod"})["free"] == 2304);
  auto removed = m.run({"pool", "remove-hosts", "--pool", "pod", all});
  REQUIRE_MESSAGE(removed.exit_code == 0, removed.err);
  CHECK(m.run_json({"pool", "describe", "--pool", "pod"})["hosts"] == 0);
  // An inventory of 300 hosts imports whole.
  json inventory{{"hosts", json::array()}};
  for (int i = 0; i < 300; ++i) {
    inventory["hosts"].push_back(
        {{"host", "127.133." + std::to_string(i / 200) + "." + std::to_string(i % 200)},
         {"labels", {{"rack", "r" + std::to_string(i / 32)}}}});
  }
  std::string file = (m.dir.path() / "inventory.json").string();
  std::ofstream(file) << inventory.dump();
  auto imported = m.run({"pool", "import", "--pool", "pod", file});
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.err);
  CHECK(m.run_json({"pool", "describe", "--pool", "pod"})["hosts"] == 300);
  auto down = m.run({"pool", "delete", "pod", "--force"});
  CHECK_MESSAGE(down.exit_code == 0, down.err);
}

TEST_CASE("pod scale: a request whose placement the store refuses fails on its own; the pool "
          "stays usable") {
  // The reported wedge: a 256-host pool moved from SQLite to etcd, then a request the store
  // cannot record. Here the store's limit is made small (TPUCTL_ETCD_MAX_REQUEST_BYTES) so that
  // the big request's placement cannot be committed, as 258 compares could not before.
  Machine m;
  REQUIRE(m.run({"pool", "create", "big", "--generation", "v5p", "--shape", "8x8x16"}).exit_code ==
          0);
  auto added = m.run({"pool", "add-hosts", "--pool", "big", "127.134.0.[0-255]"});
  REQUIRE_MESSAGE(added.exit_code == 0, added.err);
  std::string url = one().url(unique_prefix());
  auto migrated = m.run({"state", "migrate", "--to", url});
  REQUIRE_MESSAGE(migrated.exit_code == 0, migrated.err);
  m.vars["TPUCTL_STATE"] = url;
  m.vars["TPUCTL_ETCD_MAX_REQUEST_BYTES"] = "65536";
  std::string script = (m.dir.path() / "script.sh").string();
  {
    std::ofstream out(script);
    out << "#!/bin/sh\n";
    for (int i = 0; i < 450; ++i) {
      out << "echo 'a startup script long enough to fill half of the store limit' " << i << "\n";
    }
  }
  // A request the pool can never hold is refused at once, with nothing stored.
  auto never = m.run({"qr", "create", "huge", "--pool", "big", "--accelerator-type", "v5p-4096"});
  CHECK(never.exit_code == 3);
  CHECK(m.run({"qr", "describe", "huge", "--pool", "big"}).exit_code == 4);

  auto created = m.run({"qr", "create", "wedge", "--pool", "big", "--accelerator-type", "v5p-2048",
                        "--metadata-from-file", "startup-script=" + script});
  CHECK(created.exit_code == 1);
  CHECK(created.err.find("STATE_STORE_REFUSED") != std::string::npos);
  // Every other command works, and says what happened.
  auto listed = m.run({"qr", "list", "--pool", "big", "--format", "json"});
  REQUIRE_MESSAGE(listed.exit_code == 0, listed.err);
  json list = json::parse(listed.out);
  REQUIRE(list.size() == 1);
  CHECK(list[0]["state"] == "FAILED");
  CHECK(list[0]["error"]["code"] == "STATE_STORE_REFUSED");
  CHECK(list[0]["error"]["message"].get<std::string>().find("above the store's limit of 65536") !=
        std::string::npos);
  auto described = m.run({"pool", "describe", "--pool", "big"});
  CHECK_MESSAGE(described.exit_code == 0, described.err);
  CHECK(claims_of(m, "big").empty());
  // Another request is placed as usual (and fails at the push: nothing listens).
  auto small = m.run({"qr", "create", "small", "--pool", "big", "--accelerator-type", "v5p-8"});
  CHECK(small.exit_code == 1);
  CHECK(states_of(m.run_json({"qr", "describe", "small", "--pool", "big"}))[2] == "PROVISIONING");
  auto del = m.run({"qr", "delete", "wedge", "--pool", "big", "--force"});
  CHECK_MESSAGE(del.exit_code == 0, del.err);
  CHECK(m.run({"qr", "describe", "wedge", "--pool", "big"}).exit_code == 4);
}

TEST_CASE("pod scale: a delete does its own work and hands a request it unblocks to a driver") {
  Machine m(one().url(unique_prefix()));
  auto up = m.run({"pool", "local-up", "--hosts", "4", "--generation", "v5e", "--address-base",
                   sshd_base(4), "--port", "2222"});
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  auto ra = m.run({"qr", "create", "ra", "--accelerator-type", "v5litepod-16"});
  REQUIRE_MESSAGE(ra.exit_code == 0, ra.err);
  std::string script = (m.dir.path() / "slow.sh").string();
  std::ofstream(script) << "#!/bin/sh\nsleep 60\n";
  auto rb = m.run({"qr", "create", "rb", "--accelerator-type", "v5litepod-16", "--async",
                   "--metadata-from-file", "startup-script=" + script});
  REQUIRE_MESSAGE(rb.exit_code == 0, rb.err);
  CHECK(m.run_json({"qr", "describe", "rb"})["state"] == "WAITING_FOR_RESOURCES");

  auto del = m.run({"qr", "delete", "ra", "--force"});
  REQUIRE_MESSAGE(del.exit_code == 0, del.err);
  // rb took ra's hosts, but its provisioning (a 60 s startup script) is not the delete's: the
  // delete has returned while rb is still PROVISIONING, carried by a detached driver.
  json b = m.run_json({"qr", "describe", "rb"});
  CHECK(b["state"] == "PROVISIONING");
  // Its lease (kept out of `describe`) names a live process, not the delete that has exited.
  state::OpenOptions o;
  auto store = state::open_store(m.vars["TPUCTL_STATE"], o);
  REQUIRE(store);
  int driver = 0;
  for (int i = 0; i < 100 && driver == 0; ++i) {
    auto rec = (*store)->get(state::queued_resource_key("local", "rb"));
    REQUIRE(rec);
    driver = rec->doc["provisioning"].value("lease", json::object()).value("pid", 0);
    if (driver == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  REQUIRE(driver > 0);
  CHECK(::kill(driver, 0) == 0);
  CHECK(m.run_json({"qr", "describe", "rb"})["state"] == "PROVISIONING");
  auto gone = m.run({"qr", "delete", "rb", "--force"});
  CHECK_MESSAGE(gone.exit_code == 0, gone.err);
  CHECK(claims_of(m, "local").empty());
  CHECK(m.run({"pool", "local-down"}).exit_code == 0);
}

TEST_CASE("pod scale: eight 288-host requests from two machines at once, the etcd leader killed "
          "in the middle, end with every host claimed at most once") {
  EtcdCluster three(3);
  std::string url = three.url(unique_prefix());
  Machine a(url), b(url);
  REQUIRE(a.run({"pool", "create", "pod", "--generation", "tpu7x"}).exit_code == 0);
  REQUIRE(a.run({"pool", "add-hosts", "--pool", "pod", "127.133.[0-8].[0-255]"}).exit_code == 0);
  // Every driver dies right after its claim (as a killed tpuctl would), so requests stay
  // PROVISIONING holding their hosts and the claims can be checked against them.
  for (Machine* m : {&a, &b}) {
    m->vars["TPUCTL_FAILPOINT"] = "provision.claimed";
  }
  std::vector<std::thread> threads;
  std::vector<util::ProcessResult> results(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      results[static_cast<size_t>(i)] =
          (i % 2 ? b : a)
              .run({"qr", "create", "r" + std::to_string(i), "--pool", "pod", "--accelerator-type",
                    "tpu7x-2304", "--async", "--quiet"});
    });
    if (i == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      three.kill(three.leader());
    }
  }
  for (auto& t : threads) {
    t.join();
  }
  // What a user checks afterwards, through the store (no command that would drive anything).
  state::OpenOptions o;
  auto store = state::open_store(url, o);
  REQUIRE_MESSAGE(store, (store ? "" : store.error().message));
  // Requests whose create got an answer are there; a create whose outcome was unknown says so.
  auto listing = (*store)->list(state::Kind::queued_resource, "pod");
  REQUIRE(listing);
  std::set<std::string> ids;
  for (const auto& r : listing->records) {
    ids.insert(r.key.id);
  }
  for (int i = 0; i < 8; ++i) {
    const auto& r = results[static_cast<size_t>(i)];
    INFO("r" << i << " exit " << r.exit_code << ": " << r.err);
    if (r.exit_code == 0) {
      CHECK(ids.count("r" + std::to_string(i)) == 1);
    } else {
      CHECK(r.err.find("unknown") != std::string::npos);
    }
  }
  // Place whatever the killed drivers left unplaced, then compare claims with requests.
  REQUIRE(provision::reconcile_pool(**store, "pod", state::system_clock()));
  auto claims = (*store)->claims("pod");
  REQUIRE(claims);
  std::map<std::string, std::set<std::string>> held;
  std::set<std::string> hosts;
  for (const auto& c : *claims) {
    CHECK(hosts.insert(c.host).second);
    held[c.owner].insert(c.host);
  }
  listing = (*store)->list(state::Kind::queued_resource, "pod");
  REQUIRE(listing);
  CHECK(listing->records.size() == ids.size());
  for (const auto& r : listing->records) {
    INFO(r.key.id << " " << r.doc["state"]);
    CHECK(r.doc["state"] == "PROVISIONING");
    std::set<std::string> workers;
    for (const auto& n : r.doc["nodes"]) {
      for (const auto& w : n["workers"]) {
        workers.insert(w["host"]);
      }
    }
    CHECK(workers.size() == 288);
    CHECK(held[r.key.id] == workers);
  }
  CHECK(held.size() == listing->records.size());
  CHECK(claims->size() == 288 * listing->records.size());
}
