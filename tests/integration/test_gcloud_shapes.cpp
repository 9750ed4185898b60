// gcloud's command shapes through the real binary, on a local pool of real sshd servers (block
// 127.141.x, owned by this file), a real SQLite store and a scratch HOME: `queued-resources
// create` as Google's TPU documentation writes it, `queued-resources ssh|scp QR` and `tpu-vm
// ssh|scp NODE` with --worker/--node/--command and the positional forms, an interactive shell
// with a tty (through script(1), a real pseudo-terminal), copies from every worker into names
// that do not collide, --output-directory, --dry-run, and their refusals.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/machine.hpp"
#include "tests/support/qr_env.hpp"
#include "util/process.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::QrEnv;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

namespace {

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

// A pool of 8 hosts with a v5litepod-16 `qr-1` of one node `node-1` (4 workers), created with
// gcloud's flags exactly as the TPU documentation writes them.
struct GcloudEnv : QrEnv {
  GcloudEnv() : QrEnv(8, tpuctl::test::free_address_base("127.141.", 0, 250, 8)) {
    auto r =
        run({"queued-resources", "create", "qr-1", "--project=my-project", "--zone=us-central2-b",
             "--accelerator-type=v5litepod-16", "--runtime-version=v2-alpha-tpuv5-lite",
             "--node-id=node-1", "--provisioning-model=FLEX-START", "--max-run-duration=3h"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    // The zone names no pool, so it says which; the project is what the request is charged to.
    CHECK(count(r.err, "tpuctl: notice:") == 1);
    CHECK(count(r.err, "tpuctl: notice: --zone 'us-central2-b' names no pool") == 1);
    auto qr = describe("qr-1");
    CHECK(qr["tier"] == "flex-start");
    CHECK(qr["runtime_version"] == "v2-alpha-tpuv5-lite");
    CHECK(qr["nodes"][0]["name"] == "node-1");
    CHECK(qr["node_count"] == 1);
    CHECK(qr["project"] == "my-project");
  }
};

} // namespace

TEST_CASE("gcloud shapes: queued-resources ssh --worker=all --node=all and tpu-vm ssh reach "
          "every worker with its TPU_WORKER_ID; --zone names the pool") {
  GcloudEnv env;
  auto r = env.run({"queued-resources", "ssh", "qr-1", "--project=my-project", "--zone=local",
                    "--worker=all", "--node=all", "--command=echo id=$TPU_WORKER_ID"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  for (int w = 0; w < 4; ++w) {
    CHECK(count(r.out, "id=" + std::to_string(w) + "\n") == 1);
  }
  // --zone=local named the pool and --project a project: no notice about either.
  CHECK(r.err.find("--zone") == std::string::npos);
  CHECK(count(r.err, "tpuctl: notice:") == 0);

  // gcloud's default for queued-resources ssh is node 0, worker 0.
  auto one = env.run({"queued-resources", "ssh", "qr-1", "--command", "echo id=$TPU_WORKER_ID"});
  REQUIRE_MESSAGE(one.exit_code == 0, one.err);
  CHECK(count(one.out, "id=") == 1);
  CHECK(one.out.find("id=0") != std::string::npos);

  auto vm = env.run({"tpu-vm", "ssh", "node-1", "--zone=us-central2-b", "--worker=1-2",
                     "--command=echo vm=$TPU_WORKER_ID $TPU_NAME", "-q"});
  REQUIRE_MESSAGE(vm.exit_code == 0, vm.err);
  CHECK(count(vm.out, "vm=") == 2);
  CHECK(vm.out.find("vm=1 node-1") != std::string::npos);
  CHECK(vm.out.find("vm=2 node-1") != std::string::npos);
  CHECK(vm.err.empty()); // --quiet silences the notices

  // The words after "--" are the command, joined with spaces as ssh joins them.
  auto words =
      env.run({"tpu-vm", "ssh", "root@node-1", "--worker=3", "--", "echo", "w=$TPU_WORKER_ID"});
  REQUIRE_MESSAGE(words.exit_code == 0, words.err);
  CHECK(words.out.find("w=3") != std::string::npos);

  auto list = env.run({"tpu-vm", "list", "--zone=local", "--format", "json"});
  REQUIRE_MESSAGE(list.exit_code == 0, list.err);
  CHECK(json::parse(list.out).at(0)["name"] == "node-1");

  // A failing worker's status is the exit status, as gcloud's.
  auto failing = env.run(
      {"queued-resources", "ssh", "qr-1", "--worker=all", "--command=exit $((TPU_WORKER_ID + 3))"});
  CHECK(failing.exit_code == 3);
}

TEST_CASE("gcloud shapes: no command and one worker is an interactive shell with a tty, with "
          "the worker environment and the remote exit status") {
  GcloudEnv env;
  const std::string script = tpuctl::util::find_program("script");
  REQUIRE_MESSAGE(!script.empty(), "script(1) (util-linux) is needed to give tpuctl a terminal");
  tpuctl::util::ProcessOptions o;
  o.env_set = env.vars;
  o.stdin_data = "echo id=$TPU_WORKER_ID tty=$(tty)\nexit 7\n";
  o.timeout = std::chrono::seconds(60);
  const std::string cmd = tpuctl::util::shell_join(
      {tpuctl::test::tpuctl_binary(), "tpu-vm", "ssh", "node-1", "--worker", "2"});
  auto r = tpuctl::util::run_process({script, "-qec", cmd, "/dev/null"}, o);
  REQUIRE(r);
  CHECK(r->exit_code == 7);
  CHECK(r->out.find("id=2 tty=/dev/pts/") != std::string::npos);

  // With stdin not a terminal (a pipe: a script, CI), no pty, as ssh without -t: the remote
  // shell reads stdin as its script and ends at its end instead of waiting at a prompt.
  auto piped = tpuctl::test::run_tpuctl({"tpu-vm", "ssh", "node-1", "--worker", "2"}, env.vars,
                                        "echo id=$TPU_WORKER_ID; tty || echo no-tty; exit 7\n");
  CHECK(piped.exit_code == 7);
  CHECK(piped.out.find("id=2") != std::string::npos);
  CHECK(piped.out.find("no-tty") != std::string::npos);
  auto closed = tpuctl::test::run_tpuctl({"tpu-vm", "ssh", "node-1", "--worker", "2"}, env.vars);
  CHECK_MESSAGE(closed.exit_code == 0, closed.err); // end of input: the shell exits 0

  // Several workers and no command: refused, nothing runs.
  auto many = env.run({"tpu-vm", "ssh", "node-1", "--worker=all"});
  CHECK(many.exit_code == 2);
  CHECK(many.err.find("cannot open a shell on 4 workers at once") != std::string::npos);
  // ssh options after "--" other than port forwarding's are refused with where they belong.
  auto opts = env.run({"tpu-vm", "ssh", "node-1", "--", "-o", "ForwardAgent=yes"});
  CHECK(opts.exit_code == 2);
  CHECK(opts.err.find("ssh option '-o' is not supported") != std::string::npos);
  CHECK(opts.err.find("~/.ssh/config") != std::string::npos);
}

TEST_CASE("gcloud shapes: scp to every worker, and back from every worker into DEST/<worker>/ "
          "so no copy overwrites another") {
  GcloudEnv env;
  const fs::path local = env.dir.path() / "data.txt";
  std::ofstream(local) << "payload\n";
  const fs::path remote_dir = env.dir.path() / "remote";
  fs::create_directories(remote_dir);
  const std::string remote = (remote_dir / "data.txt").string();
  auto up = env.run({"tpu-vm", "scp", local.string(), "node-1:" + remote, "--worker=all",
                     "--zone=local", "--format", "json"});
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  CHECK(json::parse(up.out).at(0)["copied_count"] == 4);

  // Each worker writes its own file; fetched from all four they land side by side.
  auto wrote = env.run({"queued-resources", "ssh", "qr-1", "--worker=all", "--command",
                        "echo $TPU_WORKER_ID > " + remote_dir.string() + "/w$TPU_WORKER_ID"});
  REQUIRE_MESSAGE(wrote.exit_code == 0, wrote.err);
  const fs::path back = env.dir.path() / "back";
  auto down =
      env.run({"queued-resources", "scp", "qr-1:" + remote, "qr-1:" + remote_dir.string() + "/w1",
               back.string(), "--worker=all", "--node=0"});
  REQUIRE_MESSAGE(down.exit_code == 0, down.err);
  for (int w = 0; w < 4; ++w) {
    INFO("worker " << w);
    CHECK(tpuctl::test::read_file(back / std::to_string(w) / "data.txt") == "payload\n");
    CHECK(tpuctl::test::read_file(back / std::to_string(w) / "w1") == "1\n");
  }
  // One worker: DEST is the file, as scp does.
  const fs::path single = env.dir.path() / "single.txt";
  auto one = env.run({"tpu-vm", "scp", "node-1:" + remote, single.string(), "--worker=3"});
  REQUIRE_MESSAGE(one.exit_code == 0, one.err);
  CHECK(tpuctl::test::read_file(single) == "payload\n");

  // Refusals: both sides local, both remote, a missing remote file (that worker fails).
  CHECK(env.run({"tpu-vm", "scp", local.string(), single.string()}).exit_code == 2);
  CHECK(env.run({"tpu-vm", "scp", "node-1:a", "node-1:b"}).exit_code == 2);
  auto missing = env.run({"tpu-vm", "scp", "node-1:" + remote + ".nope",
                          (env.dir.path() / "m").string() + "/", "--worker=0"});
  CHECK(missing.exit_code != 0);
  CHECK(missing.err.find("is not a regular file") != std::string::npos);
  CHECK_FALSE(fs::exists(env.dir.path() / "m" / "data.txt.nope"));
}

TEST_CASE("gcloud shapes: --output-directory writes DIR/<worker>.log; --dry-run prints each "
          "worker's ssh line and runs nothing; --batch-size all") {
  GcloudEnv env;
  const fs::path logs = env.dir.path() / "logs";
  auto missing = env.run({"tpu-vm", "ssh", "node-1", "--worker=all", "--output-directory",
                          logs.string(), "--command", "true"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("is not an existing directory") != std::string::npos);
  fs::create_directories(logs);
  auto r = env.run({"tpu-vm", "ssh", "node-1", "--worker=all", "--batch-size=all",
                    "--output-directory", logs.string(), "--format", "json", "--command",
                    "echo out $TPU_WORKER_ID; echo err >&2; exit $TPU_WORKER_ID"});
  CHECK(r.exit_code == 1); // worker 1 is the first that failed
  auto rows = json::parse(r.out);
  REQUIRE(rows.size() == 4);
  for (int w = 0; w < 4; ++w) {
    INFO("worker " << w);
    CHECK(rows[w]["exit_status"] == w);
    CHECK(tpuctl::test::read_file(logs / (std::to_string(w) + ".log")) ==
          "out " + std::to_string(w) + "\nerr\n");
  }

  const fs::path marker = env.dir.path() / "ran";
  auto dry = env.run({"queued-resources", "ssh", "qr-1", "--worker=all", "--dry-run", "--command",
                      "touch " + marker.string()});
  REQUIRE_MESSAGE(dry.exit_code == 0, dry.err);
  CHECK(count(dry.out, "\nssh -p 2222 -i ") + (dry.out.rfind("ssh -p 2222 -i ", 0) == 0) == 4);
  CHECK(dry.out.find("TPU_WORKER_ID='\\''3'\\''") != std::string::npos);
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("gcloud shapes: scripts' --format value(state.state), table(...), networkEndpoints, "
          "--sort-by and --limit") {
  GcloudEnv env;
  REQUIRE(env.run({"qr", "create", "qr-2", "--accelerator-type", "v5litepod-4", "-q"}).exit_code ==
          0);
  auto state = env.run(
      {"queued-resources", "describe", "qr-1", "--zone=local", "--format=value(state.state)"});
  REQUIRE_MESSAGE(state.exit_code == 0, state.err);
  CHECK(state.out == "ACTIVE\n");
  auto ips =
      env.run({"tpu-vm", "describe", "node-1", "--format", "value(networkEndpoints[].ipAddress)"});
  REQUIRE_MESSAGE(ips.exit_code == 0, ips.err);
  CHECK(count(ips.out, ",") == 3); // four workers' addresses, in worker order
  auto table = env.run({"queued-resources", "list", "--sort-by=~name", "--limit=1",
                        "--format=table(name,state.state,acceleratorType)"});
  REQUIRE_MESSAGE(table.exit_code == 0, table.err);
  CHECK(table.out.find("NAME  STATE   ACCELERATOR_TYPE\nqr-2  ACTIVE  v5litepod-4\n") == 0);
  CHECK(count(table.out, "\n") == 2);
  auto names = env.run({"queued-resources", "list", "--sort-by=name", "--format=value(name)"});
  CHECK(names.out == "qr-1\nqr-2\n");
  auto filtered = env.run({"queued-resources", "list", "--filter=acceleratorType=v5litepod-16",
                           "--format=value(name)"});
  CHECK(filtered.out == "qr-1\n");
  auto bad = env.run({"queued-resources", "list", "--sort-by=nope"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--sort-by: this output has no field 'nope'") != std::string::npos);
}
