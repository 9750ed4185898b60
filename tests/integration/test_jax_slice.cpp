// JAX for real on a slice, through the binary: the seeds' programs unmodified on local pools of
// real sshd, with real JAX from the project's Python environment (scripts/deps.sh
// --frameworks). On a Cloud TPU VM JAX sees every chip of the slice without
// jax.distributed.initialize(); tpuctl's Python start-up (agent/python/sitecustomize.py) makes
// the same true here, each host standing for a TPU VM with its 4 chips as 4 CPU devices. Address
// blocks 127.171.x (owned by this file); a scratch HOME and SQLite store.
#include <algorithm>
#include <set>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/jax_env.hpp"
#include "tests/support/machine.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::JaxEnv;
using tpuctl::test::jax_program;

TEST_SUITE_BEGIN("integration");

namespace {

// The seeds' check, as seed 000 writes it (with its quotes repaired).
const std::string k_verify_cmd = "python3 -c \"import jax; print(f'Total Devices: "
                                 "{jax.device_count()}, Local Devices: "
                                 "{jax.local_device_count()}')\"";

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

std::string base(int hosts) {
  return tpuctl::test::free_address_base("127.171.", 0, 250, hosts);
}

// The lines of a fan-out's output (each "[NODE/W@HOST] text") that hold `text`, by worker label.
std::map<std::string, std::string> lines_with(const std::string& out, const std::string& text) {
  std::map<std::string, std::string> found;
  for (const auto& line : tpuctl::util::split(out, '\n')) {
    const auto close = line.find("] ");
    if (line.rfind('[', 0) == 0 && close != std::string::npos &&
        line.find(text, close) != std::string::npos) {
      found[line.substr(1, close - 1)] = line.substr(close + 2);
    }
  }
  return found;
}

struct OneSlice : JaxEnv {
  OneSlice() : JaxEnv(4, base(4)) {
    auto r = run({"qr", "create", "vq", "--accelerator-type", "v5litepod-16"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  }
};

} // namespace

TEST_CASE("jax: the seeds' VERIFY_CMD, run by `tpuctl alpha compute tpus queued-resources ssh "
          "--worker=all --node=all`, sees 16 devices, 4 local, on every worker of a "
          "v5litepod-16; so does initialize() without arguments, with the program's own, and "
          "under --env-profile slurm") {
  OneSlice env;
  auto verify = env.run({"alpha", "compute", "tpus", "queued-resources", "ssh", "vq",
                         "--worker=all", "--node=all", "--command=" + k_verify_cmd});
  REQUIRE_MESSAGE(verify.exit_code == 0, verify.err);
  auto seen = lines_with(verify.out, "Total Devices:");
  CHECK(seen.size() == 4);
  for (const auto& [worker, line] : seen) {
    CAPTURE(worker);
    CHECK(line == "Total Devices: 16, Local Devices: 4");
  }

  // xpk's and MaxText's programs call initialize() with no arguments; JAX's own cluster detection
  // finds nothing on a CPU host, tpuctl's environment does. Process ids are the worker ids.
  const std::string init =
      "import os, jax; jax.distributed.initialize(%s); "
      "print('process', jax.process_index(), 'of', jax.process_count(), 'devices', "
      "jax.device_count(), jax.local_device_count(), 'worker', os.environ['TPU_WORKER_ID'])";
  auto no_args = env.run({"ssh", "vq", "--worker=all", "--command",
                          "python3 -c \"" + replace_all(init, "%s", "") +
                              "\""});
  REQUIRE_MESSAGE(no_args.exit_code == 0, no_args.err);
  auto procs = lines_with(no_args.out, "process ");
  REQUIRE(procs.size() == 4);
  for (const auto& [worker, line] : procs) {
    const std::string id = worker.substr(worker.find('/') + 1, 1);
    CHECK(line == "process " + id + " of 4 devices 16 4 worker " + id);
  }

  // The program's own arguments win (its own port, its own numbering): never broken.
  auto own = env.run(
      {"ssh", "vq", "--worker=all", "--command",
       "python3 -c \"" +
           replace_all(
               init, "%s",
               "coordinator_address=os.environ['TPU_WORKER_HOSTNAMES'].split(',')[0] + ':9476', "
               "num_processes=4, process_id=3 - int(os.environ['TPU_WORKER_ID'])") +
           "\""});
  REQUIRE_MESSAGE(own.exit_code == 0, own.err);
  procs = lines_with(own.out, "process ");
  REQUIRE(procs.size() == 4);
  for (const auto& [worker, line] : procs) {
    const int id = std::stoi(worker.substr(worker.find('/') + 1, 1));
    CHECK(line == "process " + std::to_string(3 - id) + " of 4 devices 16 4 worker " +
                      std::to_string(id));
  }

  // Slurm's variables too (SLURM_LOCALID=0 would make JAX's Slurm detection give each process
  // one device): the slice's facts come first.
  auto slurm = env.run({"ssh", "vq", "--worker=all", "--env-profile", "slurm", "--command",
                        "python3 -c \"" + replace_all(init, "%s", "") + "\""});
  REQUIRE_MESSAGE(slurm.exit_code == 0, slurm.err);
  CHECK(lines_with(slurm.out, " of 4 devices 16 4 worker ").size() == 4);
}

TEST_CASE("jax: a command on part of the slice sees its own host's chips at once; "
          "TPUCTL_JAX_INIT=0 switches the start-up off; a program that does not import JAX runs "
          "as it would without tpuctl") {
  OneSlice env;
  // One worker of four: no runtime waiting for processes that never come.
  auto one = env.run({"ssh", "vq", "--worker=2", "--command", k_verify_cmd});
  REQUIRE_MESSAGE(one.exit_code == 0, one.err);
  auto alone = lines_with(one.out, "Total Devices:");
  REQUIRE(alone.size() == 1);
  CHECK(alone.begin()->second == "Total Devices: 4, Local Devices: 4");

  auto off = env.run({"ssh", "vq", "--worker=all", "--env", "TPUCTL_JAX_INIT=0", "--command",
                      k_verify_cmd + "; printf 'PYTHONPATH=[%s]\\n' \"${PYTHONPATH-}\""});
  REQUIRE_MESSAGE(off.exit_code == 0, off.err);
  CHECK(lines_with(off.out, "Total Devices: 4, Local Devices: 4").size() == 4);
  CHECK(lines_with(off.out, "PYTHONPATH=[]").size() == 4);

  // Which Python environment leads PATH: --python-env, else TPUCTL_PYTHON_ENV, else config
  // python-env, else /opt/tpuctl/frameworks.
  auto python_env = [&](std::vector<std::string> extra, std::map<std::string, std::string> vars) {
    std::vector<std::string> args{"env", "vq", "--worker", "1", "--format", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = env.run_with(args, vars);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out)["TPUCTL_PYTHON_ENV"].get<std::string>();
  };
  CHECK(python_env({}, {}) == "/opt/tpuctl/frameworks");
  REQUIRE(env.run({"config", "set", "python-env", "/opt/conda/envs/jax"}).exit_code == 0);
  CHECK(python_env({}, {}) == "/opt/conda/envs/jax");
  CHECK(python_env({}, {{"TPUCTL_PYTHON_ENV", "/srv/venv"}}) == "/srv/venv");
  CHECK(python_env({"--python-env", "~/venv"}, {{"TPUCTL_PYTHON_ENV", "/srv/venv"}}) == "~/venv");
  REQUIRE(env.run({"config", "unset", "python-env"}).exit_code == 0);

  // A plain Python program: the same output, error and exit status with the start-up as without.
  const std::string plain =
      "python3 -c \"import json, sys; print(json.dumps({'argv': sys.argv[1:], 'x': [1, 2]})); "
      "sys.stderr.write('warn\\n'); raise SystemExit(3)\" a b";
  std::string outputs[2];
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> args{"ssh", "vq", "--worker=all", "--command", plain};
    if (i == 1) {
      args.insert(args.begin() + 3, {"--env", "TPUCTL_JAX_INIT=0"});
    }
    auto r = env.run(args);
    CHECK(r.exit_code == 3); // every worker's own status, passed on
    // Line by line, whatever order the workers' lines arrived in.
    auto lines = tpuctl::util::split(r.out + r.err, '\n');
    std::sort(lines.begin(), lines.end());
    outputs[i] = tpuctl::util::join(lines, "\n");
  }
  CHECK(outputs[0] == outputs[1]);
  CHECK(lines_with(outputs[0], "{\"argv\": [\"a\", \"b\"], \"x\": [1, 2]}").size() == 4);
}

TEST_CASE("jax: the seeds' hello-world parallelism program, unmodified, through `tpu-vm ssh "
          "--worker=all`: its product equals the one-process product on every worker") {
  OneSlice env;
  tpuctl::test::MemoryHeavy one_at_a_time;
  auto r = env.run({"tpu-vm", "ssh", "vq", "--worker=all", "--command",
                    "OPENBLAS_NUM_THREADS=1 python3 " + jax_program("check_parallel_tutorial.py")});
  INFO(r.out.substr(r.out.size() > 4000 ? r.out.size() - 4000 : 0) << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(lines_with(r.out, "Running on 16 devices...").size() == 4);
  CHECK(lines_with(r.out, "Computation complete.").size() == 4);
  auto checked = lines_with(r.out, "checked process ");
  CHECK(checked.size() == 4);
  std::set<std::string> processes;
  for (const auto& [worker, line] : checked) {
    CHECK(line.find(" of 4: 1 blocks, 2048 x 8192 elements each") != std::string::npos);
    processes.insert(line.substr(0, line.find(" of 4")));
  }
  CHECK(processes.size() == 4);
  CHECK(lines_with(r.out, "MISMATCH").empty());
}

TEST_CASE("jax: workloads on a 2-slice cluster count both slices' chips, processes slice-major; "
          "the seeds' program through `workload create` computes the one-process product; a "
          "mesh larger than the slice and a Python without JAX fail in one line that says how "
          "to fix them") {
  JaxEnv env(8, base(8));
  auto created = env.run({"cluster", "create", "--cluster", "ms", "--tpu-type", "v5litepod-16",
                          "--num-slices", "2"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  auto cluster = env.run_json({"cluster", "describe", "ms"});
  REQUIRE(cluster["slices"].size() == 2);

  SUBCASE("multislice: 32 devices, process index = slice x 4 + worker") {
    env.create_workload("ms", "count",
                        "python3 -c \"import os, jax; print('devices', jax.device_count(), "
                        "jax.local_device_count(), 'process', jax.process_index(), "
                        "jax.process_count(), 'slice', os.environ['MEGASCALE_SLICE_ID'])\"",
                        {"--num-slices", "all"});
    auto done = env.wait_for(
        "count", [](const json& w) { return w["state"] == "SUCCEEDED" || w["state"] == "FAILED"; },
        std::chrono::seconds(180));
    INFO(env.monitor_log("count"));
    REQUIRE(done["state"] == "SUCCEEDED");
    CHECK(done["jax"]["distributed"]["started_by"] == "tpuctl");
    CHECK(done["jax"]["distributed"]["num_processes"] == 8);
    for (int slice = 0; slice < 2; ++slice) {
      const std::string node = cluster["slices"][slice]["name"].get<std::string>();
      for (int worker = 0; worker < 4; ++worker) {
        CAPTURE(node);
        CAPTURE(worker);
        const std::string log = env.log_of("count", node, worker);
        CHECK(log.find("devices 32 4 process " + std::to_string(slice * 4 + worker) +
                       " 8 slice " + std::to_string(slice)) != std::string::npos);
      }
    }
  }

  SUBCASE("the seeds' program, checked, as a workload on one slice") {
    tpuctl::test::MemoryHeavy one_at_a_time;
    env.create_workload("ms", "hello",
                        "OPENBLAS_NUM_THREADS=1 python3 " +
                            jax_program("check_parallel_tutorial.py"));
    auto done = env.wait_for(
        "hello", [](const json& w) { return w["state"] == "SUCCEEDED" || w["state"] == "FAILED"; },
        std::chrono::seconds(600));
    INFO(env.monitor_log("hello"));
    INFO(done.dump());
    REQUIRE(done["state"] == "SUCCEEDED");
    const std::string node = done["workers"][0]["node"].get<std::string>();
    for (int worker = 0; worker < 4; ++worker) {
      const std::string log = env.log_of("hello", node, worker);
      CHECK(log.find("Running on 16 devices...") != std::string::npos);
      CHECK(log.find("checked process " + std::to_string(worker) +
                     " of 4: 1 blocks, 2048 x 8192 elements each") != std::string::npos);
      CHECK(log.find("MISMATCH") == std::string::npos);
    }
  }

  SUBCASE("bad input: the seed's (4, 64) mesh on 16 devices, and a Python without JAX") {
    // The seed's own mesh, for 256 chips, on a 16-chip slice.
    const std::string seed_mesh =
        "python3 -c \"from jax.experimental import mesh_utils; "
        "mesh_utils.create_device_mesh((4, 64))\"";
    env.create_workload("ms", "mesh", seed_mesh);
    auto failed = env.wait_for(
        "mesh", [](const json& w) { return w["state"] == "FAILED"; }, std::chrono::seconds(180));
    INFO(env.monitor_log("mesh"));
    REQUIRE(failed["state"] == "FAILED");
    const std::string message = failed["message"].get<std::string>();
    CHECK(message.find("exited with 1: tpuctl: the slice has 16 JAX devices (4 processes x 4): "
                       "shape the mesh so its axes multiply to 16") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);

    // The workers' python3 from an environment that has no JAX (Debian's own).
    env.create_workload("ms", "nojax", k_verify_cmd, {"--python-env", "/usr/lib/tpuctl-no-such-env"});
    failed = env.wait_for(
        "nojax", [](const json& w) { return w["state"] == "FAILED"; }, std::chrono::seconds(120));
    INFO(env.monitor_log("nojax"));
    REQUIRE(failed["state"] == "FAILED");
    const std::string why = failed["message"].get<std::string>();
    CHECK(why.find("cannot import jax: install JAX in the workers' Python environment "
                   "(scripts/deps.sh --frameworks), or point tpuctl at one that has it "
                   "(tpuctl config set python-env DIR)") != std::string::npos);
    CHECK(why.find('\n') == std::string::npos);
    CHECK(failed["python_env"] == "/usr/lib/tpuctl-no-such-env");

    // A --python-env that is no directory path: one line, exit 2, nothing stored.
    auto bad = env.run({"workload", "create", "--cluster", "ms", "--workload", "bad", "--command",
                        "true", "--python-env", "venv"});
    CHECK(bad.exit_code == 2);
    CHECK(bad.err == "tpuctl: error: --python-env 'venv' is not a Python environment's "
                     "directory: give an absolute path (or ~/...) on the workers, e.g. "
                     "/opt/tpuctl/frameworks\n");
    CHECK(env.run({"workload", "describe", "bad"}).exit_code == 4);
  }
}
