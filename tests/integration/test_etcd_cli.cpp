// tpuctl on an etcd state store, through the real binary: two "machines" (separate HOME and XDG
// directories) sharing one pool of real sshd hosts, `state migrate` from a populated SQLite file,
// `state info`, token authentication, and an unreachable store. Addresses: 127.130.0.0/16 (the
// etcd tests' block; see tests/support/etcd_fixture.hpp); the sshd pool here uses port 2222.
#include <arpa/inet.h>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "state/etcd_wire.hpp"
#include "state/location.hpp"
#include "tests/support/etcd_fixture.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "tests/support/machine.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using namespace tpuctl;
using tpuctl::test::can_bind;
using tpuctl::test::EtcdCluster;
using tpuctl::test::Machine;
using tpuctl::test::run_tpuctl;
using tpuctl::test::TempDir;
using tpuctl::test::unique_prefix;

namespace {

EtcdCluster& cluster() {
  static EtcdCluster c(1);
  return c;
}

// "127.130.S.2" with .2 ... .(1+hosts) free on port 2222, S in 200..249.
std::string free_sshd_base(int hosts) {
  return tpuctl::test::free_address_base("127.130.", 200, 50, hosts);
}

// A tpuctl left running (e.g. a watch) whose stdout is read line by line; killed by pid.
class Streamer {
public:
  // With `with_stderr`, stderr's lines come through line() too.
  Streamer(const Machine& m, std::vector<std::string> args, bool with_stderr = false) {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    args.insert(args.begin(), test::tpuctl_binary());
    std::map<std::string, std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string kv(*e);
      auto eq = kv.find('=');
      env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
    env.erase("TPUCTL_STATE");
    env.erase("TPUCTL_POOL");
    for (const auto& [k, v] : m.vars) {
      env[k] = v;
    }
    std::vector<std::string> env_text;
    for (const auto& [k, v] : env) {
      env_text.push_back(k + "=" + v);
    }
    std::vector<char*> argv, envp;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    for (auto& e : env_text) {
      envp.push_back(e.data());
    }
    envp.push_back(nullptr);
    m_pid = ::fork();
    REQUIRE(m_pid >= 0);
    if (m_pid == 0) {
      ::dup2(fds[1], 1);
      if (with_stderr) {
        ::dup2(fds[1], 2);
      }
      int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      ::dup2(null, 0);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    m_fd = fds[0];
  }
  ~Streamer() {
    ::kill(m_pid, SIGTERM);
    int status = 0;
    ::waitpid(m_pid, &status, 0);
    ::close(m_fd);
  }
  // The next line of output, or nullopt when none came within `timeout`.
  std::optional<std::string> line(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto nl = m_buffer.find('\n');
      if (nl != std::string::npos) {
        std::string out = m_buffer.substr(0, nl);
        m_buffer.erase(0, nl + 1);
        return out;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{m_fd, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        return std::nullopt;
      }
      char buf[4096];
      ssize_t n = ::read(m_fd, buf, sizeof buf);
      if (n <= 0) {
        return std::nullopt;
      }
      m_buffer.append(buf, static_cast<size_t>(n));
    }
  }

private:
  pid_t m_pid = -1;
  int m_fd = -1;
  std::string m_buffer;
};

std::map<std::string, std::string> claims_of(const Machine& m) {
  std::map<std::string, std::string> out;
  for (const auto& h : m.run_json({"pool", "hosts"})) {
    if (!h["claimed_by"].get<std::string>().empty()) {
      out[h["name"]] = h["claimed_by"];
    }
  }
  return out;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("etcd cli: two machines sharing one pool through etcd never claim the same host") {
  std::string url = cluster().url(unique_prefix());
  Machine a, b(url); // a names the store with --state, b with TPUCTL_STATE
  auto up = a.run({"--state", url, "pool", "local-up", "--hosts", "8", "--generation", "v5e",
                   "--address-base", free_sshd_base(8), "--port", "2222"});
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  // b sees the pool a made, with no local file of its own.
  auto pools = b.run_json({"pool", "list"});
  REQUIRE(pools.size() == 1);
  CHECK(pools[0]["hosts"] == 8);

  std::vector<std::thread> threads;
  std::vector<int> codes(16, -1);
  std::vector<std::string> errors(16);
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      std::vector<std::string> args{
          "qr",      "create", "c-" + std::to_string(i), "--accelerator-type", "v5litepod-4",
          "--async", "--quiet"};
      if (i % 2 == 0) {
        args.insert(args.begin(), {"--state", url});
      }
      auto r = (i % 2 == 0 ? a : b).run(args);
      codes[static_cast<size_t>(i)] = r.exit_code;
      errors[static_cast<size_t>(i)] = r.err;
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (size_t i = 0; i < codes.size(); ++i) {
    CHECK_MESSAGE(codes[i] == 0, errors[i]);
  }
  auto claims = claims_of(b);
  CHECK(claims.size() == 8);
  std::set<std::string> owners;
  for (const auto& [host, owner] : claims) {
    owners.insert(owner);
  }
  CHECK(owners.size() == 8); // one host per request, no request twice
  auto listed = a.run_json({"--state", url, "qr", "list"});
  CHECK(listed.size() == 16);
  int placed = 0;
  for (const auto& q : listed) {
    placed += q["state"] != "WAITING_FOR_RESOURCES";
  }
  CHECK(placed == 8);
  // The background drivers (from both machines) bring the placed ones up.
  for (const auto& owner : owners) {
    auto w = b.run({"qr", "wait", owner, "--timeout", "90s", "--quiet"});
    CHECK_MESSAGE(w.exit_code == 0, w.err);
  }
  auto one = b.run_json({"qr", "describe", *owners.begin()});
  CHECK(one["state"] == "ACTIVE");
  auto down = a.run({"--state", url, "pool", "local-down", "--force"});
  CHECK_MESSAGE(down.exit_code == 0, down.err);
}

TEST_CASE("etcd cli: state migrate copies a populated SQLite store and refuses a non-empty "
          "target") {
  Machine m;
  std::string db = "sqlite:" + m.sqlite_file().string();
  {
    state::OpenOptions o;
    o.create = state::Creation::at_open;
    auto s = state::open_store(db, o);
    REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    auto& st = **s;
    using namespace tpuctl::state;
    REQUIRE(st.create(pool_key("p"), {{"generation", "v5e"}, {"shape", "4x4"}}));
    REQUIRE(st.create(pool_key("q"), {{"generation", "v4"}}));
    for (int i = 1; i <= 4; ++i) {
      REQUIRE(st.create(host_key("p", "h" + std::to_string(i)), {{"address", "10.0.0.1"}}));
    }
    REQUIRE(st.create(host_key("q", "x1"), {{"address", "10.1.0.1"}}));
    REQUIRE(st.commit({CreateOp{queued_resource_key("p", "qr-a"), {{"state", "ACTIVE"}}},
                       ClaimOp{"p", {"h1", "h2"}, "qr-a", std::chrono::seconds(0)},
                       EventOp{Event{0,
                                     111,
                                     "p",
                                     Kind::queued_resource,
                                     "qr-a",
                                     "STATE_CHANGED",
                                     "PROVISIONING",
                                     "ACTIVE",
                                     Initiator::service,
                                     {{"reason", "ready"}},
                                     ""}}}));
    REQUIRE(st.claim_hosts("p", {"h4"}, "drain:disk"));
    REQUIRE(st.commit({ClaimOp{"p", {"h3"}, "qr-b", std::chrono::seconds(600)}}));
    REQUIRE(st.create(record_key(Kind::cluster, "p", "c1"), {{"nodes", 2}}));
    REQUIRE(st.create(record_key(Kind::workload, "p", "w1"), {{"cluster", "c1"}}));
    REQUIRE(st.commit({EventOp{Event{0, 222, "q", Kind::pool, "q", "HOSTS_ADDED", "", "",
                                     Initiator::user, Json::object(), ""}}}));
  }
  std::string url = cluster().url(unique_prefix());
  auto r = m.run({"state", "migrate", "--from", db, "--to", url, "--format", "json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto report = json::parse(r.out);
  CHECK(report["pools"] == 2);
  CHECK(report["hosts"] == 5);
  CHECK(report["queued_resources"] == 1);
  CHECK(report["clusters"] == 1);
  CHECK(report["workloads"] == 1);
  CHECK(report["claims"] == 4);
  CHECK(report["events"] == 2);

  // Everything is there, as read through etcd.
  auto from = state::open_store(db);
  auto to = state::open_store(url);
  REQUIRE(from);
  REQUIRE(to);
  using state::Kind;
  for (Kind k : state::all_kinds()) {
    auto x = (*from)->list(k, "");
    auto y = (*to)->list(k, "");
    REQUIRE(x->records.size() == y->records.size());
    for (size_t i = 0; i < x->records.size(); ++i) {
      CHECK(x->records[i].key == y->records[i].key);
      CHECK(x->records[i].doc == y->records[i].doc);
    }
  }
  auto cx = (*from)->claims("");
  auto cy = (*to)->claims("");
  REQUIRE(cx->size() == cy->size());
  for (size_t i = 0; i < cx->size(); ++i) {
    CHECK((*cy)[i].host == (*cx)[i].host);
    CHECK((*cy)[i].owner == (*cx)[i].owner);
    CHECK((*cy)[i].claimed_at_ms == (*cx)[i].claimed_at_ms);
    CHECK(((*cy)[i].expires_at_ms == 0) == ((*cx)[i].expires_at_ms == 0));
  }
  auto ey = (*to)->events({});
  REQUIRE(ey->size() == 2);
  CHECK((*ey)[0].time_ms == 111);
  CHECK((*ey)[0].to_state == "ACTIVE");
  CHECK((*ey)[0].initiator == state::Initiator::service);
  CHECK((*ey)[0].detail["reason"] == "ready");
  CHECK((*ey)[1].pool == "q");
  CHECK((*ey)[1].revision > (*ey)[0].revision);

  auto info = m.run_json({"--state", url, "state", "info"});
  CHECK(info["pools"] == 2);

  // Again into the same (now full) target: refused, nothing added.
  auto again = m.run({"state", "migrate", "--from", db, "--to", url});
  CHECK(again.exit_code == 1);
  CHECK(again.err.find("is not empty (it holds pools 'p', 'q')") != std::string::npos);
  CHECK((*to)->list(Kind::host, "")->records.size() == 5);
  // A source that does not exist is not created.
  auto missing = m.run({"state", "migrate", "--from", "sqlite:/nonexistent/s.db", "--to",
                        cluster().url(unique_prefix())});
  CHECK(missing.exit_code == 4);
  CHECK(!std::filesystem::exists("/nonexistent/s.db"));
}

TEST_CASE("etcd cli: state info, and an unreachable store is exit 1 naming every endpoint") {
  Machine m;
  std::string url = cluster().url(unique_prefix());
  // Nothing under the prefix yet: no store, and reading it writes no key there.
  auto none = m.run({"--state", url, "state", "info"});
  CHECK(none.exit_code == 4);
  CHECK(none.err.find("etcd holds no tpuctl state under prefix") != std::string::npos);
  CHECK(m.run({"--state", url, "state", "info"}).exit_code == 4);
  REQUIRE(m.run({"--state", url, "pool", "create", "p", "--generation", "v5p"}).exit_code == 0);
  auto info = m.run_json({"--state", url, "state", "info"});
  CHECK(info["backend"] == "etcd");
  CHECK(info["location"] == url);
  CHECK(info["revision"].get<int64_t>() > 0);
  CHECK(info["pools"] == 1);
  CHECK(info["writable"] == true);

  auto r = m.run({"--state", "etcd://127.130.255.254:23790,127.130.255.253:23790", "pool", "list"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("cannot reach the etcd state store") != std::string::npos);
  CHECK(r.err.find("http://127.130.255.254:23790 (connection refused)") != std::string::npos);
  CHECK(r.err.find("http://127.130.255.253:23790 (connection refused)") != std::string::npos);
  CHECK(!std::filesystem::exists(m.sqlite_file())); // never a fallback to SQLite
}

TEST_CASE("etcd cli: token authentication with a password file; bad or missing credentials are "
          "exit 5 and the password is never logged") {
  EtcdCluster secured(1);
  secured.enable_auth("/team/", {{"ci", "s3cret-pw"}});

  Machine m;
  std::string url = secured.url("/team/");
  auto pw = m.dir.path() / "etcd-password";
  std::ofstream(pw) << "s3cret-pw\n";
  auto good = m.run({"--state", url, "--etcd-user", "ci", "--etcd-password-file", pw.string(),
                     "--verbosity", "debug", "pool", "create", "p", "--generation", "v5e"});
  CHECK_MESSAGE(good.exit_code == 0, good.err);
  CHECK(good.err.find("s3cret-pw") == std::string::npos);
  CHECK(good.err.find("/v3/kv/txn") != std::string::npos); // debug logging was on

  auto env = m.vars;
  env["TPUCTL_ETCD_USER"] = "ci";
  env["TPUCTL_ETCD_PASSWORD"] = "s3cret-pw";
  auto listed = run_tpuctl({"--state", url, "pool", "list", "--format", "json"}, env);
  CHECK(listed.exit_code == 0);
  CHECK(json::parse(listed.out).size() == 1);

  env["TPUCTL_ETCD_PASSWORD"] = "wrong";
  auto bad = run_tpuctl({"--state", url, "pool", "list"}, env);
  CHECK(bad.exit_code == 5);
  CHECK(bad.err.find("refused the credentials") != std::string::npos);
  CHECK(bad.err.find("wrong") == std::string::npos);

  auto none = m.run({"--state", url, "pool", "list"});
  CHECK(none.exit_code == 5);
  CHECK(none.err.find("--etcd-user") != std::string::npos);

  auto outside = run_tpuctl({"--state", secured.url("/other/"), "pool", "list"},
                            {{"HOME", m.dir.path().string()},
                             {"TPUCTL_ETCD_USER", "ci"},
                             {"TPUCTL_ETCD_PASSWORD", "s3cret-pw"}});
  CHECK(outside.exit_code == 5);
  CHECK(outside.err.find("denied permission") != std::string::npos);
}

TEST_CASE("qr list --watch --format jsonl prints each state change once, as it happens, with "
          "initiator and error, on etcd and on SQLite") {
  Machine watcher, creator;
  std::string url;
  SUBCASE("etcd: the creator is another machine") {
    url = cluster().url(unique_prefix());
  }
  SUBCASE("sqlite: the same file, polled") {
    url = "sqlite:" + (watcher.dir.path() / "shared.db").string();
  }
  // Hosts where nothing listens: provisioning fails fast, naming the worker.
  REQUIRE(
      creator.run({"--state", url, "pool", "create", "p", "--generation", "v5e", "--shape", "4x4"})
          .exit_code == 0);
  REQUIRE(creator.run({"--state", url, "pool", "add-hosts", "127.130.255.[2-5]", "--port", "2222"})
              .exit_code == 0);
  Streamer watch(watcher,
                 {"--state", url, "--verbosity", "info", "qr", "list", "--watch", "--format",
                  "jsonl"},
                 true);
  // The create comes once the watch has read where it starts (its info line), not after a
  // pause that a loaded machine may outlast.
  bool watching = false;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       !watching && std::chrono::steady_clock::now() < until;) {
    auto line = watch.line(std::chrono::seconds(1));
    watching = line && line->find("watching the queued resources of pool 'p'") != std::string::npos;
  }
  REQUIRE(watching);
  auto created = creator.run({"--state", url, "qr", "create", "q1", "--accelerator-type",
                              "v5litepod-4", "--async", "--quiet"});
  CHECK_MESSAGE(created.exit_code == 0, created.err);
  // Lines until the request failed (its background driver cannot reach the host).
  std::vector<json> lines;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         (lines.empty() || lines.back()["to"] != "FAILED")) {
    if (auto line = watch.line(std::chrono::milliseconds(500))) {
      if (!tpuctl::util::starts_with(*line, "tpuctl: ")) { // stderr's (logs), not events
        lines.push_back(json::parse(*line));
      }
    }
  }
  REQUIRE(lines.size() >= 4);
  std::vector<std::string> states;
  for (const auto& l : lines) {
    CHECK(l["queued_resource"] == "q1");
    states.push_back(l["to"]);
  }
  CHECK(states ==
        std::vector<std::string>{"ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "FAILED"});
  CHECK(lines[0]["initiator"] == "USER");
  CHECK(lines[2]["initiator"] == "SERVICE");
  CHECK(lines[3]["error"]["message"].get<std::string>().find("127.130.255.2") != std::string::npos);
  CHECK(lines[3]["revision"].get<int64_t>() > lines[0]["revision"].get<int64_t>());
}

TEST_CASE("etcd cli: an etcd+https store with client certificates; without the CA or the client "
          "certificate it is exit 1 naming the endpoint") {
  EtcdCluster secure(1, true);
  Machine m;
  std::string url = secure.url("/tls/");
  std::vector<std::string> tls{"--etcd-cacert",      secure.ca_file(), "--etcd-cert",
                               secure.client_cert(), "--etcd-key",     secure.client_key()};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), tls.begin(), tls.end());
    args.insert(args.begin(), {"--state", url});
    return m.run(args);
  };
  auto made = with({"pool", "create", "p", "--generation", "v5e"});
  CHECK_MESSAGE(made.exit_code == 0, made.err);
  auto listed = with({"pool", "list", "--format", "json"});
  REQUIRE(listed.exit_code == 0);
  CHECK(json::parse(listed.out).size() == 1);

  std::string endpoint = secure.endpoints()[0];
  auto no_ca = m.run({"--state", url, "--etcd-cert", secure.client_cert(), "--etcd-key",
                      secure.client_key(), "pool", "list"});
  CHECK(no_ca.exit_code == 1);
  CHECK(no_ca.err.find(endpoint) != std::string::npos);
  CHECK(no_ca.err.find("--etcd-cacert") != std::string::npos);

  auto no_cert = m.run({"--state", url, "--etcd-cacert", secure.ca_file(), "pool", "list"});
  CHECK(no_cert.exit_code == 1);
  CHECK(no_cert.err.find(endpoint) != std::string::npos);
  CHECK(no_cert.err.find("--etcd-cert") != std::string::npos);

  auto plain = m.run({"--state", "etcd://" + endpoint.substr(8) + "/tls/", "--etcd-cacert",
                      secure.ca_file(), "pool", "list"});
  CHECK(plain.exit_code == 2); // TLS files with a plain etcd:// URL: a usage error
}
