// One identity for a slice's worker, through the real binary on a local pool of real sshd
// servers (address block 127.166.x.y, owned by this file): every slice's lines, grouped headers
// and failure summaries name NODE/WORKER@HOST, jsonl carries node/slice/worker/host; and the
// lifecycle edges: PREEMPTED nodes in tpu-vm list/describe, tpu-vm delete refused under running
// workloads (and their failure naming the deleted slice), local-down of the only pool.
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/machine.hpp"
#include "tests/support/qr_env.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::QrEnv;
namespace fs = std::filesystem;

namespace {

std::vector<json> jsonl(const std::string& out) {
  std::vector<json> records;
  for (const auto& line : tpuctl::util::split(out, '\n')) {
    if (!line.empty()) {
      records.push_back(json::parse(line));
    }
  }
  return records;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// NODE/WORKER@HOST of every worker of a described queued resource.
std::vector<std::string> labels_of(const json& qr) {
  std::vector<std::string> out;
  for (const auto& n : qr["nodes"]) {
    for (const auto& w : n["workers"]) {
      out.push_back(w["node"].get<std::string>() + "/" + std::to_string(w["worker"].get<int>()) +
                    "@" + w["host"].get<std::string>());
    }
  }
  return out;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("identity: every slice of a 2-node request names its workers NODE/WORKER@HOST in lines, "
          "grouped headers, summaries; jsonl has node, slice, worker, host") {
  QrEnv env(4, tpuctl::test::free_address_base("127.166.", 0, 250, 4), "4x4");
  auto qr = env.run_json(
      {"qr", "create", "ms", "--accelerator-type", "v5litepod-4", "--node-count", "2"});
  REQUIRE(qr["state"] == "ACTIVE");
  const auto labels = labels_of(qr);
  REQUIRE(labels.size() == 2); // ms-0/0@HOST and ms-1/0@HOST
  // Times are text everywhere, the provisioning report's clock readings too: an *_ms number is
  // a duration, never a unix timestamp.
  std::function<void(const json&)> no_ms_times = [&](const json& j) {
    for (auto it = j.begin(); j.is_structured() && it != j.end(); ++it) {
      if (j.is_object() && it.key().size() > 3 &&
          it.key().compare(it.key().size() - 3, 3, "_ms") == 0) {
        CHECK_MESSAGE((!it.value().is_number() || it.value().get<double>() < 1e12), it.key());
      }
      no_ms_times(it.value());
    }
  };
  const json described = env.run_json({"qr", "describe", "ms"});
  no_ms_times(described);
  CHECK(described["provisioning"]["report"]["workers"][0]["facts"]["clock_at"].is_string());

  auto lines = env.run({"ssh", "ms", "--worker=all", "--command", "echo hi $TPU_WORKER_ID"});
  REQUIRE_MESSAGE(lines.exit_code == 0, lines.err);
  for (const auto& l : labels) {
    const std::string worker = l.substr(l.find('/') + 1, l.find('@') - l.find('/') - 1);
    CHECK_MESSAGE(contains(lines.out, "[" + l + "] hi " + worker + "\n"), lines.out);
  }

  auto grouped = env.run(
      {"ssh", "ms", "--worker=all", "--output", "grouped", "--command", "echo same; exit 3"});
  CHECK(grouped.exit_code == 3);
  for (const auto& l : labels) {
    CHECK_MESSAGE(contains(grouped.out, l), grouped.out); // the group's header
    CHECK_MESSAGE(contains(grouped.err, l), grouped.err); // the failure summary
  }
  CHECK(contains(grouped.err, "2 of 2 workers failed: "));
  CHECK(contains(grouped.err, " (exit 3)"));

  auto records = jsonl(env.run({"ssh", "ms", "--worker=all", "--output", "jsonl", "--command",
                                "echo $TPU_NAME $MEGASCALE_SLICE_ID $TPU_WORKER_ID"})
                           .out);
  REQUIRE(records.size() == 2);
  std::set<std::string> seen;
  for (const auto& r : records) {
    const std::string node = r["node"];
    const int slice = r["slice"], worker = r["worker"];
    CHECK(r["stdout"] == node + " " + std::to_string(slice) + " " + std::to_string(worker) + "\n");
    seen.insert(node + "/" + std::to_string(worker) + "@" + r["host"].get<std::string>());
    CHECK(r["error"].is_null());
  }
  CHECK(seen == std::set<std::string>(labels.begin(), labels.end()));

  // scp: the same identity, per worker and file.
  const fs::path file = env.dir.path() / "payload.txt";
  std::ofstream(file) << "payload\n";
  auto copied = env.run({"scp", file.string(), "ms:" + (env.dir.path() / "copied").string() + "/",
                         "--worker=all", "--output", "jsonl"});
  REQUIRE_MESSAGE(copied.exit_code == 0, copied.err);
  auto copies = jsonl(copied.out);
  REQUIRE(copies.size() == 2);
  for (const auto& c : copies) {
    CHECK(c["outcome"] == "ok");
    CHECK(c["source"] == file.string());
    CHECK(c["node"].is_string());
    CHECK(c["slice"].is_number());
    CHECK(c["worker"].is_number());
  }

  // pool ssh has no slices: hosts keep their names, and jsonl's node/slice/worker are null.
  auto pool = jsonl(env.run({"pool", "ssh", "--output", "jsonl", "--command", "true"}).out);
  REQUIRE(pool.size() == 4);
  CHECK(pool[0]["node"].is_null());
  CHECK(pool[0]["worker"].is_null());
  CHECK(!pool[0]["host"].get<std::string>().empty());
  REQUIRE(env.run({"qr", "delete", "ms", "--force", "-q"}).exit_code == 0);

  // tpu-vm delete of a node of a cluster with a running workload is refused without --force;
  // with it, the workload fails naming the deleted slice.
  REQUIRE(env.run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-4",
                   "--num-slices", "2", "-q"})
              .exit_code == 0);
  REQUIRE(env.run({"workload", "create", "--cluster", "demo", "--workload", "long", "--command",
                   "sleep 600", "--num-slices", "all", "-q"})
              .exit_code == 0);
  auto refused = env.run({"tpu-vm", "delete", "demo-1"});
  CHECK(refused.exit_code == 1);
  CHECK(contains(refused.err, "cluster 'demo', which has running workloads (long)"));
  CHECK(env.run_json({"tpu-vm", "list"}).size() == 2);
  auto forced = env.run({"tpu-vm", "delete", "demo-1", "--force"});
  REQUIRE_MESSAGE(forced.exit_code == 0, forced.err);
  auto failed = env.run({"workload", "wait", "long", "--timeout", "90s", "--format", "json"});
  CHECK(failed.exit_code == 1);
  CHECK_MESSAGE(contains(failed.err, "its slice 'demo-1' was deleted"), failed.err);
  // The workload and cluster records follow the one schema: workers lead with node, slice,
  // worker, host; times are text; counts are *_count; error is null or an object.
  const auto wl = nlohmann::ordered_json::parse(failed.out); // in the order printed
  CHECK(wl["worker_count"] == 2);
  CHECK(wl["running"] == 0);
  CHECK(wl["finished_at"].is_string());
  for (const auto& w : wl["workers"]) {
    std::vector<std::string> first;
    for (auto it = w.begin(); it != w.end() && first.size() < 4; ++it) {
      first.push_back(it.key());
    }
    CHECK(first == std::vector<std::string>{"node", "slice", "worker", "host"});
    CHECK((w["exit_code"].is_null() || w["exit_code"].is_number()));
    CHECK((w["last_heartbeat"].is_null() || w["last_heartbeat"].is_string()));
  }
  for (auto it = wl.begin(); it != wl.end(); ++it) {
    CHECK_MESSAGE(!(it.key().size() > 3 && it.key().rfind("_ms") == it.key().size() - 3 &&
                    it.key() != "timeout_ms"),
                  it.key());
  }
  const json cluster = env.run_json({"cluster", "describe", "demo"});
  CHECK(cluster["error"].is_null());
  REQUIRE(cluster["slices"].size() == 1); // demo-1 was deleted
  CHECK(cluster["slices"][0]["name"] == "demo-0");
  CHECK(cluster["slices"][0]["workers"][0]["node"] == "demo-0");
  CHECK(cluster["created_at"].is_string());
  REQUIRE(env.run({"cluster", "delete", "demo", "--force", "-q"}).exit_code == 0);

  // A preempted (SUSPENDED by the service) request's node shows as PREEMPTED.
  REQUIRE(env.run({"qr", "create", "fx", "--accelerator-type", "v5litepod-4",
                   "--provisioning-model", "flex-start", "--max-run-duration", "2s", "-q"})
              .exit_code == 0);
  auto suspended = env.run({"qr", "wait", "fx", "--for=state=SUSPENDED", "--timeout", "60s"});
  REQUIRE_MESSAGE(suspended.exit_code == 0, suspended.err);
  auto nodes = env.run_json({"tpu-vm", "list"});
  REQUIRE(nodes.size() == 1);
  CHECK(nodes[0]["name"] == "fx");
  CHECK(nodes[0]["state"] == "PREEMPTED");
  CHECK(nodes[0]["workers"].empty());
  CHECK(env.run({"tpu-vm", "describe", "fx", "--format", "value(state)"}).out == "PREEMPTED\n");
}

TEST_CASE("identity: pool local-down takes the only pool and removes its files") {
  tpuctl::test::TempDir dir;
  std::map<std::string, std::string> vars{{"HOME", dir.path().string()},
                                          {"XDG_STATE_HOME", (dir.path() / "state").string()},
                                          {"XDG_CONFIG_HOME", (dir.path() / "config").string()}};
  const std::string base = tpuctl::test::free_address_base("127.166.", 0, 250, 2);
  auto up = tpuctl::test::run_tpuctl({"--pool", "lab", "pool", "local-up", "--hosts", "2",
                                      "--address-base", base, "--port", "2222"},
                                     vars);
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  const fs::path files = dir.path() / "state" / "tpuctl" / "local-pools" / "lab";
  REQUIRE(fs::exists(files));
  auto down = tpuctl::test::run_tpuctl({"pool", "local-down", "--format", "json"}, vars);
  REQUIRE_MESSAGE(down.exit_code == 0, down.err);
  const auto j = json::parse(down.out);
  CHECK(j["pool"] == "lab");
  CHECK(j["sshd_stopped"] == 2);
  CHECK(j["removed_dir"] == files.string());
  CHECK_FALSE(fs::exists(files));
  CHECK(tpuctl::test::run_tpuctl({"pool", "list", "--format", "json"}, vars).out == "[]\n");
}

TEST_SUITE_END();
