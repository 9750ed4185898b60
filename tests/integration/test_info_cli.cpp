// `tpuctl info --cluster C [--localqueue|--clusterqueue]`, xpk's info, through the binary on a
// local pool of real sshd (this file's block 127.0.131.x): a cluster of two v5litepod-4 slices,
// one workload running on one slice and one waiting for both; the local and the cluster queue
// show 1 admitted, 1 pending and 4/8 chips, in text as xpk prints them and in json; once the
// first is deleted the second is admitted with 8/8. The two filters are exclusive, a missing
// cluster is one line, and neither changes anything.
#include <algorithm>
#include <sstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/workload_env.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::contains;
using tpuctl::test::wait_until;

TEST_SUITE_BEGIN("integration");

TEST_CASE("info shows a cluster's queue as xpk's does: admitted, pending, chips in use") {
  tpuctl::test::WorkloadEnv env(2, "127.0.131.2");
  auto created = env.run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-4",
                          "--num-slices", "2"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  env.create_workload("demo", "running", "sleep 600");
  env.create_workload("demo", "waiting", "sleep 600", {"--num-slices", "2"});
  auto state = [&](const std::string& name) {
    return env.run_json({"workload", "describe", name})["state"].get<std::string>();
  };
  CHECK(state("waiting") == "QUEUED");

  auto text = env.run({"info", "--cluster", "demo"});
  REQUIRE_MESSAGE(text.exit_code == 0, text.err);
  CHECK(contains(text.out, "Local Queues usage\n"));
  CHECK(contains(text.out, "Cluster Queues usage\n"));
  CHECK(contains(text.out, "2xv5litepod-4:google.com/tpu"));
  for (const std::string queue : {"multislice-queue", "cluster-queue"}) {
    bool found = false;
    for (const auto& line : tpuctl::util::split(text.out, '\n')) {
      if (line.rfind(queue + " ", 0) == 0) {
        found = true;
        std::istringstream words(line);
        std::string name, admitted, pending, chips;
        words >> name >> admitted >> pending >> chips;
        CHECK(admitted == "1");
        CHECK(pending == "1");
        CHECK(chips == "4/8");
      }
    }
    CHECK_MESSAGE(found, queue << " in\n" << text.out);
  }

  auto j = env.run_json({"info", "--cluster", "demo"});
  CHECK(j["workloads"] == json::parse(R"([{"name": "running", "queue_state": "admitted"},
                                           {"name": "waiting", "queue_state": "pending"}])"));
  CHECK(j["local_queue"]["queue"] == "multislice-queue");
  CHECK(j["cluster_queue"]["chips_used"] == 4);
  CHECK(j["cluster_queue"]["chips_total"] == 8);

  auto local = env.run_json({"info", "--cluster", "demo", "--localqueue"});
  CHECK(local.contains("local_queue"));
  CHECK_FALSE(local.contains("cluster_queue"));
  auto cq = env.run_json({"info", "--cluster", "demo", "--clusterqueue"});
  CHECK(cq.contains("cluster_queue"));
  CHECK_FALSE(cq.contains("local_queue"));

  auto both = env.run({"info", "--cluster", "demo", "--localqueue", "--clusterqueue"});
  CHECK(both.exit_code == 2);
  CHECK(tpuctl::test::contains(both.err, "--localqueue"));
  CHECK(std::count(both.err.begin(), both.err.end(), '\n') == 1);
  auto missing = env.run({"info", "--cluster", "nope"});
  CHECK(missing.exit_code != 0);
  CHECK(contains(missing.err, "nope"));
  CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 1);

  // The running one goes; the waiting one is admitted onto both slices.
  auto deleted = env.run({"workload", "delete", "running", "--cluster", "demo"});
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.err);
  CHECK(wait_until([&] { return state("waiting") != "QUEUED"; }, std::chrono::minutes(2)));
  auto after = env.run_json({"info", "--cluster", "demo"});
  CHECK(after["workloads"] ==
        json::parse(R"([{"name": "waiting", "queue_state": "admitted"}])"));
  CHECK(after["local_queue"]["chips_used"] == 8);
  CHECK(after["local_queue"]["admitted_workloads"] == 1);
}
