// The gcloud and xpk commands of the source documents (../shared/seeds 000 and 003, copied below
// as the documents write them), run by real bash with only the program name changed
// (`gcloud [alpha] compute tpus` -> `tpuctl`, `xpk` -> `tpuctl`), on a local pool of 64 v6e
// hosts (16x16 chips; real sshd on block 127.142.x, owned by this file) named like the zone the
// documents use. Each must succeed; the one with a container image succeeds where the workers
// have docker or podman, and is refused with one line where they have neither (the development
// and CI machines: Debian's podman cannot start containers there). The commands as run, with
// their exit statuses, are a golden transcript (tests/golden/seeds/commands.txt), and so is the
// command worker 0 runs for the image (tests/golden/seeds/container_worker0.txt): what a
// container host would add is only the container actually starting.
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/machine.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using nlohmann::json;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

namespace {

// The documents' commands, verbatim (the slides' trailing spaces after '\' removed).
const char* const k_xpk_cluster_create = R"(xpk cluster create --cluster=${CLUSTER_NAME} \
--cluster-cpu-machine-type=n1-standard-8 \
--num-slices=${NUM_SLICES} \
--tpu-type=${ACCELERATOR_TYPE} \
--zone=${ZONE} \
--project=${PROJECT_ID} \
--on-demand)";

const char* const k_xpk_workload_create = R"(xpk workload create \
--cluster ${CLUSTER_NAME} \
--base-docker-image maxtext_base_image \
--workload maxtext-1b-$(date +%H%M) \
--tpu-type=${ACCELERATOR_TYPE} \
--zone ${ZONE} \
--project ${PROJECT_ID} \
--command "${COMMAND}")";

const char* const k_qr_create = R"(gcloud alpha compute tpus queued-resources create $QR_ID \
--project=$PROJECT_ID \
--zone=$ZONE \
--accelerator-type=$ACCELERATOR_TYPE \
--runtime-version=$RUNTIME_VERSION \
--node-id=$NODE_ID \
--provisioning-model=FLEX-START \
--max-run-duration=3h)";

const char* const k_qr_ssh = R"(gcloud alpha compute tpus queued-resources ssh $QR_ID \
--project=$PROJECT_ID \
--zone=$ZONE \
--worker=all \
--node=all \
--command="$VERIFY_CMD")";

const char* const k_tpu_vm_ssh = R"(gcloud compute tpus tpu-vm ssh my-tpu-pod-name \
  --zone=us-central2-b \
  --worker=all \
  --command="python3 my_parallel_tutorial.py")";

// What a user does: the program name changed, nothing else.
std::string renamed(std::string cmd) {
  for (const std::string from : {"gcloud alpha compute tpus ", "gcloud compute tpus ", "xpk "}) {
    if (cmd.rfind(from, 0) == 0) {
      return "tpuctl " + cmd.substr(from.size());
    }
  }
  FAIL("not a gcloud or xpk command: " << cmd);
  return cmd;
}

struct Shell {
  tpuctl::test::Machine& machine;
  std::map<std::string, std::string> env;
  std::string cwd; // where the user runs them: a project directory (xpk's default --script-dir)
  std::string transcript;

  // `status` says how the exit status reads in the transcript (default: the number).
  tpuctl::util::ProcessResult run(const char* doc_command,
                                  const std::function<std::string(int)>& status = {}) {
    const std::string cmd = renamed(doc_command);
    tpuctl::util::ProcessOptions o;
    o.env_set = machine.vars;
    for (const auto& [k, v] : env) {
      o.env_set[k] = v;
    }
    o.env_set["PATH"] = fs::path(tpuctl::test::tpuctl_binary()).parent_path().string() + ":" +
                        std::string(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin");
    o.timeout = std::chrono::minutes(5);
    o.cwd = cwd;
    auto r = tpuctl::util::run_process({"bash", "-c", cmd}, o);
    REQUIRE(r);
    transcript += "$ " + cmd + "\n# exit " +
                  (status ? status(r->exit_code) : std::to_string(r->exit_code)) + "\n";
    return *r;
  }
};

// The single-worker user's file the tpu-vm ssh command runs, in the workers' login directory
// (the local pool's hosts log in as this user); removed afterwards unless it was there before.
// The seed runs `python3 my_parallel_tutorial.py` in each worker's login directory, which on a
// local pool is this user's real home, shared by every copy of the suite running on the machine
// (two CI jobs, bench/suite_under_load.sh). Each copy holds a shared lock on it while it runs;
// the file is written once, marked as the tests', and removed by the last copy to leave, never
// while another still needs it, and never when it was the user's own file.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// "/tmp/x/state/..." and the random ids, as <DIR>, <UID>, ...: a golden that any run reproduces.
std::string normalized(std::string text, const std::string& dir, const std::string& base) {
  text = replace_all(text, dir, "<DIR>");
  text = std::regex_replace(text, std::regex(base + "[0-9]+"), "<ADDR>");
  text = std::regex_replace(text, std::regex("[0-9a-f]{64}"), "<SHA256>");
  text = std::regex_replace(text, std::regex("[0-9a-f]{16}"), "<UID>");
  text = std::regex_replace(text, std::regex("jax-tpu-[0-9a-f]{8}-"), "jax-tpu-<UID8>-");
  text = std::regex_replace(text, std::regex("maxtext-1b-[0-9]{4}"), "maxtext-1b-<HHMM>");
  return text;
}

} // namespace

TEST_CASE("seeds: the gcloud and xpk commands of the source documents run with only the program "
          "name changed, on a local pool of 64 v6e hosts") {
  const std::string base = tpuctl::test::free_address_base("127.142.", 0, 250, 64);
  tpuctl::test::Machine m;
  auto up = m.run({"pool", "local-up", "--hosts", "64", "--generation", "v6e", "--address-base",
                   base, "--pool", "us-central2-b", "-q"});
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  struct Down {
    tpuctl::test::Machine& m;
    ~Down() { m.run({"pool", "local-down", "--pool", "us-central2-b", "--force", "-q"}); }
  } down{m};
  const std::string prefix = base.substr(0, base.rfind('.') + 1);

  const fs::path project = m.dir.path() / "maxtext";
  fs::create_directories(project);
  std::ofstream(project / "train.py") << "print('training')\n";
  Shell sh{m, {{"PROJECT_ID", "my-project"}, {"ZONE", "us-central2-b"}}, project.string(), ""};

  // ---- seed 003: xpk (two v6e-64 slices, then a workload in an image) ----
  sh.env["CLUSTER_NAME"] = "demo";
  sh.env["NUM_SLICES"] = "2";
  sh.env["ACCELERATOR_TYPE"] = "v6e-64";
  sh.env["COMMAND"] = "echo trained on worker $TPU_WORKER_ID";
  auto cluster = sh.run(k_xpk_cluster_create);
  REQUIRE_MESSAGE(cluster.exit_code == 0, cluster.err);
  CHECK(cluster.out.find(": ACTIVE") != std::string::npos);
  auto described = m.run_json({"cluster", "describe", "--cluster", "demo"});
  CHECK(described["num_slices"] == 2);
  CHECK(described["tier"] == "standard"); // --on-demand

  auto workload = sh.run(k_xpk_workload_create, [](int code) {
    return code == 0 || code == 1
               ? std::string("0, or 1 where the workers have no container runtime")
               : std::to_string(code);
  });
  const bool has_runtime = workload.exit_code == 0;
  if (has_runtime) {
    MESSAGE("the workers have a working docker or podman: the image workload started");
  } else {
    // Refused before anything started, in one line naming the workers and what they lack.
    CHECK(workload.exit_code == 1);
    size_t errors = 0;
    for (const auto& line : tpuctl::util::split(workload.err, '\n')) {
      errors += line.rfind("tpuctl: error:", 0) == 0;
    }
    CHECK(errors == 1);
    CHECK(workload.err.find("image 'maxtext_base_image' needs a container runtime on every "
                            "worker, and 32 of 32 have none that works") != std::string::npos);
    CHECK(m.run_json({"workload", "list", "--cluster", "demo"}).empty());
  }
  // The command every worker runs for the image (the same whether or not a runtime is there).
  auto plan = m.run({"workload", "create", "--cluster", "demo", "--workload", "plan",
                     "--base-docker-image", "maxtext_base_image", "--script-dir", project.string(),
                     "--command", "python3 train.py", "--dry-run", "--format", "json"});
  // A dry run answers whatever the workers lack: exit 0, and a notice naming the runtime.
  CHECK(plan.exit_code == 0);
  if (!has_runtime) {
    CHECK(plan.err.find("tpuctl: notice: ") != std::string::npos);
    CHECK(plan.err.find("container runtime") != std::string::npos);
  }
  auto planned = json::parse(plan.out);
  REQUIRE(planned["workers"].size() == 16); // xpk's default: one slice of the two
  const std::string worker0 = planned["workers"][0]["command"].get<std::string>() + "\n";
  CHECK(tpuctl::test::check_golden("seeds/container_worker0.txt",
                                   normalized(worker0, m.dir.path().string(), prefix)) == "");
  REQUIRE(m.run({"cluster", "delete", "--cluster", "demo", "--force", "-q"}).exit_code == 0);

  // ---- seeds 000 and 003: 256 chips on one ICI domain, then a command on every worker ----
  sh.env["ACCELERATOR_TYPE"] = "v6e-256";
  sh.env["QR_ID"] = "my-qr";
  sh.env["NODE_ID"] = "my-tpu-pod-name";
  sh.env["RUNTIME_VERSION"] = "v2-alpha-tpuv6e";
  sh.env["VERIFY_CMD"] = "python3 -c \"import os; e = os.environ; print('Total workers: %d, "
                         "worker: %s' % (len(e['TPU_WORKER_HOSTNAMES'].split(',')), "
                         "e['TPU_WORKER_ID']))\"";
  auto qr = sh.run(k_qr_create);
  REQUIRE_MESSAGE(qr.exit_code == 0, qr.err);
  auto qr_json = m.run_json({"qr", "describe", "my-qr"});
  CHECK(qr_json["state"] == "ACTIVE");
  CHECK(qr_json["tier"] == "flex-start");
  CHECK(qr_json["nodes"][0]["workers"].size() == 64);

  auto verify = sh.run(k_qr_ssh);
  REQUIRE_MESSAGE(verify.exit_code == 0, verify.err);
  std::set<std::string> seen;
  for (const auto& line : tpuctl::util::split(verify.out, '\n')) {
    auto at = line.find("Total workers: 64, worker: ");
    if (at != std::string::npos) {
      seen.insert(line.substr(at + 27));
    }
  }
  CHECK(seen.size() == 64);

  // The seed's program, copied to every worker as its user does first: a local pool's hosts
  // each have a home of their own, where the seed's `python3 my_parallel_tutorial.py` finds it.
  const fs::path tutorial = m.dir.path() / "my_parallel_tutorial.py";
  std::ofstream(tutorial) << "import os\nprint('tutorial on worker', os.environ['TPU_WORKER_ID'], "
                             "'of', len(os.environ['TPU_WORKER_HOSTNAMES'].split(',')))\n";
  auto copied = m.run({"tpu-vm", "scp", tutorial.string(), "my-tpu-pod-name:~/", "--worker=all",
                       "-q"});
  REQUIRE_MESSAGE(copied.exit_code == 0, copied.err);
  auto tutorial_run = sh.run(k_tpu_vm_ssh);
  REQUIRE_MESSAGE(tutorial_run.exit_code == 0, tutorial_run.err);
  size_t lines = 0;
  for (const auto& line : tpuctl::util::split(tutorial_run.out, '\n')) {
    lines += line.find("tutorial on worker") != std::string::npos &&
             line.find(" of 64") != std::string::npos;
  }
  CHECK(lines == 64);
  REQUIRE(m.run({"qr", "delete", "my-qr", "--force", "-q"}).exit_code == 0);

  CHECK(tpuctl::test::check_golden("seeds/commands.txt", sh.transcript) == "");
}
