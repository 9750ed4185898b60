// Real launchers on a workload, unmodified: `workload create --env-profile` gives every worker of
// every slice the variables torchrun, Slurm or SkyPilot would (ranks over the whole cluster, one
// master), and the README's PyTorch recipe (gloo all_reduce over two slices) runs for real with
// Debian's python3-torch (scripts/deps.sh --frameworks). Real sshd on the address
// block 127.0.200.x (owned by this file), a real SQLite store, a scratch HOME. The recipe fails,
// never skips, without python3-torch: scripts/test.sh installs it.
#include <csignal>
#include <set>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "tests/support/workload_env.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::QrEnv;

TEST_SUITE_BEGIN("integration");

namespace {

// A pool of 8 hosts with an ACTIVE cluster "fw" of two v5litepod-16 slices (4 workers each).
struct TwoSliceCluster : tpuctl::test::WorkloadEnv {
  TwoSliceCluster() : WorkloadEnv(8, "127.0.200.2") {
    auto r = run({"cluster", "create", "--cluster", "fw", "--tpu-type", "v5litepod-16",
                  "--num-slices", "2"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  }
  // Runs a workload on both slices to its end (exit 0 required) and returns `workload describe`
  // as json.
  json run_workload(const std::string& name, const std::string& command,
                    std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--num-slices", "all"});
    create_workload("fw", name, command, std::move(extra));
    auto waited = run({"workload", "wait", name, "--timeout", "120s", "--format", "json"});
    const auto logs = run({"workload", "logs", name});
    const auto described = run({"workload", "describe", name});
    const std::string said = waited.err + "\n" + logs.out + logs.err + "\n" + described.out +
                             tpuctl::test::read_file(dir.path() / "state" / "tpuctl" / "logs" /
                                                     ("workload-" + name + ".log"));
    REQUIRE_MESSAGE(waited.exit_code == 0, said);
    return json::parse(waited.out);
  }
  // Worker w's log (its stdout and stderr) of workload `name`.
  std::string log_of(const std::string& name, const std::string& node, int worker) {
    auto r = run({"workload", "logs", name, "--node", node, "--worker", std::to_string(worker)});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return r.out;
  }
};

bool torch_installed() {
  auto r = tpuctl::util::run_process({"/usr/bin/python3", "-c", "import torch"});
  return r && r->exit_code == 0;
}

} // namespace

TEST_CASE("workload create --env-profile torchrun: ranks over every slice, one master, and the "
          "profile survives in the stored workload") {
  TwoSliceCluster env;
  auto qr = env.run_json({"cluster", "describe", "fw"});
  REQUIRE(qr["slices"].size() == 2);
  const std::string master = qr["slices"][0]["workers"][0]["host"].get<std::string>();

  auto wl =
      env.run_workload("ranks", "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $MASTER_ADDR $MASTER_PORT\"",
                       {"--env-profile", "torchrun"});
  CHECK(wl["state"] == "SUCCEEDED");
  CHECK(wl["env_profile"] == "torchrun");
  std::set<std::string> ranks;
  for (int slice = 0; slice < 2; ++slice) {
    const std::string node = qr["slices"][slice]["name"].get<std::string>();
    for (int worker = 0; worker < 4; ++worker) {
      auto fields = tpuctl::util::split(env.log_of("ranks", node, worker), ' ');
      REQUIRE(fields.size() == 5);
      // Slice-major, as TPUCTL_PROCESS_ID: slice 1's workers are ranks 4 to 7.
      CHECK(fields[0] == std::to_string(slice * 4 + worker));
      ranks.insert(fields[0]);
      CHECK(fields[1] == "8");
      CHECK(fields[2] == "0");
      CHECK(fields[3] == master);
      CHECK(fields[4] == "29500\n");
    }
  }
  CHECK(ranks.size() == 8);

  // Without the profile the launcher's variables are not set.
  env.run_workload("plain", "echo \"[${RANK-unset}]\"", {});
  CHECK(env.log_of("plain", qr["slices"][1]["name"].get<std::string>(), 1) == "[unset]\n");
}

TEST_CASE("workload create --env-profile with an unknown profile is exit 2 and stores nothing") {
  TwoSliceCluster env;
  auto r = env.run({"workload", "create", "--cluster", "fw", "--workload", "bad", "--command",
                    "true", "--env-profile", "mpich"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("env profile 'mpich' is not known") != std::string::npos);
  CHECK(r.err.find("torchrun") != std::string::npos);
  CHECK(env.run_json({"workload", "list"}).empty());
}

TEST_CASE("README recipe: PyTorch distributed (gloo) all_reduce over two slices, unmodified") {
  REQUIRE_MESSAGE(torch_installed(), "Debian's python3-torch is not installed: run "
                                     "scripts/deps.sh --frameworks (scripts/test.sh does)");
  TwoSliceCluster env;
  // The README's command, as a user types it.
  const std::string command = "python3 -c 'import torch, torch.distributed as dist\n"
                              "dist.init_process_group(\"gloo\")\n"
                              "t = torch.tensor([dist.get_rank() + 1.0])\n"
                              "dist.all_reduce(t)\n"
                              "print(dist.get_rank(), dist.get_world_size(), int(t.item()))'";
  // Debian's PyTorch is in Debian's Python: the recipe names it (the default environment on
  // PATH is JAX's, whose NumPy 2 Debian's torch 1.13 cannot load).
  auto wl =
      env.run_workload("allreduce", command, {"--env-profile", "torchrun", "--python-env", "/usr"});
  CHECK(wl["state"] == "SUCCEEDED");
  auto qr = env.run_json({"cluster", "describe", "fw"});
  for (int slice = 0; slice < 2; ++slice) {
    for (int worker = 0; worker < 4; ++worker) {
      // 1 + 2 + ... + 8: every rank's contribution reached every rank.
      CHECK(env.log_of("allreduce", qr["slices"][slice]["name"].get<std::string>(), worker) ==
            std::to_string(slice * 4 + worker) + " 8 36\n");
    }
  }
}
