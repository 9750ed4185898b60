// tpuctl queued-resources through the real binary on local pools of real sshd servers (address
// block 127.0.90.x - 127.0.97.x, owned by this file), a real SQLite store and a scratch HOME:
// provisioning with the agent's hash verified, filling and overflowing a pool, spot preemption,
// valid-until and max-run-duration on time, a dead worker, concurrent creates, bad input.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "tests/support/qr_env.hpp"
#include "util/process.hpp"
#include "util/sha256.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

using nlohmann::json;
using tpuctl::test::QrEnv;
using tpuctl::test::run_tpuctl;
using tpuctl::test::TempDir;
using tpuctl::test::worker_hosts;

namespace {

const json* history_entry(const json& qr, const std::string& to) {
  for (const auto& h : qr["history"]) {
    if (h["to"] == to) {
      return &h;
    }
  }
  return nullptr;
}

// Unix milliseconds of a time field (RFC 3339 with milliseconds, as json output prints them).
int64_t unix_ms(const json& time) {
  REQUIRE(time.is_string());
  auto ms = tpuctl::util::parse_timestamp(time.get<std::string>(), "time");
  REQUIRE(ms);
  return *ms;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("qr: a v5litepod-16 becomes ACTIVE with the agent verified on its 4 workers; a second "
          "fills the pool, a third waits and starts when one is deleted") {
  QrEnv env(8, "127.0.90.2");
  auto created =
      env.run({"qr", "create", "qr-1", "--accelerator-type", "v5litepod-16", "--format", "json"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  CHECK(created.err.empty()); // a machine format: no progress on stderr
  json qr1 = json::parse(created.out);
  CHECK(qr1["state"] == "ACTIVE");
  auto hosts = worker_hosts(qr1);
  REQUIRE(hosts.size() == 4);
  CHECK(std::set<std::string>(hosts.begin(), hosts.end()).size() == 4);

  // The agent on every worker is the file whose sha256 the record names, at its
  // content-addressed path, and the probe ran there.
  const std::string sha = qr1["provisioning"]["agent_sha256"];
  REQUIRE(sha.size() == 64);
  const json& report_workers = qr1["provisioning"]["report"]["workers"];
  REQUIRE(report_workers.size() == 4);
  for (const auto& w : report_workers) {
    std::string path = w["agent_path"];
    CHECK(path.find(sha) != std::string::npos);
    auto digest = tpuctl::util::sha256_file_hex(path);
    REQUIRE(digest);
    CHECK(*digest == sha);
    CHECK(w["facts"]["cores"].get<int>() > 0);
  }
  // History: every state in order, the last ones initiated by the service.
  std::vector<std::string> states;
  for (const auto& h : qr1["history"]) {
    states.push_back(h["to"]);
  }
  CHECK(states ==
        std::vector<std::string>{"ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE"});
  CHECK(qr1["history"].back()["initiator"] == "SERVICE");

  auto qr2 = env.run({"qr", "create", "qr-2", "--accelerator-type", "v5litepod-16"});
  REQUIRE_MESSAGE(qr2.exit_code == 0, qr2.err);
  CHECK(env.claims().size() == 8);

  auto qr3 =
      env.run_json({"qr", "create", "qr-3", "--accelerator-type", "v5litepod-16", "--async"});
  CHECK(qr3["state"] == "WAITING_FOR_RESOURCES");
  CHECK(qr3["pending_reason"].get<std::string>().find("claimed by") != std::string::npos);

  auto refused = env.run({"qr", "delete", "qr-1"});
  CHECK(refused.exit_code == 1);
  CHECK(refused.err.find("--force") != std::string::npos);
  CHECK(env.describe("qr-1")["state"] == "ACTIVE");

  auto del = env.run({"qr", "delete", "qr-1", "--force"});
  REQUIRE_MESSAGE(del.exit_code == 0, del.err);
  CHECK(env.run({"qr", "describe", "qr-1"}).exit_code == 4);
  auto waited = env.run({"qr", "wait", "qr-3", "--for=state=ACTIVE", "--timeout", "90s"});
  CHECK_MESSAGE(waited.exit_code == 0, waited.err);
  auto q3 = env.describe("qr-3");
  CHECK(q3["state"] == "ACTIVE");
  auto q3hosts = worker_hosts(q3);
  CHECK(std::set<std::string>(q3hosts.begin(), q3hosts.end()) ==
        std::set<std::string>(hosts.begin(), hosts.end())); // qr-1's hosts, freed

  auto list = env.run_json({"qr", "list", "--filter", "state=ACTIVE"});
  CHECK(list.size() == 2);
  auto nodes = env.run_json({"tpu-vm", "list"});
  CHECK(nodes.size() == 2);
  CHECK(nodes[0]["state"] == "READY");
}

TEST_CASE("qr: a reserved request preempts a spot slice: SUSPENDING then SUSPENDED by SERVICE, "
          "its processes killed") {
  QrEnv env(8, "127.0.91.2", "4x8");
  auto spot = env.run({"qr", "create", "cheap", "--accelerator-type", "v5litepod-32", "--spot"});
  REQUIRE_MESSAGE(spot.exit_code == 0, spot.err);
  const std::string uid = env.describe("cheap")["uid"];
  // A process of the slice, left running by `tpuctl ssh` (the local pool's hosts are this
  // machine, so its pid is one here), tagged with the slice's uid like everything tpuctl starts.
  auto victim = env.run({"ssh", "cheap", "--worker=0", "--command",
                         "setsid sleep 300 >/dev/null 2>&1 </dev/null & echo $!"});
  REQUIRE_MESSAGE(victim.exit_code == 0, victim.err);
  const std::string out(tpuctl::util::trim(victim.out)); // "[host] PID" or "PID"
  const std::string pid_text =
      out.substr(out.find_last_of(" ]") == std::string::npos ? 0 : out.find_last_of(" ]") + 1);
  REQUIRE(pid_text.find_first_not_of("0123456789") == std::string::npos);
  const int victim_pid = std::stoi(pid_text);
  CHECK(tpuctl::test::read_file("/proc/" + pid_text + "/environ").find("TPUCTL_QR_UID=" + uid) !=
        std::string::npos);
  CHECK(::kill(victim_pid, 0) == 0);

  auto reserved =
      env.run({"qr", "create", "urgent", "--accelerator-type", "v5litepod-16", "--reserved"});
  REQUIRE_MESSAGE(reserved.exit_code == 0, reserved.err);
  CHECK(env.describe("urgent")["state"] == "ACTIVE");
  auto cheap = env.describe("cheap");
  CHECK(cheap["state"] == "SUSPENDED");
  CHECK(cheap["state_initiator"] == "SERVICE");
  const json* suspending = history_entry(cheap, "SUSPENDING");
  REQUIRE(suspending != nullptr);
  CHECK((*suspending)["initiator"] == "SERVICE");
  CHECK((*suspending)["reason"].get<std::string>().find("preempted by 'urgent'") !=
        std::string::npos);
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = ::kill(victim_pid, 0) != 0;
    if (!gone) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  CHECK(gone);
  ::kill(victim_pid, SIGKILL);
  // The preempted request's node stays listed, PREEMPTED and without workers, as gcloud shows it.
  auto nodes = env.run_json({"tpu-vm", "list"});
  REQUIRE(nodes.size() == 2);
  for (const auto& n : nodes) {
    CHECK(n["state"] == (n["queued_resource"] == "urgent" ? "READY" : "PREEMPTED"));
    CHECK(n["worker_count"] == (n["queued_resource"] == "urgent" ? 4 : 0));
  }
}

TEST_CASE("qr: valid-until fails a waiting request on time, max-run-duration suspends an ACTIVE "
          "one on time") {
  QrEnv env(8, "127.0.92.2", "4x8");
  auto flex = env.run({"qr", "create", "flex", "--accelerator-type", "v5litepod-32",
                       "--provisioning-model", "flex-start", "--max-run-duration", "6s"});
  REQUIRE_MESSAGE(flex.exit_code == 0, flex.err);
  auto late = env.run_json({"qr", "create", "late", "--accelerator-type", "v5litepod-16",
                            "--valid-until-duration", "3s", "--async"});
  CHECK(late["state"] == "WAITING_FOR_RESOURCES");

  auto failed = env.run({"qr", "wait", "late", "--for=state=FAILED", "--timeout", "30s"});
  CHECK_MESSAGE(failed.exit_code == 0, failed.err);
  auto l = env.describe("late");
  CHECK(l["state"] == "FAILED");
  CHECK(l["error"]["code"] == "EXPIRED");
  const json* f = history_entry(l, "FAILED");
  REQUIRE(f != nullptr);
  int64_t late_by = unix_ms((*f)["time"]) - unix_ms(l["valid_until"]);
  CHECK(late_by >= 0);
  CHECK(late_by < 2000);
  CHECK((*f)["initiator"] == "SERVICE");

  auto suspended = env.run({"qr", "wait", "flex", "--for=state=SUSPENDED", "--timeout", "40s"});
  CHECK_MESSAGE(suspended.exit_code == 0, suspended.err);
  auto fx = env.describe("flex");
  const json* active = history_entry(fx, "ACTIVE");
  const json* suspending = history_entry(fx, "SUSPENDING");
  REQUIRE(active != nullptr);
  REQUIRE(suspending != nullptr);
  int64_t ran = unix_ms((*suspending)["time"]) - unix_ms((*active)["time"]);
  CHECK(ran >= 6000);
  CHECK(ran < 8000);
  CHECK(fx["state_initiator"] == "SERVICE");
  CHECK(env.claims().empty());

  // wait's exit statuses: 1 when the request FAILED instead, 3 on timeout.
  CHECK(env.run({"qr", "wait", "late", "--for=state=ACTIVE"}).exit_code == 1);
  auto again = env.run({"qr", "create", "blocker", "--accelerator-type", "v5litepod-32"});
  REQUIRE(again.exit_code == 0);
  env.run({"qr", "create", "queued", "--accelerator-type", "v5litepod-16", "--async"});
  CHECK(env.run({"qr", "wait", "queued", "--timeout", "1s"}).exit_code == 3);
}

TEST_CASE("qr: a worker whose sshd is stopped makes the slice FAILED naming that worker; its hosts "
          "are free again") {
  QrEnv env(8, "127.0.93.2");
  auto plan =
      env.run_json({"qr", "create", "doomed", "--accelerator-type", "v5litepod-16", "--dry-run"});
  auto hosts = worker_hosts(plan);
  REQUIRE(hosts.size() == 4);
  CHECK(env.run_json({"qr", "list"}).empty()); // --dry-run stored nothing
  const std::string victim = hosts[2];
  int pid = std::stoi(tpuctl::test::read_file(env.pool_dir() / "hosts" / victim / "sshd.pid"));
  REQUIRE(::kill(pid, SIGTERM) == 0);
  for (int i = 0; i < 50 && ::kill(pid, 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  auto created = env.run(
      {"qr", "create", "doomed", "--accelerator-type", "v5litepod-16", "--connect-timeout", "3s"});
  CHECK(created.exit_code == 1);
  auto d = env.describe("doomed");
  CHECK(d["state"] == "FAILED");
  CHECK(d["error"]["worker"] == 2);
  CHECK(d["error"]["host"] == victim);
  CHECK(d["error"]["message"].get<std::string>().find(victim) != std::string::npos);
  CHECK(env.claims().empty());
}

TEST_CASE("qr: 32 concurrent create --async for 1-host slices on 8 hosts claim exactly 8 hosts, "
          "none twice") {
  QrEnv env(8, "127.0.94.2");
  std::vector<std::thread> threads;
  std::vector<int> codes(32, -1);
  for (int i = 0; i < 32; ++i) {
    threads.emplace_back([&, i] {
      codes[static_cast<size_t>(i)] =
          env.run({"qr", "create", "c-" + std::to_string(i), "--accelerator-type", "v5litepod-4",
                   "--async", "--quiet"})
              .exit_code;
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (int c : codes) {
    CHECK(c == 0);
  }
  auto claims = env.claims();
  CHECK(claims.size() == 8);
  std::set<std::string> owners;
  for (auto it = claims.begin(); it != claims.end(); ++it) {
    owners.insert(it.value().get<std::string>());
  }
  CHECK(owners.size() == 8); // one host per request, no request twice
  auto all = env.run_json({"qr", "list"});
  CHECK(all.size() == 32);
  int placed = 0;
  for (const auto& q : all) {
    placed += q["state"] != "WAITING_FOR_RESOURCES";
  }
  CHECK(placed == 8);
  // Let the background drivers finish before the pool goes away.
  for (const auto& owner : owners) {
    env.run({"qr", "wait", owner, "--timeout", "60s", "--quiet"});
  }
}

TEST_CASE("qr: bad input exits 2 or 4 and leaves the state untouched; --request-id is idempotent") {
  QrEnv env(8, "127.0.95.2", "4x8");
  auto first = env.run_json({"qr", "create", "keep", "--accelerator-type", "v5litepod-32",
                             "--async", "--request-id", "req-1"});
  auto before = env.run_json({"qr", "list"});

  auto both = env.run({"qr", "create", "x", "--accelerator-type", "v5litepod-16", "--type",
                       "v5litepod", "--topology", "4x4"});
  CHECK(both.exit_code == 2);
  CHECK(both.err.find("mutually exclusive") != std::string::npos);
  auto unknown = env.run({"qr", "create", "x", "--accelerator-type", "v9z-16"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("v9z-16") != std::string::npos);
  auto bad_id = env.run({"qr", "create", "Bad;id", "--accelerator-type", "v5litepod-16"});
  CHECK(bad_id.exit_code == 2);
  auto node_both = env.run({"qr", "create", "x", "--accelerator-type", "v5litepod-16", "--node-id",
                            "n", "--node-count", "2"});
  CHECK(node_both.exit_code == 2);
  auto never = env.run({"qr", "create", "x", "--accelerator-type", "v5litepod-64"});
  CHECK(never.exit_code == 3);
  CHECK(env.run({"qr", "describe", "missing"}).exit_code == 4);
  CHECK(env.run({"qr", "delete", "missing"}).exit_code == 4);
  CHECK(env.run({"qr", "wait", "missing"}).exit_code == 4);
  CHECK(env.run({"qr", "wait", "keep", "--for", "sideways"}).exit_code == 2);
  CHECK(env.run({"qr", "list", "--filter", "colour=red"}).exit_code == 2);

  auto retry = env.run_json({"qr", "create", "keep", "--accelerator-type", "v5litepod-32",
                             "--async", "--request-id", "req-1"});
  CHECK(retry["uid"] == first["uid"]);
  auto after = env.run_json({"qr", "list"});
  REQUIRE(after.size() == before.size());
  CHECK(after[0]["id"] == before[0]["id"]);
  CHECK(after[0]["uid"] == before[0]["uid"]);
  auto reused = env.run({"qr", "create", "other", "--accelerator-type", "v5litepod-16", "--async",
                         "--request-id", "req-1"});
  CHECK(reused.exit_code == 2);
  env.run({"qr", "wait", "keep", "--timeout", "60s", "--quiet"});
}

TEST_CASE("ssh --worker=all: each worker sees its own id, the same hostnames and the agent on "
          "PATH; env prints what a worker gets; bad selectors exit 2, a missing target 4") {
  QrEnv env(8, "127.0.96.2");
  auto qr = env.run_json({"qr", "create", "s1", "--accelerator-type", "v5litepod-16"});
  REQUIRE(qr["state"] == "ACTIVE");
  auto hosts = worker_hosts(qr);
  REQUIRE(hosts.size() == 4);
  const std::string sha = qr["provisioning"]["agent_sha256"];

  auto r = env.run({"ssh", "s1", "--worker=all", "--output", "jsonl", "--command",
                    "echo \"$TPU_WORKER_ID|$TPU_WORKER_HOSTNAMES|$JAX_COORDINATOR_ADDRESS|"
                    "$TPU_ACCELERATOR_TYPE\"; command -v tpuctl"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  std::set<std::string> ids;
  std::set<std::string> lists;
  for (const auto& line : tpuctl::util::split(r.out, '\n')) {
    if (line.empty()) {
      continue;
    }
    json rec = json::parse(line);
    CHECK(rec["exit_code"] == 0);
    auto out = tpuctl::util::split(rec["stdout"].get<std::string>(), '\n');
    REQUIRE(out.size() >= 2);
    auto fields = tpuctl::util::split(out[0], '|');
    REQUIRE(fields.size() == 4);
    ids.insert(fields[0]);
    lists.insert(fields[1]);
    // Worker N runs on the host the record names as worker N.
    CHECK(rec["host"] == hosts[static_cast<size_t>(std::stoi(fields[0]))]);
    CHECK(fields[2].ends_with(":8476"));
    CHECK(fields[3] == "v5litepod-16");
    CHECK(out[1].find(sha) != std::string::npos); // the verified agent comes first on PATH
  }
  CHECK(ids == std::set<std::string>{"0", "1", "2", "3"});
  CHECK(lists.size() == 1);

  // The kernel on every worker, through the shipped agent.
  auto kernel =
      env.run({"ssh",    "s1",      "--worker=all", "--output", "grouped", "--",     "tpuctl",
               "kernel", "run",     "--m",          "48",       "--n",     "40",     "--k",
               "72",     "--dtype", "int8",         "--reps",   "1",       "--check"});
  CHECK_MESSAGE(kernel.exit_code == 0, kernel.err);

  // A value with shell syntax arrives literally and runs nothing.
  const std::string marker = (env.dir.path() / "pwned").string();
  auto hostile = env.run({"ssh", "s1", "--worker=1", "--env", "PAYLOAD=$(touch " + marker + ")",
                          "--command", "printf '%s' \"$PAYLOAD\""});
  CHECK_MESSAGE(hostile.exit_code == 0, hostile.err);
  CHECK(hostile.out.find("$(touch " + marker + ")") != std::string::npos);
  CHECK(!std::filesystem::exists(marker));

  // env: the same environment, offline, as json and as dotenv a shell can source.
  auto w2 = env.run_json({"env", "s1", "--worker", "2"});
  CHECK(w2["TPU_WORKER_ID"] == "2");
  CHECK(w2["TPU_WORKER_HOSTNAMES"] == *lists.begin());
  CHECK(w2["TPU_SKIP_MDS_QUERY"] == "1");
  auto dotenv = env.run({"env", "s1", "--worker", "2", "--env-profile", "torchrun"});
  REQUIRE(dotenv.exit_code == 0);
  const auto file = env.dir.path() / "worker.env";
  std::ofstream(file) << dotenv.out;
  auto sourced = tpuctl::util::run_process(
      {"bash", "-c", "set -a; . \"$1\"; set +a; echo \"$RANK $WORLD_SIZE $TPU_WORKER_ID\"", "_",
       file.string()});
  REQUIRE(sourced);
  CHECK(sourced->out == "2 4 2\n");

  // scp --recurse: a tree reaches every selected worker, verified (the local pool's hosts
  // share this machine's filesystem, so the summary's per-file host count is what tells).
  const auto tree = env.dir.path() / "model";
  std::filesystem::create_directories(tree / "shards");
  std::ofstream(tree / "config.json") << "{\"layers\": 2}\n";
  std::ofstream(tree / "shards" / "0.bin") << std::string(70000, 'x');
  const std::string dest = (env.dir.path() / "copied").string() + "/";
  auto copied = env.run_json({"scp", tree.string(), "s1:" + dest, "--worker=all", "--recurse"});
  REQUIRE(copied.size() == 2);
  for (const auto& row : copied) {
    CHECK(row["hosts"] == 4);
    CHECK(row["copied_count"] == 4);
  }
  CHECK(tpuctl::test::read_file(env.dir.path() / "copied" / "model" / "shards" / "0.bin").size() ==
        70000);
  CHECK(env.run({"scp", tree.string(), "s1:" + dest}).exit_code == 2); // a directory needs -r
  CHECK(env.run({"scp", tree.string(), "nocolon"}).exit_code == 2);

  // Bad input: exit 2 or 4, nothing changes.
  auto before = env.run_json({"qr", "list"});
  auto same = env.run({"ssh", "s1", "--worker=2-2", "--command", "true"});
  CHECK(same.exit_code == 2);
  CHECK(same.err.find("'2-2'") != std::string::npos);
  CHECK(env.run({"ssh", "s1", "--worker=4", "--command", "true"}).exit_code == 2);
  CHECK(env.run({"ssh", "s1", "--worker=all"}).exit_code == 2); // no command
  CHECK(env.run({"ssh", "nope", "--command", "true"}).exit_code == 4);
  CHECK(env.run({"env", "s1", "--worker", "all"}).exit_code == 2);
  CHECK(env.run({"env", "s1", "--env", "TPU_WORKER_ID=7"}).exit_code == 2);
  CHECK(env.run_json({"qr", "list"}) == before);
  env.run({"qr", "delete", "s1", "--force", "--quiet"});
}
