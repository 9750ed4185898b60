// Secrets through the real binary on a real etcd with authentication on and real sshd on the
// address block 127.0.248.x (owned by this file): `--env-secret NAME` on a workload, on `ssh` and
// on a queued resource's startup script gives the job NAME's value, and the value appears in no
// tpuctl output, no event, no file tpuctl or its workers wrote (logs included), and no
// /proc/*/cmdline on this machine, where every worker of the local pool runs.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/etcd_fixture.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/workload_env.hpp"
#include "util/sha256.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::contains;
using tpuctl::test::EtcdCluster;
using tpuctl::test::wait_until;
using tpuctl::test::WorkloadEnv;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The processes on this machine whose command line holds `secret`.
std::vector<std::string> cmdlines_with(const std::string& secret) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const std::string cmdline = read_all(entry.path() / "cmdline");
    if (contains(cmdline, secret)) {
      found.push_back(name + ": " + cmdline);
    }
  }
  return found;
}

// Every file under `root` whose bytes hold `secret`.
std::vector<std::string> files_with(const fs::path& root, const std::string& secret) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec) && contains(read_all(it->path()), secret)) {
      found.push_back(it->path().string());
    }
  }
  return found;
}

} // namespace

TEST_CASE("secrets: --env-secret reaches the workload, ssh and the startup script, and the value "
          "is in no output, event, log file or command line") {
  EtcdCluster etcd(1);
  etcd.enable_auth("/team/", {{"alice", "alice-pw"}});
  auto alice = tpuctl::test::etcd_user("alice");
  WorkloadEnv env(4, "127.0.248.2", "", 0, etcd.url("/team/"), alice);
  const std::string secret = "s3cr3t-" + tpuctl::util::random_hex_id();
  const std::string digest = tpuctl::util::sha256_hex(secret);
  auto with = alice;
  with["TOKEN"] = secret;
  std::string outputs; // everything tpuctl printed, to search at the end
  auto run = [&](std::vector<std::string> args) {
    auto r = env.run_with(std::move(args), with);
    outputs += r.out + r.err;
    return r;
  };

  // Bad input is one line, naming the variable and never a value.
  auto unset = run({"ssh", "x", "--env-secret", "NOPE", "--command", "true"});
  CHECK(unset.exit_code == 2);
  CHECK(contains(unset.err, "--env-secret NOPE: NOPE is not set in this environment"));
  CHECK(run({"ssh", "x", "--env-secret", "TPU_WORKER_ID", "--command", "true"}).exit_code == 2);

  // A queued resource whose startup script checks the value by its digest: ACTIVE only if the
  // script saw it.
  auto qr =
      run({"qr", "create", "s", "--accelerator-type", "v5litepod-16", "--env-secret", "TOKEN",
           "--metadata",
           "startup-script=test \"$(printf %s \"$TOKEN\" | sha256sum | cut -c1-64)\" = " + digest});
  REQUIRE_MESSAGE(qr.exit_code == 0, qr.err);
  auto described = env.run_with({"qr", "describe", "s", "--format", "json"}, with);
  outputs += described.out;
  CHECK(json::parse(described.out)["secrets"] == json::array({"TOKEN"}));
  CHECK(json::parse(described.out)["state"] == "ACTIVE");

  // ssh: every worker has it; the output is what the command printed.
  auto ssh = run({"ssh", "s", "--worker=all", "--env-secret", "TOKEN", "--command",
                  "printf %s \"$TOKEN\" | sha256sum"});
  REQUIRE_MESSAGE(ssh.exit_code == 0, ssh.err);
  size_t lines = 0;
  for (size_t at = ssh.out.find(digest); at != std::string::npos;
       at = ssh.out.find(digest, at + 1)) {
    ++lines;
  }
  CHECK(lines == 4);
  CHECK(run({"ssh", "s", "--env", "TOKEN=x", "--env-secret", "TOKEN", "--command", "true"})
            .exit_code == 2);
  REQUIRE(run({"qr", "delete", "s", "--force"}).exit_code == 0);

  // A workload: its four workers see it while running; nothing on any command line meanwhile.
  REQUIRE(run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-16"}).exit_code ==
          0);
  auto created =
      run({"workload", "create", "--workload", "w", "--cluster", "c", "--env-secret", "TOKEN",
           "--command", "printf %s \"$TOKEN\" | sha256sum; touch started; sleep 6", "--format",
           "json"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  CHECK(json::parse(created.out)["secrets"] == json::array({"TOKEN"}));
  std::vector<std::string> seen_on_cmdlines;
  const bool running = wait_until(
      [&] {
        auto more = cmdlines_with(secret);
        seen_on_cmdlines.insert(seen_on_cmdlines.end(), more.begin(), more.end());
        auto d = env.run_with({"workload", "describe", "w", "--format", "json"}, with);
        outputs += d.out + d.err;
        return d.exit_code == 0 && json::parse(d.out)["state"] == "RUNNING";
      },
      std::chrono::seconds(60));
  CHECK(running);
  for (int i = 0; i < 10; ++i) { // while it runs
    auto more = cmdlines_with(secret);
    seen_on_cmdlines.insert(seen_on_cmdlines.end(), more.begin(), more.end());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  CHECK_MESSAGE(seen_on_cmdlines.empty(), seen_on_cmdlines.front());
  auto waited = run({"workload", "wait", "w", "--timeout", "120s"});
  REQUIRE_MESSAGE(waited.exit_code == 0, waited.err);
  auto logs = run({"workload", "logs", "w"});
  REQUIRE(logs.exit_code == 0);
  CHECK(contains(logs.out, digest));
  // Usage counts the workload for its project and owner: its RUNNING time and goodput are the
  // ones its own goodput gives (usage rounds to 0.001), and it lost none.
  const json described_w = env.run_json({"workload", "describe", "w"});
  const json& own = described_w["goodput"];
  REQUIRE(own["running_ms"].get<int64_t>() > 0);
  json usage_row;
  for (const auto& row : env.run_json({"usage", "--since", "1h"})) {
    if (row["project"] == "default" && row["owner"] == "alice") {
      usage_row = row;
    }
  }
  REQUIRE_MESSAGE(usage_row.is_object(), described_w.dump());
  CHECK(usage_row["workloads"] == 1);
  CHECK(std::abs(usage_row["running_hours"].get<double>() -
                 own["running_ms"].get<double>() / 3600000.0) <= 0.0006);
  CHECK(usage_row["lost_hours"] == 0.0);
  CHECK(std::abs(usage_row["goodput"].get<double>() - own["goodput"].get<double>()) <= 0.0006);
  auto csv = run({"usage", "--since", "1h", "--format", "csv(project,owner,workloads)"});
  REQUIRE(csv.exit_code == 0);
  CHECK_MESSAGE(contains(csv.out, "default,alice,1\n"), csv.out);
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"workload", "describe", "w", "--format", "json"},
                                             {"workload", "describe", "w"},
                                             {"workload", "list", "--format", "json"},
                                             {"cluster", "describe", "c", "--format", "yaml"},
                                             {"qr", "list", "--format", "json"},
                                             {"events", "--format", "json"},
                                             {"usage", "--format", "json"}}) {
    auto r = run(args);
    CHECK_MESSAGE(r.exit_code == 0, r.err);
  }
  CHECK_MESSAGE(!contains(outputs, secret), "a value was printed");
  // Every file under the machine's scratch directory: logs (the detached drivers' and
  // monitors'), the workers' directories and supervisor logs, the local pool's files. The store
  // is etcd's, elsewhere.
  auto files = files_with(env.dir.path(), secret);
  CHECK_MESSAGE(files.empty(), (files.empty() ? std::string() : files.front()));
  // A workload is charged to its cluster's project: another --project is one line, nothing made.
  auto other = run({"workload", "create", "--workload", "x", "--cluster", "c", "--project", "other",
                    "--command", "true"});
  CHECK(other.exit_code == 2);
  CHECK(contains(other.err, "cluster 'c' is charged to project 'default', not 'other'"));
  CHECK(run({"workload", "describe", "x"}).exit_code == 4);
  REQUIRE(run({"cluster", "delete", "--cluster", "c", "--force"}).exit_code == 0);
}
