// remote::create_local_sshd_pool and friends: real sshd processes started on their own loopback
// addresses, trusted through the generated known_hosts with no prompt, and stopped by pid.
#include <arpa/inet.h>
#include <csignal>
#include <fstream>
#include <netinet/in.h>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "remote/fanout.hpp"
#include "remote/local_sshd.hpp"
#include "tests/support/helpers.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
namespace fs = std::filesystem;

namespace {

// Block 204 (see tests/support/local_pool_fixture.hpp); the third octet comes from the pid.
std::string address(int host) {
  return "127.204." + std::to_string(1 + ::getpid() % 250) + "." + std::to_string(2 + host);
}

bool accepts_tcp(const std::string& addr, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

bool alive(int pid) {
  return pid > 0 && ::kill(pid, 0) == 0;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A listing of ~/.ssh (names, sizes, mtimes), or "absent".
std::string snapshot_home_ssh() {
  const char* home = std::getenv("HOME");
  fs::path dir = fs::path(home ? home : "/") / ".ssh";
  if (!fs::exists(dir)) {
    return "absent";
  }
  std::string out;
  for (const auto& e : fs::directory_iterator(dir)) {
    struct stat st {};
    ::stat(e.path().c_str(), &st);
    out += e.path().string() + " " + std::to_string(st.st_size) + " " +
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "\n";
  }
  return out;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("remote local sshd pool: start on own addresses, strict host keys work, stop by pid") {
  const std::string home_ssh_before = snapshot_home_ssh();
  test::TempDir tmp;
  remote::LocalSshdOptions options;
  options.root = tmp.path() / "pool";
  options.session_env = {{"SHLVL", "1"}};
  for (int i = 0; i < 3; ++i) {
    options.hosts.push_back({"node-" + std::to_string(i), address(i), 2222});
  }
  auto created = remote::create_local_sshd_pool(options);
  REQUIRE(created);
  remote::LocalSshdPool pool = std::move(*created);
  CHECK(pool.user == util::run_process({"id", "-un"})->out.substr(0, pool.user.size()));
  // One known_hosts line per host, from its own generated host key.
  std::vector<std::string> lines =
      util::split(std::string(util::trim(read_text(pool.known_hosts))), '\n');
  REQUIRE(lines.size() == 3);
  std::set<std::string> keys;
  for (size_t i = 0; i < 3; ++i) {
    const auto& h = pool.hosts[i];
    CHECK(lines[i] == h.known_hosts_line);
    CHECK(util::starts_with(lines[i], "[" + h.address + "]:2222 ssh-ed25519 "));
    keys.insert(lines[i].substr(lines[i].find(' ')));
    CHECK(read_text(h.config).find("ListenAddress " + h.address + ":2222\n") != std::string::npos);
  }
  CHECK(keys.size() == 3); // each host has its own host key

  auto started = remote::start_local_sshd_pool(pool);
  REQUIRE_MESSAGE(started, (started ? "" : started.error().message));
  std::vector<int> pids;
  for (const auto& h : pool.hosts) {
    CHECK(alive(h.pid));
    CHECK(remote::running_local_sshd_pid(h) == h.pid);
    CHECK(accepts_tcp(h.address, h.port));
    pids.push_back(h.pid);
  }
  // Starting again leaves the running servers alone.
  REQUIRE(remote::start_local_sshd(pool, pool.hosts[0]));
  CHECK(pool.hosts[0].pid == pids[0]);

  // Strict host-key checking with the pool's known_hosts: no prompt, no failure.
  remote::SshOptions opts;
  opts.process_config = false;
  opts.use_agent = false;
  auto results = remote::run_fanout(remote::make_jobs(pool.targets(), "echo up"), opts);
  REQUIRE(results);
  for (const auto& r : *results) {
    CAPTURE(r.error);
    CHECK(r.outcome == remote::Outcome::ok);
    CHECK(r.out == "up\n");
  }

  // A stopped (SIGSTOP) listener is stopped all the same.
  ::kill(pids[1], SIGSTOP);
  REQUIRE(remote::stop_local_sshd_pool(pool));
  for (size_t i = 0; i < pool.hosts.size(); ++i) {
    CHECK(remote::running_local_sshd_pid(pool.hosts[i]) == 0);
    CHECK_FALSE(accepts_tcp(pool.hosts[i].address, 2222));
  }
  // The user's own ~/.ssh was neither read into nor written.
  CHECK(snapshot_home_ssh() == home_ssh_before);
}

TEST_CASE("remote::create_local_sshd_pool names the Debian package when sshd is missing") {
  test::TempDir tmp;
  remote::LocalSshdOptions options;
  options.root = tmp.path() / "pool";
  options.hosts = {{"a", address(0), 2222}};
  options.sshd_program = "sshd-that-is-not-installed";
  auto r = remote::create_local_sshd_pool(options);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("openssh-server") != std::string::npos);
  CHECK(r.error().message.find("sshd-that-is-not-installed") != std::string::npos);
}

TEST_CASE("remote::create_local_sshd_pool reports every invalid host at once") {
  test::TempDir tmp;
  remote::LocalSshdOptions options;
  options.root = tmp.path() / "pool";
  options.hosts = {{"ok", "127.0.0.2", 2222},
                   {"bad name", "127.0.0.3", 2222},
                   {"public", "10.0.0.1", 2222},
                   {"dup", "127.0.0.2", 2222}};
  auto r = remote::create_local_sshd_pool(options);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::usage);
  auto all = util::join(r.error().all_messages(), "\n");
  CHECK(all.find("host name 'bad name' is not valid") != std::string::npos);
  CHECK(all.find("address '10.0.0.1' of host 'public' is not a loopback address") !=
        std::string::npos);
  CHECK(all.find("127.0.0.2:2222 is used twice") != std::string::npos);
  CHECK_FALSE(fs::exists(options.root)); // nothing was created
}

TEST_CASE("remote::start_local_sshd reports sshd's own reason when the address is taken") {
  test::TempDir tmp;
  // Occupy the address first.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(2222);
  ::inet_pton(AF_INET, address(9).c_str(), &sa.sin_addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  remote::LocalSshdOptions options;
  options.root = tmp.path() / "pool";
  options.hosts = {{"taken", address(9), 2222}};
  auto pool = remote::create_local_sshd_pool(options);
  REQUIRE(pool);
  auto started = remote::start_local_sshd_pool(*pool);
  ::close(fd);
  REQUIRE_FALSE(started);
  CAPTURE(started.error().message);
  CHECK(started.error().message.find("did not start") != std::string::npos);
  CHECK(started.error().message.find("Address already in use") != std::string::npos);
  CHECK(remote::running_local_sshd_pid(pool->hosts[0]) == 0);
}
