// The state store under faults, through the real binary and a real SQLite store (issue 20):
// commands on a store that does not exist create nothing; read-only storage (a 0444 file, a
// 0555 directory, a read-only bind mount) serves every read and refuses writes saying why; on a
// disk that fills up (a small tmpfs) every exit status tells the truth about what was stored;
// a store deleted or replaced under a waiting command is noticed, and `pool local-down` still
// finds that pool's sshd servers. Mounts need privileges: where the host refuses them the test
// says so in a MESSAGE and runs what it can. Address block 127.0.226.x - 127.0.227.x, owned by
// this file.
#include <fstream>
#include <functional>
#include <sys/stat.h>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "remote/local_sshd.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/qr_env.hpp"
#include "tests/support/scratch_mounts.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::contains;
using tpuctl::test::file_mode;
using tpuctl::test::QrEnv;
using tpuctl::test::ReadOnlyView;
using tpuctl::test::run_tpuctl;
using tpuctl::test::TempDir;
using tpuctl::test::wait_until;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// An isolated HOME/XDG for commands that need no sshd.
std::map<std::string, std::string> scratch_env(const TempDir& tmp) {
  return {{"HOME", tmp.path().string()},
          {"XDG_STATE_HOME", (tmp.path() / "state").string()},
          {"XDG_CONFIG_HOME", (tmp.path() / "config").string()}};
}

// What `qr describe ID` says now: the state, or "" when it does not exist (exit 4).
std::string state_of(const QrEnv& env, const std::string& id) {
  auto r = env.run({"qr", "describe", id, "--format", "json"});
  if (r.exit_code == 4) {
    return "";
  }
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return json::parse(r.out)["state"].get<std::string>();
}

// True when process `pid` has `path` open (as /proc/PID/fd says).
bool has_open(int pid, const fs::path& path) {
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    if (fs::read_symlink(fd.path(), ec) == path) {
      return true;
    }
  }
  return false;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("state faults: a command on a store that does not exist says so and creates nothing; "
          "blank and schemeless --state values are usage errors; only creating commands create "
          "the store, and only once their input is valid") {
  TempDir tmp;
  auto env = scratch_env(tmp);
  const fs::path missing = tmp.path() / "no" / "dir" / "x.db";
  const std::vector<std::vector<std::string>> commands{
      {"qr", "list"},
      {"pool", "list"},
      {"state", "info"},
      {"state", "check"},
      {"pool", "hosts"},
      {"qr", "describe", "q"},
      {"state", "backup", (tmp.path() / "b.db").string()},
      {"qr", "create", "q", "--accelerator-type", "v5litepod-4", "--async"},
      {"pool", "local-down"}};
  for (auto args : commands) {
    CAPTURE(tpuctl::util::join(args, " "));
    args.insert(args.begin(), {"--state", "sqlite:" + missing.string()});
    auto r = run_tpuctl(args, env);
    CHECK(r.exit_code == 4);
    CHECK(contains(r.err,
                   "tpuctl: error: state store sqlite:" + missing.string() + " does not exist"));
    CHECK(!fs::exists(tmp.path() / "no"));
  }
  // The default store too: a read creates neither it nor its directory.
  auto listed = run_tpuctl({"qr", "list"}, env);
  CHECK(listed.exit_code == 4);
  CHECK(contains(listed.err, (tmp.path() / "state" / "tpuctl" / "state.db").string()));
  CHECK(!fs::exists(tmp.path() / "state"));

  // Values that are not a store's location: exit 2, and no file of that name appears.
  const fs::path cwd = fs::current_path();
  for (const std::string value : {"  ", "sqlite", "etcd", " sqlite:/tmp/x.db"}) {
    CAPTURE(value);
    auto r = run_tpuctl({"--state", value, "qr", "list"}, env);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "tpuctl: error: state store url '" + value + "'"));
    auto from_env = env;
    from_env["TPUCTL_STATE"] = value;
    CHECK(run_tpuctl({"pool", "create", "p", "--generation", "v5p"}, from_env).exit_code == 2);
    CHECK(!fs::exists(cwd / value));
  }
  CHECK(!fs::exists(tmp.path() / "state"));

  // A creating command with bad input creates nothing either; with good input, the store.
  CHECK(run_tpuctl({"pool", "create", "p", "--generation", "v9"}, env).exit_code == 2);
  CHECK(run_tpuctl({"pool", "local-up", "--hosts", "0"}, env).exit_code == 2);
  CHECK(!fs::exists(tmp.path() / "state"));
  auto created =
      run_tpuctl({"pool", "create", "p", "--generation", "v5p", "--shape", "4x4x4"}, env);
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  CHECK(file_mode(tmp.path() / "state" / "tpuctl") == 0700);
  CHECK(file_mode(tmp.path() / "state" / "tpuctl" / "state.db") == 0600);
  CHECK(run_tpuctl({"qr", "list"}, env).exit_code == 0);
}

TEST_CASE("state faults: read-only storage serves every read, refuses every write saying why, "
          "and keeps its mode") {
  TempDir tmp;
  auto env = scratch_env(tmp);
  REQUIRE(run_tpuctl({"pool", "create", "p", "--generation", "v5p", "--shape", "4x4x4"}, env)
              .exit_code == 0);
  const fs::path dir = tmp.path() / "state" / "tpuctl";
  const fs::path db = dir / "state.db";

  // `state` is the --state value to use; `why` what the refusal must name.
  auto check_read_only = [&](const std::string& state, const std::string& why) {
    auto info = run_tpuctl({"--state", state, "state", "info", "--format", "json"}, env);
    REQUIRE_MESSAGE(info.exit_code == 0, info.err);
    json i = json::parse(info.out);
    CHECK(i["writable"] == false);
    CHECK(contains(i["read_only_because"].get<std::string>(), why));
    CHECK(i["pools"] == 1);
    for (std::vector<std::string> read : {std::vector<std::string>{"pool", "list"},
                                          {"qr", "list"},
                                          {"pool", "describe"},
                                          {"qr", "describe", "nope"},
                                          {"state", "check"}}) {
      CAPTURE(tpuctl::util::join(read, " "));
      read.insert(read.begin(), {"--state", state});
      auto r = run_tpuctl(read, env);
      CHECK(r.exit_code == (read.back() == "nope" ? 4 : 0));
      CHECK(!contains(r.err, "unable to open"));
    }
    for (std::vector<std::string> write :
         {std::vector<std::string>{"pool", "create", "q", "--generation", "v5p"},
          {"pool", "delete", "p", "--force"},
          {"pool", "add-hosts", "h1"}}) {
      CAPTURE(tpuctl::util::join(write, " "));
      write.insert(write.begin(), {"--state", state});
      auto r = run_tpuctl(write, env);
      CHECK(r.exit_code == 1);
      CHECK(contains(r.err, "is read-only (" + why));
    }
    auto after = run_tpuctl({"--state", state, "pool", "list", "--format", "json"}, env);
    CHECK(json::parse(after.out).size() == 1); // nothing was written
  };

  SUBCASE("a 0444 file (even for root, who could write it)") {
    REQUIRE(::chmod(db.c_str(), 0444) == 0);
    check_read_only("sqlite:" + db.string(), "its mode is 0444");
    CHECK(file_mode(db) == 0444); // no command put write permission back
    REQUIRE(::chmod(db.c_str(), 0600) == 0);
  }
  SUBCASE("a 0555 directory") {
    REQUIRE(::chmod(dir.c_str(), 0555) == 0);
    check_read_only("sqlite:" + db.string(), "its directory '" + dir.string() + "' has mode 0555");
    CHECK(file_mode(dir) == 0555);
    ::chmod(dir.c_str(), 0700);
  }
  SUBCASE("a read-only filesystem (a read-only bind mount), with no -shm file to share") {
    REQUIRE(!fs::exists(db.string() + "-shm")); // the last writer removed it
    std::string why;
    auto view = ReadOnlyView::mount(dir, tmp.path() / "ro", why);
    REQUIRE_MESSAGE(view, "the read-only filesystem case needs a read-only bind mount (root, "
                          "as CI has): "
                              << why);
    check_read_only("sqlite:" + (view->path() / "state.db").string(),
                    "it is on a read-only filesystem");
  }
  // Writable again: the write goes through, so the refusals above were the storage's doing.
  auto written = run_tpuctl({"pool", "create", "q", "--generation", "v5p"}, env);
  CHECK_MESSAGE(written.exit_code == 0, written.err);
  CHECK(file_mode(db) == 0600);
}

TEST_CASE("state faults: on a disk that fills up, a create's exit status tells the truth: "
          "nothing stored and 'the disk is full', or the request it names exists") {
  QrEnv env(4, "127.0.226.2", "", 24u << 20);
  REQUIRE_MESSAGE(env.disk, "the full-disk cases need a small tmpfs under the store (root, as CI "
                            "has): "
                                << env.disk_why);
  // Nothing free at all: every command that fails says the disk is full, never "disk I/O
  // error", and a create that failed stored nothing.
  env.disk->fill(0);
  for (std::vector<std::string> args :
       {std::vector<std::string>{"qr", "list"},
        {"pool", "list"},
        {"state", "info"},
        {"qr", "create", "full", "--accelerator-type", "v5litepod-4", "--async"}}) {
    CAPTURE(tpuctl::util::join(args, " "));
    auto r = env.run(args);
    CHECK(!contains(r.err, "disk I/O error"));
    if (r.exit_code != 0) {
      CHECK(contains(r.err, "the disk is full"));
    }
    if (args[0] == "qr" && args[1] == "create" && r.exit_code != 0) {
      env.disk->unfill();
      CHECK(state_of(env, "full").empty());
      env.disk->fill(0);
    }
  }
  env.disk->unfill();
  (void)env.run({"qr", "delete", "full", "--force"});

  // A little free space (the amounts of the report: 48-96 KB): whatever a create answers is
  // what the store holds once space is back.
  int stored = 0;
  int refused = 0;
  for (uint64_t kb : {48, 64, 80, 96}) {
    for (bool async : {true, false}) {
      const std::string id = "b" + std::to_string(kb) + (async ? "a" : "s");
      CAPTURE(id);
      std::vector<std::string> args{"qr", "create", id, "--accelerator-type", "v5litepod-4"};
      if (async) {
        args.push_back("--async");
      }
      env.disk->fill(kb * 1024);
      auto r = env.run(args);
      env.disk->unfill();
      CAPTURE(r.err);
      CHECK(!contains(r.err, "disk I/O error"));
      const std::string now = state_of(env, id);
      if (r.exit_code == 0 || r.exit_code == 6) {
        // It exists, and stdout said so: its id and state.
        CHECK(!now.empty());
        CHECK(contains(r.out, id));
        if (r.exit_code == 6) {
          CHECK(contains(r.err, "queued resource '" + id + "' was created and exists ("));
          CHECK(contains(r.err, "the disk is full"));
        }
        ++stored;
      } else if (now.empty()) {
        CHECK(r.exit_code == 1); // the failure stored nothing, and says why
        CHECK(contains(r.err, "the disk is full"));
        ++refused;
      } else {
        // Recorded, then provisioning met the full disk on the worker (its files live there
        // too): FAILED, as gcloud's create reports a request that failed.
        CHECK(r.exit_code == 1);
        CHECK(now == "FAILED");
        CHECK(contains(r.err, "queued resource '" + id + "' FAILED"));
        CHECK(contains(r.out, id));
        ++stored;
      }
      // Space is back: what exists is carried on and deleted like any request.
      if (!now.empty()) {
        auto del = env.run({"qr", "delete", id, "--force"});
        CHECK_MESSAGE(del.exit_code == 0, del.err);
      }
    }
  }
  MESSAGE("creates on a nearly full disk: " << stored << " stored, " << refused << " refused");

  // A second local pool, whose record and hosts are two commits: it exists as the exit status
  // says (0 or 6), or not at all (1).
  for (uint64_t kb : {32, 64, 96, 160}) {
    CAPTURE(kb);
    env.disk->fill(kb * 1024);
    auto up = env.run({"pool", "local-up", "--pool", "lp", "--hosts", "2", "--address-base",
                       "127.0.226.20", "--port", "2222"});
    env.disk->unfill();
    CAPTURE(up.err);
    CHECK(!contains(up.err, "disk I/O error"));
    json pools = env.run_json({"pool", "list"});
    bool exists = false;
    for (const auto& p : pools) {
      exists = exists || p["name"] == "lp";
    }
    if (up.exit_code == 0 || up.exit_code == 6) {
      CHECK(exists);
      CHECK(env.run({"pool", "local-down", "--pool", "lp", "--force"}).exit_code == 0);
    } else {
      CHECK(up.exit_code == 1);
      CHECK(!exists);
    }
  }
  CHECK(env.claims().empty());
  auto check = env.run({"state", "check"});
  CHECK_MESSAGE(check.exit_code == 0, (check.out + check.err));
}

TEST_CASE("state faults: a store replaced or deleted under a waiting create is noticed, and "
          "`pool local-down` still finds and stops the pool's sshd servers") {
  QrEnv env(4, "127.0.227.2");
  // All four hosts busy, so later requests wait.
  auto first = env.run({"qr", "create", "a", "--accelerator-type", "v5litepod-16"});
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  REQUIRE(
      env.run({"qr", "create", "b", "--accelerator-type", "v5litepod-4", "--async"}).exit_code ==
      0);
  REQUIRE(state_of(env, "b") == "WAITING_FOR_RESOURCES");

  // Replaced: the same bytes under a new file (what `cp x state.db && mv` does).
  const fs::path db = env.store_path();
  auto watcher = env.start({"qr", "wait", "b", "--for=state=ACTIVE", "--timeout", "300s"}, "w");
  REQUIRE(wait_until([&] { return has_open(watcher->pid(), db); }, 30s));
  fs::copy_file(db, db.string() + ".copy");
  fs::rename(db.string() + ".copy", db);
  auto replaced = watcher->wait(60s);
  REQUIRE(replaced.has_value());
  CHECK(*replaced == 1);
  CHECK(contains(watcher->err(), "state store '" + db.string() +
                                     "' was replaced by another file while this tpuctl was "
                                     "using it"));
  CHECK(state_of(env, "b") == "WAITING_FOR_RESOURCES"); // the copy serves on

  auto waiting = env.start({"qr", "create", "c", "--accelerator-type", "v5litepod-4"}, "waiting");
  REQUIRE(wait_until([&] { return state_of(env, "c") == "WAITING_FOR_RESOURCES"; }, 60s));
  REQUIRE(has_open(waiting->pid(), db));
  // Deleted: the whole state directory, local pool files included.
  const fs::path root = env.pool_dir();
  REQUIRE(tpuctl::remote::local_sshd_pids_under(root).size() == 4);
  fs::remove_all(env.dir.path() / "state");
  auto status = waiting->wait(60s);
  REQUIRE(status.has_value());
  CHECK(*status == 1);
  CHECK(contains(waiting->err(), "was deleted or moved away while this tpuctl was using it"));
  CHECK(!contains(waiting->err(), "qr wait")); // no advice that leads to "not found"
  CHECK(!contains(waiting->out(), "WAITING")); // it does not claim the request exists

  // No store knows the pool: local-down finds its servers from what is left (/proc).
  auto down = env.run({"pool", "local-down", "--format", "json"});
  REQUIRE_MESSAGE(down.exit_code == 0, down.err);
  json d = json::parse(down.out);
  CHECK(d["sshd_stopped"] == 4);
  CHECK(d["found_from_disk"] == true);
  CHECK(contains(down.err, "the state store has no local pool 'local'"));
  CHECK(tpuctl::remote::local_sshd_pids_under(root).empty());
  // Nothing more to stop: not found, as any unknown pool.
  CHECK(env.run({"pool", "local-down"}).exit_code == 4);
}
