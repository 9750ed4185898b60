// Chaos under load, through the real binary, real sshd servers and the real SQLite store
// (address block 127.0.180.x - 127.0.187.x, owned by this file):
//  - a --worker=all broadcast over a 32-host slice while random workers' sshd (the listener and
//    its sessions) are stopped, killed, and killed and restarted: every worker's outcome is
//    classified, the broadcast ends within its timeout, and no remote process is left;
//  - tpuctl SIGKILLed after the claim and during the push, probe and preflight
//    (TPUCTL_FAILPOINT, util/failpoint.hpp): the next command or the controller resumes the slice,
//    or delete rolls it back, and no host stays claimed by a slice that does not exist;
//  - Ctrl-C (SIGINT) during a broadcast and during create: the remote processes are killed, the
//    claims are consistent, exit 130;
//  - the disk under the store (a small tmpfs, where the host allows mounting one) filling up
//    while a create provisions: the exit status says what exists, and nothing is lost.
#include <algorithm>
#include <csignal>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "provision/queue/queued_resource.hpp"
#include "provision/queue/reconcile.hpp"
#include "state/location.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "tests/support/qr_env.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::processes_with_marker;
using tpuctl::test::QrEnv;
using tpuctl::test::read_file;
using tpuctl::test::wait_until;
using tpuctl::test::worker_hosts;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// pid -> (parent pid, command name) of every process.
std::map<int, std::pair<int, std::string>> process_table() {
  std::map<int, std::pair<int, std::string>> table;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) {
    return table;
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::string stat = read_file("/proc/" + name + "/stat");
    auto open = stat.find('(');
    auto close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 4 >= stat.size()) {
      continue;
    }
    // "pid (comm) S ppid ..."
    auto fields = tpuctl::util::split(stat.substr(close + 2), ' ');
    if (fields.size() < 2) {
      continue;
    }
    table[std::stoi(name)] = {std::stoi(fields[1]), stat.substr(open + 1, close - open - 1)};
  }
  ::closedir(d);
  return table;
}

// A host's sshd listener and every sshd under it (the sessions of its connections). Not the
// commands those sessions run: killing the sshd processes is the connection dying under them.
std::vector<int> sshd_tree(int listener) {
  auto table = process_table();
  std::vector<int> tree{listener};
  for (size_t i = 0; i < tree.size(); ++i) {
    for (const auto& [pid, info] : table) {
      if (info.first == tree[i] && info.second == "sshd") {
        tree.push_back(pid);
      }
    }
  }
  return tree;
}

void signal_all(const std::vector<int>& pids, int sig) {
  for (int pid : pids) {
    ::kill(pid, sig);
  }
}

// The parsed lines of --output=jsonl, by worker index.
std::map<int, json> jsonl_by_index(const std::string& out) {
  std::map<int, json> by_index;
  for (const auto& line : tpuctl::util::split(out, '\n')) {
    if (!line.empty()) {
      json j = json::parse(line);
      by_index[j["index"].get<int>()] = j;
    }
  }
  return by_index;
}

// The store's view, read directly (a tpuctl command would reconcile and start a driver).
struct StoreView {
  std::optional<tpuctl::provision::QueuedResource> qr;
  std::set<std::string> claimed; // hosts claimed by the request
};

StoreView read_store(const QrEnv& env, const std::string& id) {
  auto store =
      tpuctl::state::open_store("sqlite:" + (env.dir.path() / "state/tpuctl/state.db").string());
  REQUIRE_MESSAGE(store.has_value(), store.error().message);
  StoreView view;
  auto found = (*store)->find(tpuctl::state::queued_resource_key("local", id));
  REQUIRE(found.has_value());
  if (*found) {
    auto qr = tpuctl::provision::qr_from_record(**found);
    REQUIRE(qr.has_value());
    view.qr = *qr;
  }
  auto claims = (*store)->claims_of("local", id);
  REQUIRE(claims.has_value());
  for (const auto& c : *claims) {
    view.claimed.insert(c.host);
  }
  return view;
}

std::set<std::string> slice_hosts(const tpuctl::provision::QueuedResource& qr) {
  auto hosts = tpuctl::provision::hosts_of(qr);
  return {hosts.begin(), hosts.end()};
}

// The state letter of `pid` in /proc/PID/stat ('T' when stopped), or 0 when it is gone.
char process_state(int pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? 0 : stat[close + 2];
}

// Every claimed host belongs to a request that exists.
void check_no_orphan_claims(const QrEnv& env) {
  const json claims = env.claims();
  for (auto it = claims.begin(); it != claims.end(); ++it) {
    const std::string host = it.key();
    const std::string owner = it.value();
    CAPTURE(host);
    CAPTURE(owner);
    auto described = env.run({"qr", "describe", owner});
    CHECK_MESSAGE(described.exit_code == 0, described.err);
  }
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("chaos: a --worker=all broadcast over 32 hosts while workers' sshd are stopped, killed "
          "and restarted classifies every worker, ends on time and leaves no process") {
  const std::vector<std::string> local_up{
      "pool",           "local-up",    "--hosts", "32",   "--generation", "v5e",
      "--address-base", "127.0.180.2", "--port",  "2222", "--shape",      "8x16"};
  QrEnv env(32, "127.0.180.2", "8x16");
  auto created = env.run({"qr", "create", "big", "--accelerator-type", "v5litepod-128"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  const auto hosts = worker_hosts(env.describe("big"));
  REQUIRE(hosts.size() == 32);
  auto listener = [&](int worker) {
    std::ifstream in(env.pool_dir() / "hosts" / hosts[worker] / "sshd.pid");
    int pid = 0;
    in >> pid;
    REQUIRE(pid > 0);
    return pid;
  };

  const unsigned seed = std::random_device{}();
  MESSAGE("chaos seed " << seed);
  std::mt19937 rng(seed);
  std::vector<int> order(32);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const std::vector<int> stopped{order[0], order[1]};
  const std::vector<int> killed{order[2], order[3]};
  const std::vector<int> restarted{order[4], order[5]};
  const std::set<int> victims(order.begin(), order.begin() + 6);

  // Round 1: the command is running everywhere when the sshd processes are hit.
  // This process's own marker: a second copy of the suite may run the same seed at once.
  const std::string mark = "chaos-" + std::to_string(seed) + "-" + std::to_string(::getpid());
  auto marker = [&](int worker) { return mark + ":" + std::to_string(worker) + ":"; };
  auto running = [&](int worker) { return !processes_with_marker(marker(worker)).empty(); };
  const auto t0 = Clock::now();
  auto broadcast = env.start({"ssh", "big", "--worker=all", "--output", "jsonl", "--timeout", "15s",
                              "--connect-timeout", "3s", "--command",
                              "export CHAOS=" + mark + ":$TPU_WORKER_ID:; sleep 10"},
                             "round-1");
  REQUIRE(wait_until(
      [&] {
        for (int w = 0; w < 32; ++w) {
          if (!running(w)) {
            return false;
          }
        }
        return true;
      },
      20s));
  std::map<int, std::vector<int>> frozen;
  for (int w : stopped) {
    frozen[w] = sshd_tree(listener(w));
    signal_all(frozen[w], SIGSTOP);
  }
  for (int w : killed) {
    signal_all(sshd_tree(listener(w)), SIGKILL);
  }
  for (int w : restarted) {
    signal_all(sshd_tree(listener(w)), SIGKILL);
  }
  auto up = env.run(local_up); // starts the two restarted ones (and the two killed ones)
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  for (int w : killed) {
    signal_all({listener(w)}, SIGKILL); // down again: these stay down for round 2
  }
  // A command whose connection died is reaped on its host within seconds; the others run on.
  for (int w : killed) {
    CAPTURE(w);
    CHECK(wait_until([&] { return !running(w); }, 8s));
  }
  for (int w : restarted) {
    CAPTURE(w);
    CHECK(wait_until([&] { return !running(w); }, 8s));
  }
  if (seconds_since(t0) < 9) {
    for (int w = 0; w < 32; ++w) {
      if (victims.count(w) == 0) {
        CAPTURE(w);
        CHECK(running(w));
      }
    }
  } else {
    MESSAGE("round 1: the machine was too slow to see the untouched workers still running");
  }

  auto status = broadcast->wait(60s);
  REQUIRE(status.has_value());
  const double took = seconds_since(t0);
  // --timeout 15s, then up to 5 s trying to kill a command whose sshd is frozen: a frozen host
  // does not hold the broadcast forever (the margin is for a loaded machine).
  CHECK(took < 50);
  auto results = jsonl_by_index(broadcast->out());
  REQUIRE(results.size() == 32);
  for (const auto& [w, r] : results) {
    CAPTURE(r.dump());
    if (std::find(stopped.begin(), stopped.end(), w) != stopped.end()) {
      CHECK(r["outcome"] == "timeout");
    } else if (victims.count(w) != 0) {
      CHECK(r["outcome"] == "error"); // the connection was lost
      CHECK(!r["error"].is_null());
    } else {
      CHECK(r["outcome"] == "ok");
    }
  }
  // The exit status is the first failing worker's: 124 for a timeout, 255 for a lost connection.
  const int first_victim = *victims.begin();
  const bool first_is_stopped =
      std::find(stopped.begin(), stopped.end(), first_victim) != stopped.end();
  CHECK(*status == (first_is_stopped ? 124 : 255));
  for (auto& [w, pids] : frozen) {
    signal_all(pids, SIGCONT);
  }
  // Nothing of round 1 is left anywhere once the frozen sessions see their connection gone.
  for (int w = 0; w < 32; ++w) {
    CAPTURE(w);
    CHECK(wait_until([&] { return !running(w); }, 10s));
  }

  // Round 2: hosts are down or frozen before the broadcast connects.
  const std::vector<int> frozen_listeners{order[6], order[7]};
  for (int w : frozen_listeners) {
    ::kill(listener(w), SIGSTOP);
  }
  const auto t1 = Clock::now();
  auto r2 = env.run({"ssh", "big", "--worker=all", "--output", "jsonl", "--timeout", "15s",
                     "--connect-timeout", "3s", "--command", "echo up"});
  CHECK(seconds_since(t1) < 3 + 8);
  auto results2 = jsonl_by_index(r2.out);
  REQUIRE(results2.size() == 32);
  for (const auto& [w, r] : results2) {
    CAPTURE(r.dump());
    if (std::find(killed.begin(), killed.end(), w) != killed.end()) {
      CHECK(r["outcome"] == "refused");
    } else if (std::find(frozen_listeners.begin(), frozen_listeners.end(), w) !=
               frozen_listeners.end()) {
      CHECK(r["outcome"] == "unreachable");
    } else {
      CHECK(r["outcome"] == "ok");
      CHECK(r["stdout"] == "up\n");
    }
  }
  CHECK(r2.exit_code == 255);
  for (int w : frozen_listeners) {
    ::kill(listener(w), SIGCONT);
  }

  // Everything restarted: the whole slice answers again.
  REQUIRE(env.run(local_up).exit_code == 0);
  auto r3 = env.run({"ssh", "big", "--worker=all", "--command", "true"});
  CHECK_MESSAGE(r3.exit_code == 0, r3.err);
}

TEST_CASE("chaos: tpuctl killed after the claim and during the push and the preflight (with "
          "the probe): the next command or the controller resumes the slice, delete rolls it "
          "back, and no host stays claimed by a slice that does not exist") {
  QrEnv env(8, "127.0.181.2");
  // The push first: the hosts have no agent yet, so the kill lands while files are copied.
  const std::vector<std::string> steps{"push", "claimed", "preflight"};
  for (const auto& step : steps) {
    CAPTURE(step);
    const std::string id = "killed-at-" + step;
    auto killed = env.run_with({"qr", "create", id, "--accelerator-type", "v5litepod-16"},
                               {{"TPUCTL_FAILPOINT", "provision." + step}});
    REQUIRE(killed.exit_code == 128 + SIGKILL);

    // As the dead process left it: PROVISIONING, holding exactly its slice's hosts.
    StoreView left = read_store(env, id);
    REQUIRE(left.qr.has_value());
    CHECK(left.qr->state == tpuctl::provision::QrState::provisioning);
    CHECK(left.claimed == slice_hosts(*left.qr));
    CHECK(left.claimed.size() == 4);
    const std::string uid = left.qr->uid;

    if (step == "claimed") {
      // The controller picks it up.
      auto controller = env.start({"controller", "run"}, "controller-" + step);
      CHECK(wait_until([&] { return env.describe(id)["state"] == "ACTIVE"; }, 90s));
      ::kill(controller->pid(), SIGINT);
      CHECK(controller->wait(20s) == std::optional<int>(130));
    } else {
      auto waited = env.run({"qr", "wait", id, "--for=state=ACTIVE", "--timeout", "90s"});
      CHECK_MESSAGE(waited.exit_code == 0, waited.err);
    }
    StoreView resumed = read_store(env, id);
    REQUIRE(resumed.qr.has_value());
    CHECK(resumed.qr->state == tpuctl::provision::QrState::active);
    CHECK(resumed.claimed == slice_hosts(*resumed.qr));
    // Whatever the killed process had started on the workers is gone (a slice that is ACTIVE and
    // runs no workload has no process).
    CHECK(wait_until([&] { return processes_with_marker(uid).empty(); }, 10s));
    CHECK(env.run({"qr", "delete", id, "--force"}).exit_code == 0);
  }

  // Killed, then deleted instead of resumed: the hosts come back.
  auto killed = env.run_with({"qr", "create", "rolled-back", "--accelerator-type", "v5litepod-16"},
                             {{"TPUCTL_FAILPOINT", "provision.preflight"}});
  REQUIRE(killed.exit_code == 128 + SIGKILL);
  auto del = env.run({"qr", "delete", "rolled-back", "--force"});
  CHECK_MESSAGE(del.exit_code == 0, del.err);
  CHECK(env.run({"qr", "describe", "rolled-back"}).exit_code == 4);
  CHECK(read_store(env, "rolled-back").claimed.empty());
  CHECK(env.claims().empty());
  check_no_orphan_claims(env);
}

TEST_CASE("chaos: Ctrl-C during a broadcast kills the remote commands and exits 130; during "
          "create it kills the steps in flight, keeps the claims consistent and exits 130") {
  QrEnv env(8, "127.0.182.2");
  auto created = env.run({"qr", "create", "s", "--accelerator-type", "v5litepod-16"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);

  const std::string mark = "chaos-int-" + std::to_string(::getpid());
  // The marker with the worker's id matches the sleep's environment, not the shell's command line.
  auto broadcast = env.start({"ssh", "s", "--worker=all", "--command",
                              "export CHAOS=" + mark + ":$TPU_WORKER_ID:; sleep 120"},
                             "interrupted-broadcast");
  REQUIRE(wait_until(
      [&] {
        for (int w = 0; w < 4; ++w) {
          if (processes_with_marker(mark + ":" + std::to_string(w) + ":").empty()) {
            return false;
          }
        }
        return true;
      },
      20s));
  const auto t0 = Clock::now();
  ::kill(broadcast->pid(), SIGINT);
  auto status = broadcast->wait(20s);
  REQUIRE(status.has_value());
  CHECK(*status == 130);
  CHECK(seconds_since(t0) < 10);
  CHECK(processes_with_marker(mark + ":").empty());

  // Ctrl-C while the preflight runs (delivered at that step by the failpoint).
  auto interrupted = env.run_with({"qr", "create", "c", "--accelerator-type", "v5litepod-16"},
                                  {{"TPUCTL_FAILPOINT", "provision.preflight:sigint"}});
  CHECK(interrupted.exit_code == 130);
  CHECK(interrupted.err.find("tpuctl: error: interrupted while waiting for 'c' (now "
                             "PROVISIONING;") != std::string::npos);
  // stdout shows the request in the state stderr names, from the same read (not ACCEPTED, as
  // it was created).
  CHECK(interrupted.out.find("state:             PROVISIONING") != std::string::npos);
  StoreView left = read_store(env, "c");
  REQUIRE(left.qr.has_value());
  CHECK(left.qr->state == tpuctl::provision::QrState::provisioning);
  CHECK(left.claimed == slice_hosts(*left.qr));
  CHECK(left.claimed.size() == 4);
  CHECK(!tpuctl::provision::lease_of(*left.qr).has_value()); // released, not left to expire
  CHECK(processes_with_marker(left.qr->uid).empty());        // the preflight was killed
  // The next command carries it on.
  auto waited = env.run({"qr", "wait", "c", "--for=state=ACTIVE", "--timeout", "90s"});
  CHECK_MESSAGE(waited.exit_code == 0, waited.err);
  check_no_orphan_claims(env);
  CHECK(env.claims().size() == 8);
}

TEST_CASE("chaos: the disk under the store fills while a create provisions: the exit status and "
          "stdout say what exists, nothing says 'disk I/O error', and once space is back the "
          "request is carried on or deleted with no claim left behind") {
  QrEnv env(4, "127.0.183.2", "", 24u << 20);
  REQUIRE_MESSAGE(env.disk, "a disk that fills during provisioning needs a small tmpfs under the "
                            "store (root, as CI has): "
                                << env.disk_why);
  // The create stops itself once the first worker has its agent (the failpoint), the disk is
  // filled to the last byte, and it goes on: its remaining steps and their records meet ENOSPC.
  auto create = env.start({"qr", "create", "filled", "--accelerator-type", "v5litepod-16"},
                          "filled", {{"TPUCTL_FAILPOINT", "provision.push:stop"}});
  REQUIRE(wait_until([&] { return process_state(create->pid()) == 'T'; }, 120s));
  env.disk->fill(0);
  REQUIRE(env.disk->available() == 0);
  ::kill(create->pid(), SIGCONT);
  auto status = create->wait(300s);
  REQUIRE(status.has_value());
  CAPTURE(create->err());
  CHECK(create->err().find("disk I/O error") == std::string::npos);
  env.disk->unfill();

  const json now = env.describe("filled");
  MESSAGE("a create through a full disk exited " << *status << "; the request is "
                                                 << now["state"].get<std::string>());
  switch (*status) {
  case 0:
    CHECK(now["state"] == "ACTIVE");
    break;
  case 6: // recorded, then following it failed: it exists, in the state stdout shows
    CHECK(create->err().find("queued resource 'filled' was created and exists (last seen ") !=
          std::string::npos);
    CHECK(create->err().find("the disk is full") != std::string::npos);
    CHECK(create->out().find("filled") != std::string::npos);
    break;
  case 1: // the request itself failed (a worker's files are on that disk too): FAILED, shown
    CHECK(now["state"] == "FAILED");
    CHECK(create->out().find("FAILED") != std::string::npos);
    break;
  default:
    FAIL("unexpected exit status " << *status);
  }
  // Space is back: a request that did not fail is carried to ACTIVE; then it is deleted and no
  // host stays claimed.
  if (now["state"] != "FAILED") {
    auto waited = env.run({"qr", "wait", "filled", "--for=state=ACTIVE", "--timeout", "120s"});
    CHECK_MESSAGE(waited.exit_code == 0, waited.err);
  }
  check_no_orphan_claims(env);
  auto check = env.run({"state", "check"});
  CHECK_MESSAGE(check.exit_code == 0, (check.out + check.err));
  auto del = env.run({"qr", "delete", "filled", "--force"});
  CHECK_MESSAGE(del.exit_code == 0, del.err);
  CHECK(env.claims().empty());
}
