// provision_slice and stop_slice_processes through real sshd servers: a local pool started by
// the binary (`tpuctl pool local-up`, address block 127.0.70.x owned by this file, port 2222),
// read back through the store API, and a queued resource placed by hand on its 2x2 host block.
#include <arpa/inet.h>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "provision/pool/pools.hpp"
#include "provision/slice/provisioning.hpp"
#include "state/location.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "util/sha256.hpp"

using nlohmann::json;
using tpuctl::test::run_tpuctl;
using tpuctl::test::TempDir;
namespace provision = tpuctl::provision;

namespace {

// The request's uid tags its processes on every host: one of this process alone, since a second
// copy of the suite on this machine (a shared CI machine) shares the process table.
const std::string k_uid = [] {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", static_cast<unsigned>(::getpid()),
                static_cast<unsigned>(std::random_device{}()));
  return std::string(buf);
}();

// A local pool of `hosts` sshd servers in a scratch state; local-down (by the binary, which
// stops every sshd by its pid) when the object dies, also when a check failed.
struct LocalSlicePool {
  TempDir dir;
  std::map<std::string, std::string> vars;
  bool up = false;
  provision::PoolView view;

  LocalSlicePool(int hosts, const std::string& generation, const std::string& base) {
    vars["HOME"] = dir.path().string();
    vars["XDG_STATE_HOME"] = (dir.path() / "state").string();
    vars["XDG_CONFIG_HOME"] = (dir.path() / "config").string();
    auto r = run_tpuctl({"pool", "local-up", "--hosts", std::to_string(hosts), "--generation",
                         generation, "--address-base", base, "--port", "2222"},
                        vars);
    up = r.exit_code == 0;
    REQUIRE_MESSAGE(up, r.err);
    reload();
  }
  ~LocalSlicePool() {
    if (up) {
      run_tpuctl({"pool", "local-down", "--force"}, vars);
    }
  }
  std::string url() const {
    return "sqlite:" + (dir.path() / "state" / "tpuctl" / "state.db").string();
  }
  void reload() {
    auto store = tpuctl::state::open_store(url());
    REQUIRE(store);
    auto v = provision::load_pool(**store, "local");
    REQUIRE(v);
    view = *v;
  }
  std::string pid_file(const provision::HostEntry& h) const {
    return view.info.local["root"].get<std::string>() + "/hosts/" + h.address + "/sshd.pid";
  }
};

provision::QueuedResource one_node_qr(const provision::PoolView& view, const std::string& type) {
  provision::QueuedResource qr;
  qr.id = "qr-prov";
  qr.pool = view.info.name;
  qr.uid = k_uid;
  qr.accelerator_type = type;
  qr.node_ids = {"qr-prov"};
  qr.state = provision::QrState::provisioning;
  provision::QrNode node;
  node.id = "qr-prov";
  for (size_t i = 0; i < view.hosts.size(); ++i) { // hosts come by position: x fastest
    const auto& h = view.hosts[i];
    node.workers.push_back(provision::QrWorker{static_cast<int>(i), h.name, h.address, h.coords});
  }
  qr.nodes.push_back(node);
  return qr;
}

provision::ProvisionOptions options() {
  provision::ProvisionOptions o;
  o.binary = tpuctl::test::tpuctl_binary();
  o.ssh.process_config = false;
  o.ssh.use_agent = false;
  o.ssh.connect_timeout = std::chrono::milliseconds(5000);
  o.step_timeout = std::chrono::milliseconds(60000);
  o.preflight_timeout = std::chrono::milliseconds(10000);
  return o;
}

// A child `sleep 300` whose environment holds TPUCTL_QR_UID=uid.
pid_t spawn_sleep(const std::string& uid) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string var = "TPUCTL_QR_UID=" + uid;
    char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("300"), nullptr};
    char* const envp[] = {var.data(), const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
    ::execve("/bin/sleep", argv, envp);
    ::_exit(127);
  }
  return pid;
}

// True when the child exited within `ms` (it is reaped then).
bool exits_within(pid_t pid, int ms) {
  for (int i = 0; i < ms / 20; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("provision_slice: push, probe, startup script and preflight on a 2x2 v5e block") {
  LocalSlicePool pool(4, "v5e", "127.0.70.2");
  REQUIRE(pool.view.hosts.size() == 4);
  CHECK(pool.view.info.layout.host_grid[0] * pool.view.info.layout.host_grid[1] == 4);
  auto qr = one_node_qr(pool.view, "v5litepod-16");
  auto opts = options();
  std::vector<std::string> progress;
  opts.progress = [&progress](const std::string& line) { progress.push_back(line); };
  auto sha = tpuctl::util::sha256_file_hex(opts.binary);
  REQUIRE(sha);

  auto first = provision::provision_slice(qr, pool.view, opts);
  REQUIRE(first);
  INFO(provision::to_json(*first).dump(2));
  REQUIRE(first->ok);
  CHECK(first->agent_sha256 == *sha);
  REQUIRE(first->workers.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    const auto& w = first->workers[i];
    const auto& host = pool.view.hosts[i];
    CHECK(w["worker"] == static_cast<int>(i));
    CHECK(w["host"] == host.name);
    CHECK(w["unchanged"] == false);
    // The workdir of a local host is an absolute path on this machine.
    std::string path = w["agent_path"];
    CHECK(path == host.workdir + "/agent/" + *sha + "/tpuctl");
    auto remote_sha = tpuctl::util::sha256_file_hex(path);
    REQUIRE(remote_sha);
    CHECK(*remote_sha == *sha);
    CHECK((std::filesystem::status(path).permissions() & std::filesystem::perms::owner_exec) !=
          std::filesystem::perms::none);
    CHECK(w["facts"]["cores"].get<int>() >= 1);
    const auto& pf = w["preflight"];
    CHECK(pf["ok"] == true);
    // Its O(N) links on the 2x2 host grid (no wraparound): the coordinator (worker 0) and its
    // torus neighbours, checked from both ends; the diagonal pair 1-2 is not a link.
    static const std::vector<std::vector<int>> k_reached = {{1, 2}, {0, 3}, {0, 3}, {0, 1, 2}};
    static const std::vector<std::vector<int>> k_heard = {{1, 2, 3}, {0, 3}, {0, 3}, {1, 2}};
    CHECK(pf["reached"].get<std::vector<int>>() == k_reached[i]);
    CHECK(pf["heard_from"].get<std::vector<int>>() == k_heard[i]);
    CHECK(pf["bind_address"] == host.address + ":8476");
    CHECK(pf["kernel_check"]["ok"] == true);
    CHECK(pf["clock"]["ok"] == true);
  }
  CHECK(first->timings.total_ms >= first->timings.push_ms + first->timings.preflight_ms);
  CHECK(progress.size() >= 4);

  // Content-addressed: nothing is sent again.
  auto second = provision::provision_slice(qr, pool.view, opts);
  REQUIRE(second);
  CHECK(second->ok);
  for (const auto& w : second->workers) {
    CHECK(w["unchanged"] == true);
  }

  // The startup script runs under each worker's environment.
  TempDir out;
  qr.metadata["startup-script"] = "set -e\nhost=$(echo $SSH_CONNECTION | cut -d' ' -f3)\n"
                                  "echo \"$TPU_WORKER_ID $TPUCTL_QR_UID $(command -v tpuctl)\" > " +
                                  out.path().string() + "/$host\n";
  auto scripted = provision::provision_slice(qr, pool.view, opts);
  REQUIRE(scripted);
  CHECK(scripted->ok);
  for (size_t i = 0; i < 4; ++i) {
    const auto& host = pool.view.hosts[i];
    std::ifstream in(out.path() / host.address);
    std::string id, uid, agent;
    in >> id >> uid >> agent;
    CHECK(id == std::to_string(i));
    CHECK(uid == k_uid);
    CHECK(agent == host.workdir + "/agent/" + *sha + "/tpuctl"); // the pushed agent, first
  }

  // A failing startup script names its worker, the exit code and the last stderr line.
  qr.metadata["startup-script"] =
      "if [ \"$TPU_WORKER_ID\" = 2 ]; then echo first >&2; echo 'disk full' >&2; exit 7; fi\n";
  auto failed = provision::provision_slice(qr, pool.view, opts);
  REQUIRE(failed);
  CHECK(!failed->ok);
  REQUIRE(failed->failure);
  CHECK(failed->failure->code == "PROVISIONING_FAILED");
  CHECK(failed->failure->worker == 2);
  CHECK(failed->failure->node == "qr-prov");
  CHECK(failed->failure->host == pool.view.hosts[2].name);
  CHECK(failed->failure->message.find("worker qr-prov/2@" + pool.view.hosts[2].name) != std::string::npos);
  CHECK(failed->failure->message.find(pool.view.hosts[2].name) != std::string::npos);
  CHECK(failed->failure->message.find("exit code 7: disk full") != std::string::npos);
  CHECK(failed->workers[0]["preflight"].is_null()); // stopped before the preflight
  qr.metadata.erase("startup-script");

  // Worker 0's coordinator port taken by something that is not a preflight.
  int blocker = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(18476);
  ::inet_pton(AF_INET, pool.view.hosts[0].address.c_str(), &addr.sin_addr);
  REQUIRE(::bind(blocker, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(blocker, 64) == 0);
  auto blocked_opts = opts;
  blocked_opts.coordinator_port = 18476;
  blocked_opts.preflight_timeout = std::chrono::milliseconds(2000);
  auto blocked = provision::provision_slice(qr, pool.view, blocked_opts);
  ::close(blocker);
  REQUIRE(blocked);
  CHECK(!blocked->ok);
  REQUIRE(blocked->failure);
  CHECK(blocked->failure->code == "PREFLIGHT_FAILED");
  CHECK(blocked->failure->worker == 0);
  CHECK(blocked->failure->message.find("cannot listen on its own address") != std::string::npos);
  // Worker 1 names the link too when its own preflight ran to its timeout before the failure
  // stopped it: which comes first is the race's to choose, so only what it says is checked.
  const auto& w1 = blocked->workers[1]["preflight"]["unreachable"];
  if (w1.is_array() && !w1.empty()) {
    CHECK(w1.dump().find(pool.view.hosts[0].address + ":18476") != std::string::npos);
  }

  // stop_slice_processes: the slice's processes die, another slice's survive.
  const std::string other_uid = "f" + k_uid.substr(1);
  pid_t mine = spawn_sleep(k_uid);
  pid_t other = spawn_sleep(other_uid);
  REQUIRE(mine > 0);
  REQUIRE(other > 0);
  // Until both carry their tags (exec'd): a loaded machine may take a while.
  for (int i = 0; i < 500 && (tpuctl::test::processes_with_marker("TPUCTL_QR_UID=" + k_uid).empty() ||
                              tpuctl::test::processes_with_marker("TPUCTL_QR_UID=" + other_uid).empty());
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto stopped = provision::stop_slice_processes(qr, pool.view, opts.ssh);
  REQUIRE(stopped);
  // A local pool's 4 hosts are this machine: one scan (one host contacted) serves them all.
  REQUIRE(stopped->size() == 1);
  int terminated = 0;
  for (const auto& r : *stopped) {
    CHECK(r.succeeded());
    int t = 0, k = 0;
    CHECK(std::sscanf(r.out.c_str(), "terminated %d killed %d", &t, &k) == 2);
    terminated += t;
  }
  CHECK(terminated == 1);
  CHECK(exits_within(mine, 5000));
  CHECK(!exits_within(other, 200));
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
  auto bad_uid = qr;
  bad_uid.uid = "x;reboot";
  CHECK(!provision::stop_slice_processes(bad_uid, pool.view, opts.ssh));

  // A worker whose sshd is gone fails the push, naming that worker.
  std::ifstream pid_in(pool.pid_file(pool.view.hosts[3]));
  int pid = 0;
  pid_in >> pid;
  REQUIRE(pid > 0);
  ::kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto dead = provision::provision_slice(qr, pool.view, opts);
  REQUIRE(dead);
  CHECK(!dead->ok);
  REQUIRE(dead->failure);
  CHECK(dead->failure->code == "PROVISIONING_FAILED");
  CHECK(dead->failure->worker == 3);
  CHECK(dead->failure->host == pool.view.hosts[3].name);
  CHECK(dead->failure->message.find("agent push failed") != std::string::npos);
  CHECK(dead->failure->message.find("refused") != std::string::npos);
}

TEST_CASE("provision_slice refuses an unreadable binary and a request without nodes") {
  provision::PoolView view;
  provision::QueuedResource qr;
  qr.id = "qr-x";
  auto o = options();
  o.binary = "/nonexistent/tpuctl";
  CHECK(!provision::provision_slice(qr, view, o));
  auto no_nodes = provision::provision_slice(qr, view, options());
  REQUIRE(!no_nodes);
  CHECK(no_nodes.error().message.find("no nodes") != std::string::npos);
}

TEST_SUITE_END();
