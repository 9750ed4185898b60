// tpuctl agent spmd-matmul through the real binary on slices of a local pool of real sshd
// servers (address block 127.120.1.x - 127.120.3.x, owned by this file), started on every worker
// by `tpuctl ssh --worker=...` exactly as a user would: the worker environment, the rendezvous at
// JAX_COORDINATOR_ADDRESS, the ring across workers and slices, the checksum, and a missing peer.
#include <chrono>
#include <set>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/qr_env.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::QrEnv;
using tpuctl::test::worker_hosts;

namespace {

// One record per worker of `tpuctl ssh --output jsonl`, its stdout parsed as spmd-matmul's
// --format json object (null when the worker printed none).
std::vector<json> records(const std::string& jsonl) {
  std::vector<json> out;
  for (const auto& line : tpuctl::util::split(jsonl, '\n')) {
    if (line.empty()) {
      continue;
    }
    json rec = json::parse(line);
    const std::string text = rec["stdout"];
    rec["result"] = text.empty() ? json() : json::parse(text);
    out.push_back(rec);
  }
  return out;
}

std::vector<std::string> spmd(const std::vector<std::string>& extra) {
  std::vector<std::string> args{"tpuctl", "agent", "spmd-matmul", "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> ssh(const std::string& target, const std::string& workers,
                             const std::vector<std::string>& command) {
  std::vector<std::string> args{"ssh", target, "--worker=" + workers, "--output", "jsonl", "--"};
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("spmd-matmul: a 4-worker slice computes, gathers and verifies C; a missing peer is "
          "named within the timeout; usage errors exit 2") {
  QrEnv env(4, "127.120.1.2");
  auto qr = env.run_json({"qr", "create", "s1", "--accelerator-type", "v5litepod-16"});
  REQUIRE(qr["state"] == "ACTIVE");
  const auto hosts = worker_hosts(qr);
  REQUIRE(hosts.size() == 4);

  for (const auto& [dtype, mesh] : {std::pair<std::string, std::string>{"int8", "4,1"},
                                    std::pair<std::string, std::string>{"bf16", "2,2"}}) {
    CAPTURE(dtype);
    auto r = env.run(ssh("s1", "all",
                         spmd({"--m", "256", "--n", "256", "--k", "256", "--dtype", dtype, "--mesh",
                               mesh, "--timeout", "20s", "--seed", "7"})));
    CHECK_MESSAGE(r.exit_code == 0, r.err);
    auto recs = records(r.out);
    REQUIRE(recs.size() == 4);
    std::set<int> processes;
    for (const auto& rec : recs) {
      CHECK(rec["exit_code"] == 0);
      const json& res = rec["result"];
      REQUIRE(res.is_object());
      CHECK(res["checksum_ok"] == true);
      CHECK(res["processes"] == 4);
      CHECK(res["dtype"] == dtype);
      CHECK(res["m"] == 256);
      CHECK(res["compute_ms"].get<double>() > 0);
      CHECK(res["gops"].get<double>() > 0);
      // MFU against the measured peak of the unit its GEMM ran on.
      CHECK(res["peak_gops"].get<double>() > 0);
      CHECK(res["mfu"].get<double>() ==
            doctest::Approx(res["gops"].get<double>() / res["peak_gops"].get<double>())
                .epsilon(0.01));
      // The unit follows the dtype: an int8 probe for int8, a float one for the others.
      const bool int8_unit = res["peak_probe"].get<std::string>().rfind("int8", 0) == 0;
      CHECK(int8_unit == (res["dtype"] == "int8"));
      // Worker N is the process on the host the slice names as worker N.
      const int worker = res["worker"];
      CHECK(res["process"] == worker);
      CHECK(rec["host"] == hosts[static_cast<size_t>(worker)]);
      CHECK(res["ring_address"].get<std::string>().rfind(hosts[static_cast<size_t>(worker)] + ":",
                                                         0) == 0);
      processes.insert(res["process"].get<int>());
      if (worker == 0) {
        CHECK(res["efficiency"].get<double>() > 0);
        CHECK(res["aggregate_gops"].get<double>() > 0);
        CHECK(res["single_ms"].get<double>() > 0);
        CHECK(res["all_checksums_ok"] == true);
        REQUIRE(res["peers"].size() == 4);
        CHECK(res["peers"][3]["host"] == hosts[3]);
        CHECK(res["peers"][3]["checksum_ok"] == true);
        CHECK(res["peers"][3]["mfu"].get<double>() > 0);
        CHECK(res["aggregate_mfu"].get<double>() > 0);
      } else {
        CHECK(!res.contains("efficiency"));
      }
    }
    CHECK(processes == std::set<int>{0, 1, 2, 3});
  }

  // The human form: per-worker lines, and on worker 0 the table and the aggregate.
  auto human = env.run({"ssh", "s1", "--worker=all", "--", "tpuctl", "agent", "spmd-matmul", "--m",
                        "128", "--n", "128", "--k", "64", "--timeout", "20s"});
  CHECK_MESSAGE(human.exit_code == 0, human.err);
  // Every line is prefixed with the worker's one name: NODE/WORKER@HOST.
  CHECK(human.out.find("[s1/2@" + hosts[2] + "] process 2 of 4 (slice 0, worker 2)") !=
        std::string::npos);
  CHECK(human.out.find("checksum ok") != std::string::npos);
  CHECK(human.out.find("[s1/0@" + hosts[0] + "] aggregate ") != std::string::npos);
  CHECK(human.out.find("efficiency") != std::string::npos);
  CHECK(human.out.find(" peak ") != std::string::npos); // MFU x% of the <isa> peak y

  // A damaged result fails the check on every worker: exit 1.
  auto damaged = env.run({"ssh", "s1", "--worker=all", "--output", "jsonl", "--command",
                          "TPUCTL_DEBUG_CORRUPT_RESULT=1 tpuctl agent spmd-matmul --m 128 --n 128 "
                          "--k 64 --timeout 20s --format json"});
  CHECK(damaged.exit_code == 1);
  for (const auto& rec : records(damaged.out)) {
    CHECK(rec["exit_code"] == 1);
    REQUIRE(rec["result"].is_object());
    CHECK(rec["result"]["checksum_ok"] == false);
  }

  // Worker 3 is not started: the others fail, naming it, within the timeout (3 s + grace).
  auto t0 = std::chrono::steady_clock::now();
  auto missing = env.run(
      ssh("s1", "0,1,2", spmd({"--m", "256", "--n", "256", "--k", "256", "--timeout", "3s"})));
  auto elapsed = std::chrono::steady_clock::now() - t0;
  CHECK(missing.exit_code == 1);
  CHECK(elapsed < std::chrono::seconds(60)); // their --timeout ended them, not a hang
  auto recs = records(missing.out);
  REQUIRE(recs.size() == 3);
  const std::string named = "process 3 (slice 0, worker 3, " + hosts[3] + ")";
  for (const auto& rec : recs) {
    CHECK(rec["exit_code"] == 1);
    const std::string err = rec["stderr"];
    CHECK(err.find("did not check in within 3s: " + named) != std::string::npos);
  }

  // The coordinator (worker 0) is not started: every worker names it.
  auto headless = env.run(
      ssh("s1", "1-3", spmd({"--m", "256", "--n", "256", "--k", "256", "--timeout", "2s"})));
  CHECK(headless.exit_code == 1);
  for (const auto& rec : records(headless.out)) {
    const std::string err = rec["stderr"];
    CHECK(err.find("cannot reach the coordinator, process 0 (slice 0, worker 0) at " + hosts[0] +
                   ":8476 within 2s") != std::string::npos);
  }

  // Usage errors exit 2 and name the values, before any network traffic.
  auto bad_mesh =
      env.run(ssh("s1", "all", spmd({"--m", "255", "--n", "256", "--k", "64", "--mesh", "2,3"})));
  CHECK(bad_mesh.exit_code == 2);
  CHECK(bad_mesh.out.find("--mesh: '2,3' has 6 positions but the job has 4 processes") !=
        std::string::npos);
  CHECK(bad_mesh.out.find("--m: 255 is not divisible by the mesh's data axis 2") !=
        std::string::npos);
  auto no_env = env.run({"agent", "spmd-matmul", "--m", "64", "--n", "64", "--k", "64"});
  CHECK(no_env.exit_code == 2);
  CHECK(no_env.err.find("TPU_WORKER_ID is not set") != std::string::npos);
  env.run({"qr", "delete", "s1", "--force", "--quiet"});
}

TEST_CASE("spmd-matmul: two slices of 4 workers are one job of 8 processes, one ring across the "
          "slice boundary") {
  QrEnv env(8, "127.120.2.2");
  auto qr = env.run_json(
      {"qr", "create", "ms", "--accelerator-type", "v5litepod-16", "--node-count", "2"});
  REQUIRE(qr["state"] == "ACTIVE");
  const auto hosts = worker_hosts(qr); // slice 0's workers, then slice 1's
  REQUIRE(hosts.size() == 8);

  auto r = env.run(
      ssh("ms", "all",
          spmd({"--m", "256", "--n", "256", "--k", "256", "--mesh", "4,2", "--timeout", "20s"})));
  CHECK_MESSAGE(r.exit_code == 0, r.err);
  auto recs = records(r.out);
  REQUIRE(recs.size() == 8);
  std::set<int> processes;
  for (const auto& rec : recs) {
    const json& res = rec["result"];
    REQUIRE(res.is_object());
    CHECK(res["checksum_ok"] == true);
    CHECK(res["processes"] == 8);
    const int process = res["process"];
    CHECK(res["slice"] == process / 4);
    CHECK(res["worker"] == process % 4);
    // Every record names its worker the same way, in both slices.
    CHECK(rec["host"] == hosts[static_cast<size_t>(process)]);
    CHECK(rec["node"] == "ms-" + std::to_string(process / 4));
    CHECK(rec["slice"] == process / 4);
    CHECK(rec["worker"] == process % 4);
    processes.insert(process);
    if (process == 0) {
      REQUIRE(res["peers"].size() == 8);
      // Slice 1's addresses reached process 0 through the check-in, not the environment.
      CHECK(res["peers"][4]["host"] == hosts[4]);
      CHECK(res["peers"][4]["slice"] == 1);
      CHECK(res["all_checksums_ok"] == true);
      CHECK(res["efficiency"].get<double>() > 0);
    }
  }
  CHECK(processes.size() == 8);
  env.run({"qr", "delete", "ms", "--force", "--quiet"});
}
