// The SSH settings a request is made with follow it into every process that carries it on,
// through the real binary, with real sshd on the address block 127.0.253.x (owned by this
// file). A pool whose host records name no port, user or key reaches its hosts only through an
// ssh_config (Port, User, IdentityFile, UserKnownHostsFile), only under accept-new (its
// known_hosts starts empty), and only with --identity-passphrase-file (the key is encrypted): a
// request made with those settings is provisioned by its detached driver; another, made the same
// way and waiting for hosts, is provisioned by the driver that a delete given no SSH flags at all
// starts; a workload's monitor, killed and started again by a `workload list` given no flags,
// watches it to its end with the workload's settings. Without the records, each of those processes
// would dial port 22 and fail.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "tests/support/qr_env.hpp"
#include "tests/support/ssh_keys.hpp"
#include "util/process.hpp"

using tpuctl::test::contains;
using tpuctl::test::QrEnv;
using tpuctl::test::wait_until;
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("integration");

namespace {

// The state of queued resource `id` of pool `plain`, "" once it is gone.
std::string qr_state(const QrEnv& env, const std::string& id) {
  auto r = env.run({"--pool", "plain", "qr", "describe", id, "--format", "json"});
  if (r.exit_code != 0) {
    return "";
  }
  return json::parse(r.out).value("state", "");
}

std::string workload_state(const QrEnv& env, const std::string& name) {
  auto r = env.run({"--pool", "plain", "workload", "describe", name, "--format", "json"});
  if (r.exit_code != 0) {
    return "";
  }
  return json::parse(r.out).value("state", "");
}

size_t lines_of(const fs::path& file) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    n += line.empty() ? 0 : 1;
  }
  return n;
}

} // namespace

TEST_CASE("ssh settings follow: the detached driver of --async, the driver a flagless delete "
          "starts and a restarted monitor all use the --ssh-config, host-key policy and "
          "passphrase file their request was made with; ssh_config's Port, User and IdentityFile "
          "fill a host record "
          "that names none") {
  QrEnv env(1, "127.0.253.2");
  const auto hosts = env.run_json({"pool", "hosts"});
  REQUIRE(hosts.size() == 1);
  const std::string user = hosts[0].value("user", "");
  const fs::path key = env.pool_dir() / "client_ed25519";
  REQUIRE(fs::exists(key));

  // A second pool on the same servers whose records say only the address.
  REQUIRE(env.run({"pool", "create", "plain", "--generation", "v5e", "--shape", "2x2"}).exit_code ==
          0);
  auto added = env.run({"--pool", "plain", "pool", "add-hosts", "127.0.253.2"});
  REQUIRE_MESSAGE(added.exit_code == 0, added.err);
  for (const auto& h : env.run_json({"--pool", "plain", "pool", "hosts"})) {
    CHECK(h["port"].is_null()); // unset: the ssh_config's, else 22
    CHECK(h.value("identity_file", "x").empty());
  }
  // The config's key is a passphrase-protected copy of the pool's: a process that dropped the
  // request's --identity-passphrase-file could not load it (batch mode fails at once).
  const fs::path locked = env.dir.path() / "locked_ed25519";
  fs::copy_file(key, locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_write);
  tpuctl::test::ssh_keygen({"-p", "-P", "", "-N", "settings-follow-pass", "-f", locked.string()});
  const fs::path pass = env.dir.path() / "passphrase";
  std::ofstream(pass) << "settings-follow-pass\n";
  fs::permissions(pass, fs::perms::owner_read | fs::perms::owner_write);
  const fs::path known = env.dir.path() / "plain_known_hosts";
  const fs::path config = env.dir.path() / "plain_ssh_config";
  std::ofstream(config) << "Host 127.0.253.*\n  Port 2222\n  User " << user << "\n  IdentityFile "
                        << locked.string() << "\n  UserKnownHostsFile " << known.string() << "\n";
  const std::vector<std::string> settings{"--ssh-config",
                                          config.string(),
                                          "--strict-host-key-checking",
                                          "accept-new",
                                          "--identity-passphrase-file",
                                          pass.string()};

  // The config is what reaches the hosts, and the default policy refuses them unknown.
  auto strict = env.run({"--pool", "plain", "pool", "ssh", "--ssh-config", config.string(),
                         "--identity-passphrase-file", pass.string(), "--command", "true"});
  CHECK(strict.exit_code == 5);
  CHECK_MESSAGE(contains(strict.err, "127.0.253."), strict.err);

  // --async: the detached driver provisions it with the request's config and policy.
  std::vector<std::string> create_a{
      "--pool", "plain", "qr", "create", "a", "--accelerator-type", "v5litepod-4", "--async"};
  create_a.insert(create_a.end(), settings.begin(), settings.end());
  auto a = env.run(create_a);
  REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  CHECK(wait_until([&] { return qr_state(env, "a") == "ACTIVE"; }, std::chrono::minutes(3)));
  CHECK(lines_of(known) == 1); // recorded under accept-new, in the config's known_hosts

  // Waiting for the host; a delete with no SSH flags frees it, and the driver it starts
  // provisions b with b's own settings (and stops a's processes with a's).
  std::vector<std::string> create_b{
      "--pool", "plain", "qr", "create", "b", "--accelerator-type", "v5litepod-4", "--async"};
  create_b.insert(create_b.end(), settings.begin(), settings.end());
  auto b = env.run(create_b);
  REQUIRE_MESSAGE(b.exit_code == 0, b.err);
  CHECK(qr_state(env, "b") == "WAITING_FOR_RESOURCES");
  auto deleted = env.run({"--pool", "plain", "qr", "delete", "a", "--force", "--async"});
  CHECK_MESSAGE(deleted.exit_code == 0, deleted.err);
  CHECK(wait_until([&] { return qr_state(env, "b") == "ACTIVE"; }, std::chrono::minutes(3)));
  CHECK(lines_of(known) == 1);
  auto gone = env.run({"--pool", "plain", "qr", "delete", "b", "--force"});
  CHECK_MESSAGE(gone.exit_code == 0, gone.err);

  // A workload's monitor, killed and started again by a command that gives no SSH flags.
  std::vector<std::string> cluster{"--pool",    "plain", "cluster",    "create",
                                   "--cluster", "c",     "--tpu-type", "v5litepod-4"};
  cluster.insert(cluster.end(), settings.begin(), settings.end());
  auto made = env.run(cluster);
  REQUIRE_MESSAGE(made.exit_code == 0, made.err);
  const fs::path go = env.dir.path() / "go";
  std::vector<std::string> workload{
      "--pool",     "plain",
      "workload",   "create",
      "--cluster",  "c",
      "--workload", "w",
      "--command",  "while [ ! -e " + go.string() + " ]; do sleep 0.2; done; echo finished"};
  workload.insert(workload.end(), settings.begin(), settings.end());
  auto started = env.run(workload);
  REQUIRE_MESSAGE(started.exit_code == 0, started.err);
  auto monitors = [&] {
    std::vector<int> found;
    for (int pid : tpuctl::test::processes_with_marker(env.dir.path().string())) {
      const std::string cmd =
          tpuctl::test::read_file(fs::path("/proc") / std::to_string(pid) / "cmdline");
      if (contains(cmd, std::string("workload") + '\0' + "monitor")) {
        found.push_back(pid);
      }
    }
    return found;
  };
  REQUIRE(wait_until([&] { return !monitors().empty(); }, std::chrono::seconds(60)));
  for (int pid : monitors()) {
    ::kill(pid, SIGKILL);
  }
  REQUIRE(wait_until([&] { return monitors().empty(); }, std::chrono::seconds(30)));
  std::ofstream(go) << "go\n"; // the workers may end now; only a monitor can see it
  CHECK(env.run({"--pool", "plain", "workload", "list"}).exit_code == 0); // no SSH flags
  CHECK(
      wait_until([&] { return workload_state(env, "w") == "SUCCEEDED"; }, std::chrono::minutes(3)));
  CHECK(env.run({"--pool", "plain", "cluster", "delete", "--cluster", "c", "--force"}).exit_code ==
        0);
}
