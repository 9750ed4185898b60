// `tpuctl state backup | restore | check` and the detection of an etcd cluster that was reset,
// through the real binary, a real SQLite store with a local pool of real sshd servers (address
// block 127.0.228.x, owned by this file) and a real etcd (127.130.0.0/16, the etcd tests'
// block; tests/support/etcd_fixture.hpp).
#include <csignal>
#include <fstream>
#include <functional>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "state/location.hpp"
#include "tests/support/background.hpp"
#include "tests/support/etcd_fixture.hpp"
#include "tests/support/machine.hpp"
#include "tests/support/qr_env.hpp"

using nlohmann::json;
using tpuctl::test::contains;
using tpuctl::test::EtcdCluster;
using tpuctl::test::file_mode;
using tpuctl::test::Machine;
using tpuctl::test::QrEnv;
using tpuctl::test::wait_until;
namespace fs = std::filesystem;
namespace state = tpuctl::state;

namespace {

// "id STATE" of every queued resource, sorted: what a user compares before and after.
std::string requests(const QrEnv& env, const std::string& state_url = "") {
  std::vector<std::string> args{"qr", "list"};
  if (!state_url.empty()) {
    args.insert(args.begin(), {"--state", state_url});
  }
  json rows = env.run_json(args);
  std::string out;
  for (const auto& r : rows) {
    out += r["id"].get<std::string>() + " " + r["state"].get<std::string>() + "\n";
  }
  return out;
}

// True when process `pid` has a socket open (its connection to etcd).
bool has_socket(int pid) {
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    if (fs::read_symlink(fd.path(), ec).string().rfind("socket:", 0) == 0) {
      return true;
    }
  }
  return false;
}

// Overwrites 4 KB in the middle of `file` with garbage.
void corrupt_middle(const fs::path& file) {
  const auto size = fs::file_size(file);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>((size / 2) / 4096 * 4096));
  std::string garbage(4096, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) {
    garbage[i] = static_cast<char>((i * 131 + 7) % 251);
  }
  f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("state backup/restore/check on SQLite: a consistent 0600 snapshot; restore refuses a "
          "non-empty store without --force and a damaged backup always; check finds a 4 KB "
          "corruption and broken invariants") {
  QrEnv env(4, "127.0.228.2");
  auto created = env.run({"qr", "create", "s", "--accelerator-type", "v5litepod-4"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  const std::string before = requests(env);
  const json claims_before = env.claims();
  REQUIRE(claims_before.size() == 1);

  const fs::path backup = env.dir.path() / "backup.db";
  auto b = env.run({"state", "backup", backup.string(), "--format", "json"});
  REQUIRE_MESSAGE(b.exit_code == 0, b.err);
  CHECK(json::parse(b.out)["copied"]["queued_resources"] == 1);
  CHECK(file_mode(backup) == 0600);
  // The backup is a store of its own: readable and sound.
  CHECK(requests(env, "sqlite:" + backup.string()) == before);
  auto checked = env.run({"--state", "sqlite:" + backup.string(), "state", "check"});
  CHECK_MESSAGE(checked.exit_code == 0, (checked.out + checked.err));
  // An existing file is replaced only with --force.
  CHECK(env.run({"state", "backup", backup.string()}).exit_code == 1);
  CHECK(env.run({"state", "backup", backup.string(), "--force"}).exit_code == 0);

  // Changes after the backup; a restore without --force changes nothing.
  REQUIRE(
      env.run({"qr", "create", "t", "--accelerator-type", "v5litepod-4", "--async"}).exit_code ==
      0);
  const std::string changed = requests(env);
  REQUIRE(changed != before);
  auto refused = env.run({"state", "restore", backup.string()});
  CHECK(refused.exit_code == 1);
  CHECK(contains(refused.err, "is not empty (it holds pools 'local')"));
  CHECK(requests(env) == changed);

  // A damaged backup is refused, even with --force, and changes nothing.
  const fs::path damaged = env.dir.path() / "damaged.db";
  fs::copy_file(backup, damaged);
  corrupt_middle(damaged);
  auto bad = env.run({"state", "restore", damaged.string(), "--force"});
  CHECK(bad.exit_code == 1);
  CHECK(contains(bad.err, "is damaged, so nothing was restored"));
  CHECK(requests(env) == changed);
  // And `state check` finds the corruption that every other command may miss.
  auto found = env.run({"--state", "sqlite:" + damaged.string(), "state", "check"});
  CHECK(found.exit_code == 1);
  CHECK(contains(found.out, "integrity_check"));
  CHECK(contains(found.err, " (listed above)"));

  // --force: the store is the backup again; the next command carries on from there.
  auto restored = env.run({"state", "restore", backup.string(), "--force"});
  CHECK_MESSAGE(restored.exit_code == 0, restored.err);
  // The backup is one file, and reading it leaves nothing beside it (no -wal, no -shm).
  for (const char* sidecar : {"-wal", "-shm", "-journal"}) {
    CHECK_MESSAGE(!fs::exists(backup.string() + sidecar), std::string(sidecar));
  }
  CHECK(requests(env) == before);
  CHECK(env.claims() == claims_before);
  auto sound = env.run({"state", "check"});
  CHECK_MESSAGE(sound.exit_code == 0, (sound.out + sound.err));

  // Into a store that does not exist yet: restore creates it.
  const fs::path fresh = env.dir.path() / "fresh" / "state.db";
  auto into_new =
      env.run({"--state", "sqlite:" + fresh.string(), "state", "restore", backup.string()});
  CHECK_MESSAGE(into_new.exit_code == 0, into_new.err);
  CHECK(file_mode(fresh) == 0600);
  CHECK(requests(env, "sqlite:" + fresh.string()) == before);

  // Invariants: a claim whose owner does not exist, and a host claimed after it was drained.
  {
    auto store = state::open_store("sqlite:" + env.store_path().string());
    REQUIRE(store.has_value());
    json hosts = env.run_json({"pool", "hosts"});
    std::vector<std::string> free;
    for (const auto& h : hosts) {
      if (h["claimed_by"].get<std::string>().empty()) {
        free.push_back(h["name"]);
      }
    }
    REQUIRE(free.size() >= 2);
    REQUIRE((*store)->claim_hosts("local", {free[0]}, "ghost"));
    REQUIRE(env.run({"pool", "drain", free[1], "--reason", "disk"}).exit_code == 0);
    REQUIRE((*store)->claim_hosts("local", {free[1]}, "s"));
  }
  auto broken = env.run({"state", "check", "--format", "json"});
  CHECK(broken.exit_code == 1);
  json findings = json::parse(broken.out);
  std::string all = findings.dump();
  CAPTURE(all);
  CHECK(contains(all, "is claimed by queued resource 'ghost', which does not exist"));
  CHECK(contains(all, "after it was drained ('disk')"));
  CHECK(contains(all, "which has no worker on it"));
}

TEST_CASE("state backup/restore on etcd: a snapshot of a shared store restores into SQLite and "
          "back into etcd") {
  EtcdCluster cluster(1);
  const std::string url = cluster.url(tpuctl::test::unique_prefix());
  Machine m(url);
  REQUIRE(m.run({"pool", "create", "p", "--generation", "v5p", "--shape", "4x4x4"}).exit_code == 0);
  REQUIRE(m.run({"pool", "add-hosts", "h[1-4]"}).exit_code == 0);
  REQUIRE(m.run({"pool", "drain", "h2", "--reason", "fan"}).exit_code == 0);
  const std::string hosts_before = m.run_json({"pool", "hosts"}).dump();

  const fs::path backup = m.dir.path() / "etcd-backup.db";
  auto b = m.run({"state", "backup", backup.string(), "--format", "json"});
  REQUIRE_MESSAGE(b.exit_code == 0, b.err);
  CHECK(json::parse(b.out)["copied"]["hosts"] == 4);
  CHECK(file_mode(backup) == 0600);
  CHECK(m.run_json({"--state", "sqlite:" + backup.string(), "pool", "hosts"}).dump() ==
        hosts_before);

  // The etcd store loses a host; the backup brings it back (--force: the store holds a pool).
  REQUIRE(m.run({"pool", "remove-hosts", "h4"}).exit_code == 0);
  CHECK(m.run({"state", "restore", backup.string()}).exit_code == 1);
  auto restored = m.run({"state", "restore", backup.string(), "--force"});
  CHECK_MESSAGE(restored.exit_code == 0, restored.err);
  CHECK(m.run_json({"pool", "hosts"}).dump() == hosts_before);
  auto check = m.run({"state", "check"});
  CHECK_MESSAGE(check.exit_code == 0, (check.out + check.err));
}

TEST_CASE("state on etcd: a cluster restarted with an empty data directory is a reset store, "
          "not a new install") {
  EtcdCluster cluster(1);
  const std::string url = cluster.url(tpuctl::test::unique_prefix());
  Machine m(url);
  // Nothing there yet: reads say so and create nothing (no schema key written by a read).
  auto empty = m.run({"qr", "list"});
  CHECK(empty.exit_code == 4);
  CHECK(contains(empty.err, "does not exist (etcd holds no tpuctl state under prefix"));
  REQUIRE(m.run({"pool", "create", "p", "--generation", "v5p", "--shape", "4x4x4"}).exit_code == 0);
  REQUIRE(m.run({"pool", "list"}).exit_code == 0);

  for (bool new_identity : {false, true}) {
    CAPTURE(new_identity);
    // A command running through the reset stops, saying so, instead of watching a new store.
    // It is held (SIGSTOP) while the cluster is down, so it meets the new cluster, not an
    // unreachable one.
    tpuctl::test::Background watch({tpuctl::test::tpuctl_binary(), "qr", "list", "--watch",
                                    "--pool", "p", "--format", "jsonl"},
                                   m.vars, {}, m.dir.path(), "watch");
    REQUIRE(wait_until([&] { return has_socket(watch.pid()); }, std::chrono::seconds(30)));
    ::kill(watch.pid(), SIGSTOP);
    cluster.restart_empty(new_identity);
    ::kill(watch.pid(), SIGCONT);
    auto stopped = watch.wait(std::chrono::seconds(60));
    REQUIRE(stopped.has_value());
    CHECK(*stopped == 1);
    CHECK(
        contains(watch.err(), "the etcd cluster was reset or replaced while tpuctl was using it"));
    for (std::vector<std::string> read :
         {std::vector<std::string>{"qr", "list"}, {"pool", "list"}, {"state", "info"}}) {
      CAPTURE(read[0] + " " + read[1]);
      auto r = m.run(read);
      CHECK(r.exit_code == 1);
      CHECK(contains(r.err, "the etcd cluster was reset"));
      CHECK(contains(r.err, "tpuctl state restore FILE"));
      CHECK(!contains(r.err, "no pools yet"));
    }
    // Starting afresh is a deliberate create, which says what it found.
    auto again = m.run({"pool", "create", "p", "--generation", "v5p", "--shape", "4x4x4"});
    CHECK_MESSAGE(again.exit_code == 0, again.err);
    CHECK(contains(again.err, "starting a new store there"));
    CHECK(m.run({"pool", "list"}).exit_code == 0);
  }
  // Another machine that never used the store sees a store, as it is.
  Machine other(url);
  CHECK(other.run({"pool", "list"}).exit_code == 0);
}

TEST_CASE("state check: a cluster whose queued resource was deleted and a workload whose cluster "
          "is gone are findings that say how to clear them; cluster delete clears the first") {
  QrEnv env(2, "127.0.228.10");
  auto created = env.run({"cluster", "create", "--cluster", "c1", "--tpu-type", "v5litepod-4"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  REQUIRE(env.run({"qr", "delete", "c1", "--force"}).exit_code == 0);
  auto found = env.run({"state", "check", "--format", "json"});
  CHECK(found.exit_code == 1);
  std::string all = json::parse(found.out).dump();
  CAPTURE(all);
  CHECK(contains(all, "cluster 'c1'"));
  CHECK(contains(all, "its queued resource 'c1' does not exist"));
  CHECK(contains(all, "'tpuctl cluster delete c1' removes the cluster"));
  CHECK(env.run({"cluster", "delete", "c1"}).exit_code == 0);
  auto clean = env.run({"state", "check"});
  CHECK_MESSAGE(clean.exit_code == 0, (clean.out + clean.err));

  // A workload record whose cluster record is gone (no command leaves one: written here).
  REQUIRE(
      env.run({"cluster", "create", "--cluster", "c2", "--tpu-type", "v5litepod-4"}).exit_code ==
      0);
  REQUIRE(env.run({"workload", "create", "--cluster", "c2", "--workload", "w2", "--command",
                   "sleep 600"})
              .exit_code == 0);
  {
    auto store = state::open_store("sqlite:" + env.store_path().string());
    REQUIRE(store.has_value());
    REQUIRE((*store)->commit({state::RemoveOp{{state::Kind::cluster, "local", "c2"}}}));
  }
  auto orphan = env.run({"state", "check", "--format", "json"});
  CHECK(orphan.exit_code == 1);
  all = json::parse(orphan.out).dump();
  CHECK(contains(all, "workload 'w2'"));
  CHECK(contains(all, "belongs to cluster 'c2', which does not exist"));
  CHECK(env.run({"workload", "delete", "w2"}).exit_code == 0);
  CHECK(env.run({"qr", "delete", "c2", "--force"}).exit_code == 0);
  auto cleared = env.run({"state", "check"});
  CHECK_MESSAGE(cleared.exit_code == 0, (cleared.out + cleared.err));
}
