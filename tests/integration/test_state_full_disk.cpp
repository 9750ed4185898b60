// Every write path on a disk that fills up, through the real binary, a real SQLite store on a
// small tmpfs and real local sshd hosts (issue 20): cluster create, workload create, pool
// add-hosts, drain, undrain, import and remove-hosts, state restore (over a store and into a new
// one) and state backup are all-or-nothing as the caller sees them: exit 0 (or 6, naming what
// exists) when the change is there, exit 1 saying "the disk is full" when nothing of it is. With
// nothing free at all no command answers "disk I/O error". The tmpfs needs privileges: where the
// host refuses one the test says so in a MESSAGE. An etcd whose space quota fills up is refused
// the same way ("is full", nothing recorded). Address blocks 127.0.210.x and 127.0.211.x, owned
// by this file.
#include <fstream>
#include <functional>
#include <set>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/background.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/qr_env.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::contains;
using tpuctl::test::QrEnv;
using tpuctl::test::run_tpuctl;
using tpuctl::test::TempDir;
using tpuctl::test::wait_until;
namespace fs = std::filesystem;

namespace {

// The names of `list`'s rows (`--format json`), or {} when the command fails.
std::set<std::string> names(const QrEnv& env, std::vector<std::string> list,
                            const std::string& field = "name") {
  list.insert(list.end(), {"--format", "json"});
  auto r = env.run(list);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  std::set<std::string> out;
  for (const auto& row : json::parse(r.out)) {
    out.insert(row[field].get<std::string>());
  }
  return out;
}

// What a create answered against what exists once space is back: 0 or 6 and it exists (6
// naming it); 1 and nothing exists ("the disk is full"), or it exists FAILED and stdout shows it.
void check_create(const tpuctl::util::ProcessResult& r, const std::string& what,
                  const std::string& name, bool exists, const std::string& state) {
  CAPTURE(r.err);
  CHECK(!contains(r.err, "disk I/O error"));
  if (r.exit_code == 0 || r.exit_code == 6) {
    CHECK(exists);
    CHECK(contains(r.out, name));
    if (r.exit_code == 6) {
      CHECK(contains(r.err, what + " '" + name + "' was created and exists ("));
      CHECK(contains(r.err, "delete it with 'tpuctl " + what + " delete " + name + "'"));
    }
    return;
  }
  CHECK(r.exit_code == 1);
  if (!exists) {
    CHECK(contains(r.err, "the disk is full"));
  } else {
    CHECK(state == "FAILED");
    CHECK(contains(r.out, name));
  }
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("state faults: on a nearly full disk every write path is all-or-nothing as its caller "
          "sees it: cluster and workload create, pool writes, state restore and backup") {
  QrEnv env(4, "127.0.210.2", "", 24u << 20);
  REQUIRE_MESSAGE(env.disk, "the full-disk cases need a small tmpfs under the store (root, as CI "
                            "has): "
                                << env.disk_why);
  const std::vector<uint64_t> free_kb{0, 16, 48, 96, 160};

  SUBCASE("cluster create and workload create") {
    for (uint64_t kb : free_kb) {
      const std::string name = "c" + std::to_string(kb);
      CAPTURE(name);
      env.disk->fill(kb * 1024);
      auto r = env.run({"cluster", "create", "--cluster", name, "--tpu-type", "v5litepod-4"});
      env.disk->unfill();
      const bool exists = names(env, {"cluster", "list"}).count(name) == 1;
      std::string state;
      if (exists) {
        state = env.run_json({"cluster", "describe", name})["state"].get<std::string>();
      }
      check_create(r, "cluster", name, exists, state);
      if (exists) {
        auto del = env.run({"cluster", "delete", name, "--force"});
        CHECK_MESSAGE(del.exit_code == 0, del.err);
      }
    }
    auto cluster = env.run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-4"});
    REQUIRE_MESSAGE(cluster.exit_code == 0, cluster.err);
    for (uint64_t kb : free_kb) {
      const std::string name = "w" + std::to_string(kb);
      CAPTURE(name);
      env.disk->fill(kb * 1024);
      auto r = env.run(
          {"workload", "create", "--cluster", "c", "--workload", name, "--command", "sleep 600"});
      env.disk->unfill();
      std::string state;
      auto described = env.run({"workload", "describe", name, "--format", "json"});
      const bool exists = described.exit_code == 0;
      if (exists) {
        state = json::parse(described.out)["state"].get<std::string>();
      } else {
        CHECK(described.exit_code == 4);
      }
      check_create(r, "workload", name, exists, state);
      if (exists) {
        auto del = env.run({"workload", "delete", name});
        CHECK_MESSAGE(del.exit_code == 0, del.err);
      }
    }
    CHECK(env.run({"cluster", "delete", "c", "--force"}).exit_code == 0);
  }

  SUBCASE("pool add-hosts, drain, undrain, import and remove-hosts") {
    // A pool with room for more hosts (the local pool's grid is full).
    REQUIRE(
        env.run({"pool", "create", "spare", "--generation", "v5p", "--shape", "4x4x4"}).exit_code ==
        0);
    const fs::path inventory = env.dir.path() / "inventory.json";
    std::ofstream(inventory) << R"({"hosts": [{"host": "imp1"}, {"host": "imp2"}]})";
    // Each write, and whether it took effect (read once space is back).
    struct Write {
      std::vector<std::string> args;
      std::function<bool()> done;
    };
    auto hosts = [&] { return names(env, {"pool", "hosts", "--pool", "spare"}); };
    auto drained = [&] {
      std::set<std::string> out;
      for (const auto& h : env.run_json({"pool", "hosts", "--pool", "spare"})) {
        if (!h["drain_reason"].get<std::string>().empty()) {
          out.insert(h["name"].get<std::string>());
        }
      }
      return out;
    };
    std::vector<Write> writes{
        {{"pool", "add-hosts", "extra[1-3]"}, [&] { return hosts().count("extra2") == 1; }},
        {{"pool", "drain", "extra1", "--reason", "disk"},
         [&] { return drained().count("extra1") == 1; }},
        {{"pool", "undrain", "extra1"}, [&] { return drained().empty(); }},
        {{"pool", "import", inventory.string()}, [&] { return hosts().count("imp1") == 1; }},
        {{"pool", "remove-hosts", "extra[1-3]"}, [&] { return hosts().count("extra2") == 0; }},
        {{"pool", "remove-hosts", "imp[1-2]"}, [&] { return hosts().count("imp1") == 0; }}};
    for (auto& w : writes) {
      w.args.insert(w.args.end(), {"--pool", "spare"});
      CAPTURE(tpuctl::util::join(w.args, " "));
      for (uint64_t kb : free_kb) {
        CAPTURE(kb);
        if (w.done()) {
          break; // it went through with less space: on to the next write
        }
        env.disk->fill(kb * 1024);
        auto r = env.run(w.args);
        env.disk->unfill();
        CAPTURE(r.err);
        CHECK(!contains(r.err, "disk I/O error"));
        const bool done = w.done();
        if (r.exit_code == 0) {
          CHECK(done);
        } else {
          CHECK(r.exit_code == 1);
          CHECK(!done);
          CHECK(contains(r.err, "the disk is full"));
        }
      }
      auto r = env.run(w.args); // space back: it goes through
      if (!w.done()) {
        CHECK_MESSAGE(r.exit_code == 0, r.err);
        CHECK(w.done());
      }
    }
    auto check = env.run({"state", "check"});
    CHECK_MESSAGE(check.exit_code == 0, (check.out + check.err));
  }

  SUBCASE("state backup, and state restore over the store and into a new one") {
    // The backup lives off the small disk; the store then changes.
    const fs::path backup = env.dir.path() / "backup.db";
    REQUIRE(env.run({"state", "backup", backup.string()}).exit_code == 0);
    REQUIRE(
        env.run({"pool", "create", "later", "--generation", "v5p", "--shape", "4x4x4"}).exit_code ==
        0);
    const std::string changed = env.run({"pool", "list", "--format", "json"}).out;
    const std::string backed_up =
        env.run({"--state", "sqlite:" + backup.string(), "pool", "list", "--format", "json"}).out;
    REQUIRE(changed != backed_up);
    for (uint64_t kb : free_kb) {
      CAPTURE(kb);
      const fs::path copy = env.disk->path() / ("copy" + std::to_string(kb) + ".db");
      const fs::path fresh = env.disk->path() / ("fresh" + std::to_string(kb)) / "state.db";
      env.disk->fill(kb * 1024);
      auto b = env.run({"state", "backup", copy.string()});
      auto into_new =
          env.run({"--state", "sqlite:" + fresh.string(), "state", "restore", backup.string()});
      env.disk->unfill();
      for (const auto* r : {&b, &into_new}) {
        CAPTURE(r->err);
        CHECK(!contains(r->err, "disk I/O error"));
        CHECK((r->exit_code == 0 || contains(r->err, "the disk is full")));
      }
      // A backup is there, and sound, exactly when it succeeded; nothing half-written stays.
      CHECK(fs::exists(copy) == (b.exit_code == 0));
      // A restore into a new store: the store exists, as the backup, exactly when it succeeded
      // (no empty or half-restored store is left behind, nor its directory).
      auto read =
          env.run({"--state", "sqlite:" + fresh.string(), "pool", "list", "--format", "json"});
      if (into_new.exit_code == 0) {
        CHECK(read.out == backed_up);
      } else {
        CHECK(into_new.exit_code == 1);
        CHECK(read.exit_code == 4);
        CHECK(!fs::exists(fresh.parent_path()));
      }
      fs::remove_all(fresh.parent_path());
      fs::remove(copy);
    }
    for (uint64_t kb : free_kb) {
      CAPTURE(kb);
      const std::string before = env.run({"pool", "list", "--format", "json"}).out;
      env.disk->fill(kb * 1024);
      auto r = env.run({"state", "restore", backup.string(), "--force"});
      env.disk->unfill();
      CAPTURE(r.err);
      CHECK(!contains(r.err, "disk I/O error"));
      const std::string now = env.run({"pool", "list", "--format", "json"}).out;
      if (r.exit_code == 0) {
        CHECK(now == backed_up);
        break;
      }
      CHECK(r.exit_code == 1);
      CHECK(contains(r.err, "the disk is full"));
      CHECK(now == before); // one transaction: all of it or none
    }
    // Space back: both go through.
    const fs::path fresh = env.disk->path() / "fresh" / "state.db";
    auto into_new =
        env.run({"--state", "sqlite:" + fresh.string(), "state", "restore", backup.string()});
    CHECK_MESSAGE(into_new.exit_code == 0, into_new.err);
    CHECK(
        env.run({"--state", "sqlite:" + fresh.string(), "pool", "list", "--format", "json"}).out ==
        backed_up);
    auto over = env.run({"state", "restore", backup.string(), "--force"});
    CHECK_MESSAGE(over.exit_code == 0, over.err);
    CHECK(env.run({"pool", "list", "--format", "json"}).out == backed_up);
  }

  SUBCASE("nothing free at all: no command answers 'disk I/O error'") {
    REQUIRE(env.run({"qr", "create", "a", "--accelerator-type", "v5litepod-4"}).exit_code == 0);
    const std::string host = *names(env, {"pool", "hosts"}).begin();
    env.disk->fill(0);
    for (std::vector<std::string> args :
         {std::vector<std::string>{"qr", "list"},
          {"qr", "describe", "a"},
          {"pool", "list"},
          {"pool", "hosts"},
          {"pool", "describe"},
          {"state", "info"},
          {"state", "check"},
          {"cluster", "list"},
          {"workload", "list"},
          {"state", "backup", (env.disk->path() / "b.db").string()},
          {"pool", "drain", host, "--reason", "x"},
          {"pool", "add-hosts", "x1"},
          {"qr", "create", "b", "--accelerator-type", "v5litepod-4", "--async"},
          {"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-4", "--async"},
          {"qr", "delete", "a"}}) {
      CAPTURE(tpuctl::util::join(args, " "));
      auto r = env.run(args);
      CAPTURE(r.err);
      CHECK(!contains(r.err, "disk I/O error"));
      if (r.exit_code != 0 && r.exit_code != 4 && r.exit_code != 6) {
        CHECK(contains(r.err, "the disk is full"));
      }
    }
    env.disk->unfill();
  }
}

TEST_CASE("state faults: an etcd store whose space quota is used up refuses writes saying it is "
          "full and recording nothing; reads, state check and state backup still work") {
  TempDir tmp;
  const std::map<std::string, std::string> env{
      {"HOME", tmp.path().string()},
      {"XDG_STATE_HOME", (tmp.path() / "state").string()},
      {"XDG_CONFIG_HOME", (tmp.path() / "config").string()}};
  tpuctl::test::Background etcd(
      {"/usr/bin/etcd", "--name", "full", "--data-dir", (tmp.path() / "etcd").string(),
       "--quota-backend-bytes", "400000", "--listen-client-urls", "http://127.0.211.5:23790",
       "--advertise-client-urls", "http://127.0.211.5:23790", "--listen-peer-urls",
       "http://127.0.211.5:23800", "--initial-advertise-peer-urls", "http://127.0.211.5:23800",
       "--initial-cluster", "full=http://127.0.211.5:23800"},
      {}, {}, tmp.path(), "etcd");
  const std::string url = "etcd://127.0.211.5:23790/full/";
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--state", url});
    return run_tpuctl(args, env);
  };
  REQUIRE_MESSAGE(wait_until(
                      [&] {
                        return run({"pool", "list"}).exit_code == 4;
                      },
                      std::chrono::seconds(30)),
                  etcd.err());
  REQUIRE(run({"pool", "create", "p", "--generation", "v5p", "--shape", "16x16x16"}).exit_code ==
          0);
  auto count = [&] {
    return run_tpuctl({"--state", url, "pool", "hosts", "--format", "json"}, env);
  };
  int added = 0;
  bool refused = false;
  for (int i = 0; i < 60 && !refused; ++i) {
    const std::string before = count().out;
    auto r = run({"pool", "add-hosts", "h" + std::to_string(i) + "-[1-50]"});
    if (r.exit_code == 0) {
      ++added;
      continue;
    }
    refused = true;
    CAPTURE(r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "is full: its space quota is used up"));
    CHECK(contains(r.err, "this change was not recorded"));
    CHECK(count().out == before); // nothing of it
  }
  REQUIRE_MESSAGE(refused, "the quota never filled up");
  CHECK(json::parse(count().out).size() == static_cast<size_t>(added) * 50);
  auto check = run({"state", "check"});
  CHECK(check.exit_code == 1);
  CHECK(contains(check.out, "NOSPACE"));
  const fs::path backup = tmp.path() / "b.db";
  auto b = run({"state", "backup", backup.string()});
  CHECK_MESSAGE(b.exit_code == 0, b.err);
  CHECK(
      run_tpuctl({"--state", "sqlite:" + backup.string(), "pool", "hosts", "--format", "json"}, env)
          .out == count().out);
}
