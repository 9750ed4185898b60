// Workloads queue on their cluster, through the real binary on a local pool of real sshd
// (address block 127.0.244.x, owned by this file): a workload asks for --num-slices of its
// cluster's slices and waits QUEUED, saying who holds them, until they are free; the queue
// admits by priority, then arrival; two admitted workloads never share a host; a higher
// priority evicts a lower one, which gets its grace to checkpoint and goes back to the queue
// (never FAILED, its restarts untouched) to resume later; concurrent creates on SQLite and on
// etcd never admit two workloads onto one slice. Each slice of v5litepod-4 is one host.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "provision/workload/workload.hpp"
#include "state/location.hpp"
#include "tests/support/etcd_fixture.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/workload_env.hpp"

using nlohmann::json;
using tpuctl::test::wait_until;
using tpuctl::test::WorkloadEnv;

TEST_SUITE_BEGIN("integration");

namespace {

// A job that runs until the test touches $GO/<its workload's name>, and writes its slice
// numbering to $OUT/<workload>-<node> first.
constexpr const char* k_job =
    "echo \"${MEGASCALE_NUM_SLICES:-1},${MEGASCALE_SLICE_ID:-0}\" > "
    "\"$OUT/$TPUCTL_WORKLOAD-$TPU_NAME\"; "
    "trap 'echo \"$TPUCTL_WORKLOAD_ATTEMPT\" > \"$OUT/$TPUCTL_WORKLOAD.ckpt\"; exit 0' TERM; "
    "while [ ! -e \"$GO/$TPUCTL_WORKLOAD\" ]; do sleep 0.2; done";

// A pool of `hosts` hosts with the ACTIVE cluster "demo" of `slices` one-host slices.
struct QueueEnv : WorkloadEnv {
  std::filesystem::path go, out;
  QueueEnv(const std::string& address_base, int hosts, int slices,
           const std::string& state_url = "")
      : WorkloadEnv(hosts, address_base, "", 0, state_url), go(dir.path() / "go"),
        out(dir.path() / "out") {
    std::filesystem::create_directories(go);
    std::filesystem::create_directories(out);
    auto r = run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-4",
                  "--num-slices", std::to_string(slices)});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  }
  // Creates a job (k_job) on "demo" with `extra` flags; returns its state.
  std::string submit(const std::string& name, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--env", "GO=" + go.string(), "--env", "OUT=" + out.string()});
    auto args =
        std::vector<std::string>{"workload", "create",    "--cluster", "demo",     "--workload",
                                 name,       "--command", k_job,       "--format", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run(args);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto j = json::parse(r.out);
    uids.push_back(j["uid"].get<std::string>());
    return j["state"].get<std::string>();
  }
  json workload(const std::string& name) const { return run_json({"workload", "describe", name}); }
  std::string state(const std::string& name) const {
    return workload(name)["state"].get<std::string>();
  }
  bool reaches(const std::string& name, const std::string& want,
               std::chrono::seconds within = std::chrono::seconds(60)) const {
    return wait_until([&] { return state(name) == want; }, within);
  }
  // What a job wrote to $OUT/<file> (a job writes it just after it starts: waited for).
  std::string written(const std::string& file) const {
    std::string text;
    wait_until(
        [&] {
          std::error_code ec;
          if (std::filesystem::file_size(out / file, ec) == 0 || ec) {
            return false;
          }
          text = tpuctl::test::read_file(out / file);
          return !text.empty() && text.back() == '\n';
        },
        std::chrono::seconds(30));
    return text;
  }
  void release(const std::string& name) const { std::ofstream(go / name).put('\n'); }
  // Every host that a workload holding slices runs on, and the check that none is shared.
  void check_no_shared_host() const {
    std::map<std::string, std::string> owner;
    for (const auto& w : run_json({"workload", "list"})) {
      const std::string st = w["state"];
      if (st != "RUNNING" && st != "PENDING" && st != "EVICTING" && st != "RECOVERING") {
        continue;
      }
      for (const auto& x : w["workers"]) {
        const std::string host = x["host"];
        auto [it, fresh] = owner.emplace(host, w["name"].get<std::string>());
        const std::string why =
            host + " is used by " + it->second + " and " + w["name"].get<std::string>();
        CHECK_MESSAGE((fresh || it->second == w["name"]), why);
      }
    }
  }
};

} // namespace

TEST_CASE("workload queue: a workload waits QUEUED naming who holds the slices, the queue admits "
          "by priority then arrival, and two admitted workloads never share a host") {
  QueueEnv env("127.0.244.2", 3, 2);
  // "first" takes both slices; very-high, so nothing below evicts it.
  CHECK(env.submit("first", {"--num-slices", "all", "--priority", "very-high"}) == "RUNNING");
  auto first = env.workload("first");
  CHECK(first["slices"] == json::array({0, 1}));
  CHECK(first["num_slices"] == 2);
  CHECK(first["priority"] == "very-high");

  // Arrival order: low (2 slices), medium, high (1 slice each).
  CHECK(env.submit("big", {"--num-slices", "2", "--priority", "low"}) == "QUEUED");
  CHECK(env.submit("mid", {}) == "QUEUED"); // xpk's defaults: 1 slice, medium
  CHECK(env.submit("top", {"--priority", "high"}) == "QUEUED");
  auto top = env.workload("top");
  CHECK(top["queue_position"] == 1);
  CHECK_MESSAGE(top["message"].get<std::string>().find(
                    "slice 0 held by first (priority very-high), slice 1 by first") !=
                    std::string::npos,
                top["message"]);
  CHECK(env.workload("mid")["queue_position"] == 2);
  CHECK(env.workload("big")["queue_position"] == 3);
  CHECK(env.workload("mid")["workers"].empty());
  auto listed = env.run({"workload", "list"});
  CHECK(listed.out.find("PRIORITY") != std::string::npos);
  CHECK(listed.out.find("POSITION") != std::string::npos);
  auto queued = env.run_json({"workload", "list", "--filter-by-status", "QUEUED"});
  CHECK(queued.size() == 3);

  // "first" ends: its two slices go to top and mid, by priority; big waits for both.
  env.release("first");
  REQUIRE(env.reaches("top", "RUNNING"));
  REQUIRE(env.reaches("mid", "RUNNING"));
  CHECK(env.state("first") == "SUCCEEDED");
  CHECK(env.state("big") == "QUEUED");
  CHECK(env.workload("big")["queue_position"] == 1);
  env.check_no_shared_host();
  const auto top_slices = env.workload("top")["slices"];
  const auto mid_slices = env.workload("mid")["slices"];
  REQUIRE(top_slices.size() == 1);
  REQUIRE(mid_slices.size() == 1);
  CHECK(top_slices[0] != mid_slices[0]);
  // One slice each: the job sees a single slice.
  const std::string top_node = env.workload("top")["workers"][0]["node"];
  CHECK(env.written("top-" + top_node) == "1,0\n");

  env.release("top");
  CHECK(env.state("big") == "QUEUED"); // one slice free is not enough
  env.release("mid");
  REQUIRE(env.reaches("big", "RUNNING"));
  env.check_no_shared_host();
  // Its two slices are its job: numbered 0 and 1.
  std::set<std::string> seen;
  const json big = env.workload("big");
  for (const auto& w : big["workers"]) {
    seen.insert(env.written("big-" + w["node"].get<std::string>()));
  }
  CHECK(seen == std::set<std::string>({"2,0\n", "2,1\n"}));
  env.release("big");
  REQUIRE(env.reaches("big", "SUCCEEDED"));
}

TEST_CASE("workload queue: a higher priority evicts the lowest; the evicted job gets its grace "
          "to checkpoint, waits QUEUED (never FAILED, restarts untouched) and resumes when room "
          "is back; its goodput counts the eviction") {
  QueueEnv env("127.0.244.10", 2, 2);
  CHECK(env.submit("keep", {"--priority", "low"}) == "RUNNING");
  CHECK(env.submit("spare", {"--priority", "very-low", "-tgps", "10"}) == "RUNNING");
  // No slice is free: "urgent" evicts the lowest priority, and runs once it has stopped.
  const std::string urgent = env.submit("urgent", {"--priority", "very-high"});
  CHECK((urgent == "QUEUED" || urgent == "RUNNING"));
  REQUIRE(env.reaches("urgent", "RUNNING"));
  env.check_no_shared_host();
  auto spare = env.workload("spare");
  CHECK(spare["state"] == "QUEUED");
  CHECK(spare["evictions"] == 1);
  CHECK(spare["restarts"] == 0);
  CHECK(spare["slices"].empty());
  // The TERM came with time to checkpoint: the job wrote it before exiting.
  CHECK(env.written("spare.ckpt") == "0\n");
  CHECK(env.state("keep") == "RUNNING");

  // Room again: it resumes, on the next attempt, and succeeds.
  env.release("urgent");
  REQUIRE(env.reaches("spare", "RUNNING"));
  spare = env.workload("spare");
  CHECK(spare["attempt"] == 1);
  CHECK(spare["restarts"] == 0);
  env.release("spare");
  REQUIRE(env.reaches("spare", "SUCCEEDED"));
  spare = env.workload("spare");
  CHECK(spare["goodput"]["evicted_ms"].get<int64_t>() > 0);
  CHECK(spare["evictions"] == 1);
  env.release("keep");
  REQUIRE(env.reaches("keep", "SUCCEEDED"));
  CHECK(env.workload("keep")["evictions"] == 0);
}

TEST_CASE("workload queue: deleting a queued workload removes it at once; deleting a running one "
          "admits the next") {
  QueueEnv env("127.0.244.20", 1, 1);
  CHECK(env.submit("a", {}) == "RUNNING");
  CHECK(env.submit("b", {}) == "QUEUED");
  CHECK(env.submit("c", {}) == "QUEUED");
  auto del = env.run({"workload", "delete", "b"});
  CHECK_MESSAGE(del.exit_code == 0, del.err);
  CHECK(env.run({"workload", "describe", "b"}).exit_code == 4);
  CHECK(env.workload("c")["queue_position"] == 1);
  del = env.run({"workload", "delete", "a"});
  CHECK_MESSAGE(del.exit_code == 0, del.err);
  REQUIRE(env.reaches("c", "RUNNING"));
  env.release("c");
  REQUIRE(env.reaches("c", "SUCCEEDED"));
}

TEST_CASE("workload queue: bad input gets one line, exit 2, and nothing is stored") {
  QueueEnv env("127.0.244.30", 2, 2);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--priority", "urgent"}, "--priority"},   {{"--num-slices", "3"}, "--num-slices 3"},
      {{"--num-slices", "0"}, "--num-slices"},    {{"--num-slices", "-1"}, "--num-slices"},
      {{"--num-slices", "some"}, "--num-slices"},
  };
  for (const auto& [flags, named] : bad) {
    std::vector<std::string> args{"workload",   "create", "--cluster", "demo",
                                  "--workload", "bad",    "--command", "true"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto r = env.run(args);
    CHECK_MESSAGE(r.exit_code == 2, r.err);
    CHECK_MESSAGE(r.err.find(named) != std::string::npos, r.err);
    CHECK_MESSAGE(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
  }
  CHECK(env.run_json({"workload", "list"}).empty());
}

namespace {

// `count` creates at once, each asking for one of the cluster's 2 slices: 2 run, the rest wait,
// and no slice is ever given twice.
void concurrent_creates(QueueEnv& env, int count) {
  std::vector<std::unique_ptr<tpuctl::test::Background>> creates;
  for (int i = 0; i < count; ++i) {
    const std::string name = "c" + std::to_string(i);
    creates.push_back(env.start({"workload", "create", "--cluster", "demo", "--workload", name,
                                 "--command", k_job, "--env", "GO=" + env.go.string(), "--env",
                                 "OUT=" + env.out.string(), "--format", "json"},
                                name));
  }
  for (auto& c : creates) {
    auto status = c->wait(std::chrono::seconds(120));
    REQUIRE(status.has_value());
    CHECK_MESSAGE(*status == 0, c->err());
    if (*status == 0) {
      env.uids.push_back(json::parse(c->out())["uid"].get<std::string>());
    }
  }
  auto settled = [&] {
    int running = 0, queued = 0;
    for (const auto& w : env.run_json({"workload", "list"})) {
      running += w["state"] == "RUNNING" ? 1 : 0;
      queued += w["state"] == "QUEUED" ? 1 : 0;
    }
    return running == 2 && queued == count - 2;
  };
  REQUIRE(wait_until(settled, std::chrono::seconds(60)));
  std::set<int> slices;
  std::set<int> positions;
  for (const auto& w : env.run_json({"workload", "list"})) {
    for (const auto& s : w["slices"]) {
      CHECK_MESSAGE(slices.insert(s.get<int>()).second, "slice " << s << " given twice");
    }
    if (w["state"] == "QUEUED") {
      positions.insert(w["queue_position"].get<int>());
    }
  }
  CHECK(slices == std::set<int>{0, 1});
  CHECK(positions.size() == static_cast<size_t>(count - 2));
  env.check_no_shared_host();
  auto check = env.run({"state", "check"});
  CHECK_MESSAGE(check.exit_code == 0, (check.out + check.err));
  for (int i = 0; i < count; ++i) {
    env.release("c" + std::to_string(i));
  }
  REQUIRE(wait_until(
      [&] {
        for (const auto& w : env.run_json({"workload", "list"})) {
          if (w["state"] != "SUCCEEDED") {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(120)));
}

} // namespace

TEST_CASE("workload queue: concurrent creates on SQLite never admit two workloads onto one "
          "slice") {
  QueueEnv env("127.0.244.40", 2, 2);
  concurrent_creates(env, 6);
}

TEST_CASE("workload queue: concurrent creates on etcd never admit two workloads onto one slice") {
  tpuctl::test::EtcdCluster etcd(1);
  QueueEnv env("127.0.244.50", 2, 2, etcd.url());
  concurrent_creates(env, 6);
}

TEST_CASE("cluster create on an existing cluster resizes it: new slices are placed and provisioned "
          "while its workloads run on; a shrink removes free slices first, held ones only with "
          "--force (their workloads evicted with their grace); another type is refused") {
  QueueEnv env("127.0.244.60", 4, 2);
  auto resize = [&](const std::string& n, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"cluster",    "create",      "--cluster",    "demo",
                                  "--tpu-type", "v5litepod-4", "--num-slices", n,
                                  "--format",   "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return env.run(args);
  };
  CHECK(env.submit("a", {}) == "RUNNING");
  const json a_before = env.workload("a");
  CHECK(env.submit("b", {"--num-slices", "2", "--priority", "low"}) == "QUEUED");

  // Grow to 3: the new slice is placed and provisioned; "a" never notices; "b" fits now.
  auto grown = resize("3");
  REQUIRE_MESSAGE(grown.exit_code == 0, grown.err);
  auto g = json::parse(grown.out);
  CHECK(g["num_slices"] == 3);
  CHECK(g["resize"]["from"] == 2);
  CHECK(g["resize"]["added"].size() == 1);
  CHECK(g["slices"].size() == 3);
  REQUIRE(env.reaches("b", "RUNNING"));
  env.check_no_shared_host();
  json a_now = env.workload("a");
  CHECK(a_now["state"] == "RUNNING");
  CHECK(a_now["attempt"] == 0);
  CHECK(a_now["workers"][0]["host"] == a_before["workers"][0]["host"]);
  CHECK(env.describe("demo")["state"] == "ACTIVE");

  // Every slice is held: a shrink without --force is refused, and nothing changes.
  auto refused = resize("2");
  CHECK(refused.exit_code == 1);
  CHECK_MESSAGE(refused.err.find("--force") != std::string::npos, refused.err);
  CHECK(env.run_json({"cluster", "describe", "demo"})["num_slices"] == 3);

  // "b" ends: the shrink takes its free slices, "a" runs on where it was.
  env.release("b");
  REQUIRE(env.reaches("b", "SUCCEEDED"));
  auto shrunk = resize("2");
  REQUIRE_MESSAGE(shrunk.exit_code == 0, shrunk.err);
  auto sh = json::parse(shrunk.out);
  CHECK(sh["num_slices"] == 2);
  CHECK(sh["resize"]["removed"].size() == 1);
  CHECK(sh["resize"]["evicted"].empty());
  a_now = env.workload("a");
  CHECK(a_now["state"] == "RUNNING");
  CHECK(a_now["attempt"] == 0);
  CHECK(a_now["workers"][0]["host"] == a_before["workers"][0]["host"]);
  CHECK(env.claims().size() == 2);

  // Both slices held: --force evicts the workload of the slice that goes, with its grace.
  CHECK(env.submit("c", {"-tgps", "10"}) == "RUNNING");
  auto forced = resize("1", {"--force"});
  REQUIRE_MESSAGE(forced.exit_code == 0, forced.err);
  auto fo = json::parse(forced.out);
  CHECK(fo["num_slices"] == 1);
  REQUIRE(fo["resize"]["evicted"].size() == 1);
  const std::string evicted = fo["resize"]["evicted"][0];
  const std::string kept = evicted == "a" ? "c" : "a";
  CHECK(env.state(evicted) == "QUEUED");
  CHECK(env.workload(evicted)["evictions"] == 1);
  CHECK(env.written(evicted + ".ckpt") == "0\n"); // its TERM came with time to checkpoint
  CHECK(env.state(kept) == "RUNNING");
  CHECK(env.claims().size() == 1);
  env.check_no_shared_host();

  // Another type: refused in one line, nothing changes.
  auto other = env.run(
      {"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-8", "--num-slices", "1"});
  CHECK(other.exit_code == 2);
  CHECK_MESSAGE(other.err.find("another type") != std::string::npos, other.err);
  CHECK(std::count(other.err.begin(), other.err.end(), '\n') == 1);
  CHECK(env.run_json({"cluster", "describe", "demo"})["tpu_type"] == "v5litepod-4");

  // No room to grow: the new slice waits for hosts as any request does, here until --timeout
  // (exit 3, nothing changed); a grow without a limit goes on once the hosts are free.
  REQUIRE(
      env.run({"qr", "create", "blocker", "--accelerator-type", "v5litepod-4", "--node-count", "3"})
          .exit_code == 0);
  // A size past the whole pool is refused at once, even with no limit on the wait (exit 3,
  // nothing changed), as qr create refuses it.
  auto never = resize("64"); // with no --timeout: a wait would never end
  CHECK(never.exit_code == 3);
  CHECK_MESSAGE(never.err.find("cannot grow to 64 slices") != std::string::npos, never.err);
  CHECK_MESSAGE(never.err.find("never") != std::string::npos, never.err);
  CHECK(std::count(never.err.begin(), never.err.end(), '\n') == 1);
  CHECK(env.run_json({"cluster", "describe", "demo"})["num_slices"] == 1);
  auto full = resize("2", {"--timeout", "2s"});
  CHECK(full.exit_code == 3);
  CHECK_MESSAGE(full.err.find("cannot grow to 2 slices") != std::string::npos, full.err);
  CHECK(env.run_json({"cluster", "describe", "demo"})["num_slices"] == 1);
  auto waiting = env.start({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-4",
                            "--num-slices", "2", "--format", "json"},
                           "grow");
  CHECK_FALSE(waiting->wait(std::chrono::seconds(2)).has_value()); // waiting for room
  REQUIRE(env.run({"qr", "delete", "blocker", "--force", "-q"}).exit_code == 0);
  auto grew = waiting->wait(std::chrono::seconds(60));
  REQUIRE(grew.has_value());
  CHECK_MESSAGE(*grew == 0, waiting->err());
  CHECK(env.run_json({"cluster", "describe", "demo"})["num_slices"] == 2);
  // The evicted workload gets the new slice.
  REQUIRE(env.reaches(evicted, "RUNNING"));
  env.check_no_shared_host();

  // --async: a grow with no room returns at once; a background tpuctl waits for the hosts and
  // provisions the new slice. Another tier is still refused at once.
  REQUIRE(env.run({"qr", "create", "blocker2", "--accelerator-type", "v5litepod-4", "--node-count",
                   "2"})
              .exit_code == 0);
  auto spot = resize("3", {"--async", "--spot"});
  CHECK(spot.exit_code == 2);
  CHECK_MESSAGE(spot.err.find("tier") != std::string::npos, spot.err);
  auto later = resize("3", {"--async"});
  REQUIRE_MESSAGE(later.exit_code == 0, later.err);
  auto la = json::parse(later.out);
  CHECK(la["resize"]["async"] == true);
  CHECK(la["resize"]["to"] == 3);
  CHECK(la["num_slices"] == 2); // not yet
  REQUIRE(env.run({"qr", "delete", "blocker2", "--force", "-q"}).exit_code == 0);
  CHECK(tpuctl::test::wait_until(
      [&] {
        auto d = env.run_json({"cluster", "describe", "demo"});
        return d["num_slices"] == 3 && d["state"] == "ACTIVE";
      },
      std::chrono::seconds(60)));
  env.release(kept);
  env.release(evicted);
  REQUIRE(env.reaches(kept, "SUCCEEDED"));
  REQUIRE(env.reaches(evicted, "SUCCEEDED"));
}

TEST_CASE("workload queue: a pass over a queue longer than an etcd transaction holds (200 "
          "waiting) writes one record besides those it admits, and shows every position") {
  tpuctl::test::EtcdCluster etcd(1);
  QueueEnv env("127.0.244.70", 1, 1, etcd.url());
  CHECK(env.submit("head", {}) == "RUNNING");
  // 200 waiting workloads, stored straight into the store (no monitors: this is about the pass).
  tpuctl::state::OpenOptions o;
  auto store = tpuctl::state::open_store(etcd.url(), o);
  REQUIRE_MESSAGE(store, (store ? "" : store.error().message));
  for (int i = 0; i < 200; ++i) {
    tpuctl::provision::Workload w;
    w.name = "w" + std::to_string(i);
    w.pool = "local";
    char uid[17];
    std::snprintf(uid, sizeof uid, "%016x", 0xabc000 + i);
    w.uid = uid;
    env.uids.push_back(w.uid);
    w.cluster = "demo";
    w.queued_resource = "demo";
    w.command = "sleep 600";
    w.state = tpuctl::provision::WorkloadState::queued;
    w.created_at_ms = 1 + i; // before "last"
    auto made = (*store)->commit({tpuctl::state::CreateOp{
        tpuctl::provision::workload_key("local", w.name), tpuctl::provision::to_json(w)}});
    REQUIRE_MESSAGE(made, (made ? "" : made.error().message));
  }
  // A create makes a pass over all 201 waiting: it commits, and every one has its place.
  CHECK(env.submit("last", {}) == "QUEUED");
  CHECK(env.workload("last")["queue_position"] == 201);
  CHECK(env.workload("w0")["queue_position"] == 1);
  CHECK(env.workload("w199")["queue_position"] == 200);
  // The slice frees: the delete's pass admits the first in line.
  auto del = env.run({"workload", "delete", "head"});
  REQUIRE_MESSAGE(del.exit_code == 0, del.err);
  CHECK(env.workload("w0")["state"] != "QUEUED");
  CHECK(env.workload("w1")["queue_position"] == 1);
  CHECK(env.workload("last")["queue_position"] == 200);
  REQUIRE(env.reaches("w0", "RUNNING"));
  // `state check` holds the queue to its promise: a record that claims w0's slice too is named.
  tpuctl::provision::Workload dup;
  dup.name = "dup";
  dup.pool = "local";
  dup.uid = "0000000000dd0001";
  dup.cluster = "demo";
  dup.queued_resource = "demo";
  dup.command = "true";
  dup.state = tpuctl::provision::WorkloadState::running;
  dup.slices = {0};
  dup.slice_nodes = env.workload("w0")["slice_nodes"].get<std::vector<std::string>>();
  const auto dup_key = tpuctl::provision::workload_key("local", "dup");
  REQUIRE((*store)->commit({tpuctl::state::CreateOp{dup_key, tpuctl::provision::to_json(dup)}}));
  auto check = env.run({"state", "check"});
  CHECK(check.exit_code == 1);
  CHECK_MESSAGE(check.out.find("holds slice '" + dup.slice_nodes.at(0) + "'") != std::string::npos,
                check.out);
  REQUIRE((*store)->commit({tpuctl::state::RemoveOp{dup_key}}));
  CHECK(env.run({"workload", "delete", "w0"}).exit_code == 0);
}
