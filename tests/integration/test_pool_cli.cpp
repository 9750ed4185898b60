// tpuctl pool through the real binary, with real sshd servers on loopback (address block
// 127.0.60.x, owned by this file), a real SQLite store, and a scratch HOME so the user's own
// ~/.ssh and state are never touched.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "remote/local_sshd.hpp"
#include "tests/support/background.hpp"
#include "tests/support/helpers.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::run_tpuctl;
using tpuctl::test::TempDir;

namespace {

struct Env {
  TempDir dir;
  std::map<std::string, std::string> vars;
  Env() {
    vars["HOME"] = dir.path().string();
    vars["XDG_STATE_HOME"] = (dir.path() / "state").string();
    vars["XDG_CONFIG_HOME"] = (dir.path() / "config").string();
  }
  tpuctl::util::ProcessResult run(std::vector<std::string> args) const {
    return run_tpuctl(args, vars);
  }
  std::string db() const { return (dir.path() / "state" / "tpuctl" / "state.db").string(); }
};

// sshd servers (listeners, not the children they fork per connection) under `root`.
int sshd_count(const std::string& root) {
  return static_cast<int>(tpuctl::remote::local_sshd_pids_under(root).size());
}

// Every sshd process, server or connection, whose command line names `root`.
int sshd_processes(const std::string& root) {
  auto r = tpuctl::util::run_process({"pgrep", "-f", "sshd -f " + root});
  return r ? static_cast<int>(std::count(r->out.begin(), r->out.end(), '\n')) : -1;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("pool local-up: 16 real sshd hosts, broadcast, failure statuses, drain, local-down") {
  Env env;
  auto up = env.run({"pool", "local-up", "--hosts", "16", "--generation", "v4", "--address-base",
                     "127.0.60.2", "--port", "2222", "--format", "json"});
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  auto pool = json::parse(up.out);
  CHECK(pool["shape"] == "4x4x4");
  CHECK(pool["host_grid"] == "2x2x4");
  CHECK(pool["hosts"] == 16);
  std::string root = (env.dir.path() / "state" / "tpuctl" / "local-pools" / "local").string();
  CHECK(sshd_count(root) == 16);

  struct stat st {};
  REQUIRE(::stat(env.db().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  SUBCASE("every host answers with its own address, once") {
    auto r = env.run(
        {"pool", "ssh", "--output", "jsonl", "--command", "echo $SSH_CONNECTION | cut -d' ' -f3"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::set<std::string> seen;
    for (const auto& line : tpuctl::util::split(r.out, '\n')) {
      if (line.empty()) {
        continue;
      }
      auto j = json::parse(line);
      CHECK(j["exit_code"] == 0);
      CHECK(j["stdout"] == j["host"].get<std::string>() + "\n");
      seen.insert(j["host"]);
    }
    CHECK(seen.size() == 16);
  }
  SUBCASE("a remote exit code, a timeout and a stopped sshd give the documented statuses") {
    auto three = env.run({"pool", "ssh", "--hosts", "127.0.60.[2-3]", "--", "sh", "-c", "exit 3"});
    CHECK(three.exit_code == 3);
    CHECK(three.err.find("2 of 2 hosts failed") != std::string::npos);

    // This process's own marker: a second copy of the suite on the machine shares the table.
    const std::string survived = "tpuctl-pool-marker-survived-" + std::to_string(::getpid());
    auto slow = env.run({"pool", "ssh", "--hosts", "127.0.60.4", "--timeout", "1s", "--command",
                         "sleep 60; echo " + survived});
    CHECK(slow.exit_code == 124);
    auto left = tpuctl::util::run_process({"pgrep", "-f", survived});
    CHECK(left->out.empty());

    auto pid_text = tpuctl::util::run_process({"cat", root + "/hosts/127.0.60.5/sshd.pid"});
    REQUIRE(pid_text);
    int pid = std::stoi(pid_text->out);
    ::kill(pid, SIGSTOP); // accepts TCP but never sends a banner
    auto stalled = env.run(
        {"pool", "ssh", "--hosts", "127.0.60.5", "--connect-timeout", "1s", "--command", "true"});
    ::kill(pid, SIGCONT);
    CHECK(stalled.exit_code == 255);

    auto check = env.run({"pool", "check", "--format", "json"});
    CHECK(check.exit_code == 0);
    auto rows = json::parse(check.out);
    REQUIRE(rows.size() == 16);
    CHECK(rows[0]["status"] == "ok");
    CHECK(rows[0]["cores"].get<int>() >= 1);
    CHECK(rows[0]["memory_total_mib"].get<long>() > 0);
    // The host's matrix units, as the agent finds them here (the hosts are this machine).
    auto probe = env.run({"agent", "probe", "--format", "json"});
    REQUIRE(probe.exit_code == 0);
    CHECK(rows[0]["units"] == json::parse(probe.out)["units"]);
    CHECK(rows[0]["units"].is_array());
    // The table shows them too, as a comma list in the last column.
    auto table = env.run({"pool", "check", "--hosts", rows[0]["host"].get<std::string>()});
    CHECK(table.exit_code == 0);
    std::string units;
    for (const auto& u : rows[0]["units"]) {
      units += (units.empty() ? "" : ",") + u.get<std::string>();
    }
    CHECK(table.out.find("UNITS") != std::string::npos);
    CHECK(table.out.find(units.empty() ? "\n" : units + "\n") != std::string::npos);
  }
  SUBCASE("a drained host shows in describe and local-up again is safe") {
    CHECK(env.run({"pool", "drain", "127.0.60.3", "--reason", "disk"}).exit_code == 0);
    auto d = env.run({"pool", "describe"});
    CHECK(d.out.find("D drained") != std::string::npos);
    CHECK(d.out.find("15 free, 0 claimed, 1 drained") != std::string::npos);
    auto pid_text = tpuctl::util::run_process({"cat", root + "/hosts/127.0.60.9/sshd.pid"});
    ::kill(std::stoi(pid_text->out), SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto again = env.run({"pool", "local-up", "--hosts", "16", "--generation", "v4",
                          "--address-base", "127.0.60.2"});
    CHECK(again.exit_code == 0);
    CHECK(again.err.find("already up, 1 sshd started") != std::string::npos);
    CHECK(sshd_count(root) == 16);
  }

  // A second pool (of your own hosts) beside it: `pool local-down`, as the README writes it,
  // still finds the local one, the only pool local-up made, and leaves the other.
  REQUIRE(env.run({"pool", "create", "lab", "--generation", "v4", "--shape", "2x2x2"}).exit_code ==
          0);
  auto down = env.run({"pool", "local-down", "--format", "json"});
  CHECK_MESSAGE(down.exit_code == 0, down.err);
  CHECK(json::parse(down.out)["sshd_stopped"] == 16);
  CHECK(sshd_count(root) == 0);
  auto left = json::parse(env.run({"pool", "list", "--format", "json"}).out);
  REQUIRE(left.size() == 1);
  CHECK(left[0]["name"] == "lab");
}

TEST_CASE("local-down counts servers, not the connections they are setting up, and stops both") {
  Env env;
  auto up = env.run({"pool", "local-up", "--hosts", "2", "--address-base", "127.0.60.120", "--port",
                     "2222", "--format", "json"});
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  std::string root = (env.dir.path() / "state" / "tpuctl" / "local-pools" / "local").string();
  REQUIRE(sshd_count(root) == 2);
  // A server forks a child per connection, which for a moment carries the server's command line:
  // before its exec, and after it with "-R" (OpenSSH 9.2) until it retitles itself. That moment
  // is too short to catch with a real connection, so a stand-in holds it: a script named sshd,
  // given a host's arguments. One is a re-executed child ("-R"); one is a server whose forked
  // child has not yet exec'd (same arguments, its parent a server).
  const auto bin = env.dir.path() / "bin";
  std::filesystem::create_directories(bin);
  const auto script = bin / "sshd";
  {
    std::ofstream f(script);
    f << "#!/bin/bash\n"
         "if [ \"$TPUCTL_TEST_FORK\" = 1 ]; then TPUCTL_TEST_FORK=0 \"$0\" \"$@\" & fi\n"
         "while :; do sleep 0.1; done\n";
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  const std::string config = root + "/hosts/127.0.60.120/sshd_config";
  tpuctl::test::Background rexec({"/bin/bash", script.string(), "-f", config, "-R"}, {}, {},
                                 env.dir.path(), "rexec");
  tpuctl::test::Background server({"/bin/bash", script.string(), "-f", config},
                                  {{"TPUCTL_TEST_FORK", "1"}}, {}, env.dir.path(), "server");
  for (int i = 0; i < 500 && sshd_processes(root) < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(sshd_processes(root) == 5);
  CHECK(sshd_count(root) == 3); // the two real servers and the stand-in server

  auto down = env.run({"pool", "local-down", "--format", "json"});
  CHECK(down.exit_code == 0);
  CHECK(json::parse(down.out)["sshd_stopped"] == 3);
  CHECK(sshd_processes(root) == 0);
}

TEST_CASE("pool ssh refuses an unknown host key under 'yes' and records it under 'accept-new'") {
  Env env;
  auto up = env.run(
      {"--pool", "keys", "pool", "local-up", "--hosts", "2", "--address-base", "127.0.60.100"});
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  // A second pool reaching the same servers without the local pool's known_hosts file.
  std::string key = (env.dir.path() / "state/tpuctl/local-pools/keys/client_ed25519").string();
  CHECK(env.run({"pool", "create", "plain", "--generation", "v5e", "--shape", "4x2"}).exit_code ==
        0);
  CHECK(
      env.run({"--pool", "plain", "pool", "add-hosts", "127.0.60.100:2222", "--identity-file", key})
          .exit_code == 0);
  // libssh (like OpenSSH) finds ~ in the password database, not $HOME: point the default
  // known_hosts at a scratch file through an ssh_config so the real ~/.ssh is never written.
  std::string known = (env.dir.path() / "known_hosts").string();
  std::string config = (env.dir.path() / "ssh_config").string();
  std::ofstream(config) << "Host *\n  UserKnownHostsFile " << known << "\n";
  auto strict =
      env.run({"--pool", "plain", "pool", "ssh", "--ssh-config", config, "--command", "true"});
  CHECK(strict.exit_code == 5);
  CHECK(strict.err.find("127.0.60.100") != std::string::npos);
  auto accept = env.run({"--pool", "plain", "pool", "ssh", "--ssh-config", config,
                         "--strict-host-key-checking", "accept-new", "--command", "true"});
  CHECK(accept.exit_code == 0);
  auto again =
      env.run({"--pool", "plain", "pool", "ssh", "--ssh-config", config, "--command", "true"});
  CHECK(again.exit_code == 0); // now known
  std::ifstream in(known);
  std::string line;
  std::getline(in, line);
  CHECK(line.rfind("[127.0.60.100]:2222 ssh-ed25519 ", 0) == 0);
  CHECK(env.run({"--pool", "keys", "pool", "local-down"}).exit_code == 0);
}

TEST_CASE("50 concurrent pool add-hosts leave a consistent store") {
  Env env;
  REQUIRE(env.run({"pool", "create", "big", "--generation", "v5e"}).exit_code == 0);
  std::vector<std::thread> threads;
  std::vector<int> codes(50, -1);
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&, i] {
      codes[static_cast<size_t>(i)] =
          env.run({"pool", "add-hosts", "node" + std::to_string(i)}).exit_code;
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  CHECK(std::count(codes.begin(), codes.end(), 0) == 50);
  auto hosts = json::parse(env.run({"pool", "hosts", "--format", "json"}).out);
  REQUIRE(hosts.size() == 50);
  std::set<std::string> names, coords;
  for (const auto& h : hosts) {
    names.insert(h["name"]);
    coords.insert(h["coords"]);
  }
  CHECK(names.size() == 50);
  CHECK(coords.size() == 50); // no two hosts share a grid position
  struct stat st {};
  REQUIRE(::stat(env.db().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("pool import: a malformed inventory changes nothing and names the line and field") {
  Env env;
  std::string good = (env.dir.path() / "good.json").string();
  std::ofstream(good) << "{\n  \"pool\": {\"name\": \"inv\", \"generation\": \"v5p\", \"shape\": "
                         "\"4x4x4\"},\n  \"hosts\": [\n    {\"host\": \"a1\", \"user\": \"ci\"},\n"
                         "    {\"host\": \"a2\", \"coords\": [1, 1, 3], \"labels\": {\"rack\": "
                         "\"r1\"}},\n    {\"host\": \"a3\", \"coords\": \"1,0,2\"}\n  ]\n}\n";
  auto ok = env.run({"pool", "import", good, "--format", "json"});
  REQUIRE_MESSAGE(ok.exit_code == 0, ok.err);
  auto added = json::parse(ok.out);
  CHECK(added.size() == 3);
  CHECK(added[1]["coords"] == "1,1,3");
  CHECK(added[2]["coords"] == "1,0,2"); // the form pool hosts prints is taken back
  // `pool hosts` shows it in the form it was given.
  auto shown = json::parse(env.run({"pool", "hosts", "--format", "json"}).out);
  REQUIRE(shown.size() == 3);
  for (const auto& h : shown) {
    if (h["name"] == "a3") {
      CHECK(h["coords"] == "1,0,2");
    }
  }

  std::string before = env.run({"pool", "hosts", "--format", "json"}).out;
  std::string bad = (env.dir.path() / "bad.json").string();
  std::ofstream(bad) << "{\n  \"hosts\": [\n    {\"host\": \"b1\"},\n    {\"host\": \"b2\",\n"
                        "     \"port\": 70000},\n    {\"host\": \"$(reboot)\"}\n  ]\n}\n";
  auto r = env.run({"pool", "import", bad});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("line 5, hosts[1].port: must be a whole number from 1 to 65535") !=
        std::string::npos);
  CHECK(r.err.find("line 6, hosts[2].host") != std::string::npos);
  std::string text_coords = (env.dir.path() / "coords.json").string();
  std::ofstream(text_coords) << "{\"hosts\": [{\"host\": \"c1\", \"coords\": \"0,x,1\"}, "
                                "{\"host\": \"c2\", \"coords\": \"1,2,3,4\"}]}\n";
  auto coords = env.run({"pool", "import", text_coords});
  CHECK(coords.exit_code == 2);
  CHECK(coords.err.find("hosts[0].coords: '0,x,1' must be [x, y], [x, y, z] or \"x,y,z\"") !=
        std::string::npos);
  CHECK(coords.err.find("hosts[1].coords: '1,2,3,4'") != std::string::npos);
  CHECK(env.run({"pool", "hosts", "--format", "json"}).out == before);
  CHECK(r.err.find("nothing was imported") != std::string::npos);
  CHECK(env.run({"pool", "hosts", "--format", "json"}).out == before);

  auto syntax = env.run({"pool", "import", (env.dir.path() / "missing.json").string()});
  CHECK(syntax.exit_code == 2);
}

TEST_CASE("pool commands reject bad input with exit 2 or 4 and change nothing") {
  Env env;
  CHECK(env.run({"pool", "create", "p", "--generation", "v9"}).exit_code == 2);
  CHECK(env.run({"pool", "create", "p;rm", "--generation", "v5e"}).exit_code == 2);
  REQUIRE(env.run({"pool", "create", "p", "--generation", "v5e", "--shape", "4x2"}).exit_code == 0);
  auto hostile = env.run({"pool", "add-hosts", "ok1", "x;reboot", "$(id)", "node[3-1]"});
  CHECK(hostile.exit_code == 2);
  CHECK(hostile.err.find("'x;reboot'") != std::string::npos);
  CHECK(hostile.err.find("'$(id)'") != std::string::npos);
  CHECK(hostile.err.find("'node[3-1]'") != std::string::npos);
  CHECK(env.run({"pool", "add-hosts", "-oProxyCommand=id"}).exit_code == 2);
  CHECK(env.run({"pool", "hosts", "--format", "json"}).out == "[]\n");
  auto full = env.run({"pool", "add-hosts", "h[1-3]"});
  CHECK(full.exit_code == 2);
  CHECK(full.err.find("room for 2 hosts") != std::string::npos);
  CHECK(env.run({"pool", "describe", "nope"}).exit_code == 4);
  CHECK(env.run({"pool", "drain", "ghost", "--reason", "x"}).exit_code == 4);
}

TEST_SUITE_END();
