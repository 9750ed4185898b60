// Port forwarding (`ssh ... -L/-R/-N/-4`, gcloud's --ssh-flag) through the real binary, with real
// sshd on the address block 127.0.250.x (owned by this file) and a slice of four workers on it.
// The test's own echo listener (127.0.250.8, a port the kernel picks) stands for what a user
// reaches through the tunnel (TensorBoard, a profiler): bytes sent to the -L port must come back
// from it unchanged; with -R, a connection to the port the worker's sshd listens on must reach
// it. Each tpuctl runs in the background and is stopped as a user stops it (SIGINT, or its
// command ending); it must exit and leave nothing listening or running. Readiness is polled,
// never timed. Bad input is one line with its exit status, before anything connects.
//
// -R binds the worker's loopback (sshd's GatewayPorts=no), so its port is on 127.0.0.1: port 0
// there, the one the kernel gives the worker's sshd, never a fixed one.
#include <arpa/inet.h>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <poll.h>
#include <regex>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/background.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/qr_env.hpp"
#include "util/process.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

using tpuctl::test::contains;
using tpuctl::test::QrEnv;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST_SUITE_BEGIN("integration");

namespace {

constexpr const char* k_echo_address = "127.0.250.8";   // the test's listener
constexpr const char* k_listen_address = "127.0.250.9"; // -L ports with a bind address

int listen_on(const std::string& address, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(::listen(fd, 16) == 0);
  return fd;
}

uint16_t port_of(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return ntohs(sa.sin_port);
}

// A port free on `address` now (the kernel's pick, released at once): only this file uses the
// 127.0.250.x block, and 127.0.0.1's ephemeral ports are the kernel's to hand out.
uint16_t free_port(const std::string& address) {
  const int fd = listen_on(address, 0);
  const uint16_t port = port_of(fd);
  ::close(fd);
  return port;
}

// Echoes every connection's bytes back until it ends; counts connections.
class EchoServer {
public:
  EchoServer() : m_fd(listen_on(k_echo_address, 0)), m_port(port_of(m_fd)) {
    m_thread = std::thread([this] { serve(); });
  }
  ~EchoServer() {
    m_stop = true;
    m_thread.join();
    ::close(m_fd);
  }
  EchoServer(const EchoServer&) = delete;
  EchoServer& operator=(const EchoServer&) = delete;
  uint16_t port() const { return m_port; }
  int connections() const { return m_connections.load(); }

private:
  void serve() {
    std::vector<std::thread> clients;
    while (!m_stop) {
      pollfd p{m_fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) {
        continue;
      }
      const int c = ::accept4(m_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        continue;
      }
      ++m_connections;
      clients.emplace_back([this, c] { echo(c); });
    }
    for (auto& t : clients) {
      t.join();
    }
  }
  void echo(int fd) {
    char buf[65536];
    while (!m_stop) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) {
        continue;
      }
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) {
        break;
      }
      for (ssize_t off = 0; off < n;) {
        const ssize_t w = ::write(fd, buf + off, static_cast<size_t>(n - off));
        if (w <= 0) {
          ::close(fd);
          return;
        }
        off += w;
      }
    }
    ::close(fd);
  }

  int m_fd;
  uint16_t m_port;
  std::atomic<bool> m_stop{false};
  std::atomic<int> m_connections{0};
  std::thread m_thread;
};

int connect_to(const std::string& address, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `payload` to address:port (retrying the connect until the listener is there), ends its
// side, and returns all it reads back until the other side ends (or 120 s pass: a failure).
std::string round_trip(const std::string& address, uint16_t port, const std::string& payload) {
  int fd = -1;
  tpuctl::test::wait_until(
      [&] {
        fd = connect_to(address, port);
        return fd >= 0;
      },
      120s);
  if (fd < 0) {
    return "<no listener on " + address + ":" + std::to_string(port) + ">";
  }
  std::string back;
  size_t sent = 0;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  bool shut = false;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    if (::poll(&p, 1, 100) <= 0) {
      continue;
    }
    if (!shut && (p.revents & POLLOUT)) {
      const ssize_t w =
          ::send(fd, payload.data() + sent, std::min<size_t>(65536, payload.size() - sent),
                 MSG_NOSIGNAL | MSG_DONTWAIT);
      sent += w > 0 ? static_cast<size_t>(w) : 0;
      if (sent == payload.size()) {
        ::shutdown(fd, SHUT_WR);
        shut = true;
      }
    }
    if (p.revents & (POLLIN | POLLHUP)) {
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN)) {
        break;
      }
      if (n > 0) {
        back.append(buf, static_cast<size_t>(n));
      }
    }
  }
  ::close(fd);
  return back;
}

size_t error_lines(const std::string& err) {
  size_t n = 0;
  for (const auto& line : tpuctl::util::split(err, '\n')) {
    n += line.rfind("tpuctl: error:", 0) == 0 ? 1 : 0;
  }
  return n;
}

// A pool of four hosts (127.0.250.2-5) with an ACTIVE slice `fw` of four workers.
struct ForwardEnv : QrEnv {
  std::string node;
  ForwardEnv() : QrEnv(4, "127.0.250.2") {
    auto created = run({"qr", "create", "fw", "--accelerator-type", "v5litepod-16"});
    REQUIRE_MESSAGE(created.exit_code == 0, created.err);
    auto qr = describe("fw");
    REQUIRE(qr["state"] == "ACTIVE");
    REQUIRE(qr["nodes"].size() == 1);
    REQUIRE(qr["nodes"][0]["workers"].size() == 4);
    node = qr["nodes"][0]["name"];
  }
};

// Stops a background tpuctl as Ctrl-C does; its exit status (or -1 when it did not exit).
int interrupt(tpuctl::test::Background& b) {
  ::kill(b.pid(), SIGINT);
  return b.wait(120s).value_or(-1);
}

} // namespace

TEST_CASE("port forwarding: -L and -R carry bytes both ways through the worker until Ctrl-C "
          "(exit 0), with -N, a command or a shell, in tpuctl's and gcloud's shapes") {
  ForwardEnv env;
  EchoServer echo;
  const std::string echo_at = std::string(k_echo_address) + ":" + std::to_string(echo.port());
  std::string big(1 << 20, 'x'); // more than any window: flow control both ways
  for (size_t i = 0; i < big.size(); i += 97) {
    big[i] = static_cast<char>('a' + i % 26);
  }

  SUBCASE("-N -L after '--', a bind address: bytes come back; SIGINT exits 0, the port is freed") {
    const uint16_t port = free_port(k_listen_address);
    auto tunnel =
        env.start({"ssh", "fw", "--worker=0", "--", "-N", "-L",
                   std::string(k_listen_address) + ":" + std::to_string(port) + ":" + echo_at},
                  "l");
    CHECK(round_trip(k_listen_address, port, "hello through -L") == "hello through -L");
    CHECK(round_trip(k_listen_address, port, big) == big);
    CHECK(echo.connections() == 2);
    CHECK_MESSAGE(interrupt(*tunnel) == 0, tunnel->err());
    CHECK(tpuctl::test::can_bind(k_listen_address, port));
    CHECK(error_lines(tunnel->err()) == 0);
  }

  SUBCASE("-N -R 0:...: the worker's sshd picks the port, told on stderr; a connection there "
          "reaches the local listener") {
    auto tunnel = env.start({"ssh", "fw", "--worker=1", "--ssh-flag=-N -R 0:" + echo_at}, "r");
    std::smatch m;
    const std::regex allocated("allocated port ([0-9]+) on ");
    std::string err;
    CHECK(tpuctl::test::wait_until(
        [&] {
          err = tunnel->err();
          return std::regex_search(err, m, allocated) || tunnel->wait(0ms).has_value();
        },
        120s));
    REQUIRE_MESSAGE(std::regex_search(err, m, allocated), err);
    const auto port = static_cast<uint16_t>(std::stoi(m[1].str()));
    CHECK(round_trip("127.0.0.1", port, "hello through -R") == "hello through -R");
    CHECK(round_trip("127.0.0.1", port, big) == big);
    CHECK(echo.connections() == 2);
    CHECK_MESSAGE(interrupt(*tunnel) == 0, tunnel->err());
  }

  SUBCASE("gcloud's shape: --ssh-flag=\"-4 -L PORT:HOST:P\" (loopback) with a command: the "
          "tunnel lives while it runs, and the command's end ends it") {
    const uint16_t port = free_port("127.0.0.1");
    const fs::path stop = env.dir.path() / "stop-command";
    auto run = env.start({"tpu-vm", "ssh", env.node, "--zone=local", "--worker=1",
                          "--ssh-flag=-4 -L " + std::to_string(port) + ":" + echo_at, "--command",
                          "while [ ! -e " + tpuctl::util::shell_quote(stop.string()) +
                              " ]; do sleep 0.2; done; echo finished"},
                         "c");
    CHECK(round_trip("127.0.0.1", port, "hello from gcloud") == "hello from gcloud");
    std::ofstream(stop) << "";
    CHECK_MESSAGE(run->wait(120s).value_or(-1) == 0, run->err());
    CHECK(contains(run->out(), "finished"));
    CHECK(echo.connections() == 1);
    CHECK(tpuctl::test::can_bind("127.0.0.1", port));
  }

  SUBCASE("the profiling guide's interactive shell with a tunnel (a real terminal through "
          "script(1)): the tunnel works while the shell runs") {
    const std::string script = tpuctl::util::find_program("script");
    REQUIRE_MESSAGE(!script.empty(), "script(1) (util-linux) is needed to give tpuctl a terminal");
    const uint16_t port = free_port(k_listen_address);
    const fs::path stop = env.dir.path() / "stop-shell";
    tpuctl::util::ProcessOptions o;
    o.env_set = env.vars;
    o.stdin_data = "while [ ! -e " + tpuctl::util::shell_quote(stop.string()) +
                   " ]; do sleep 0.2; done; exit 5\n";
    o.timeout = std::chrono::seconds(180);
    const std::string cmd = tpuctl::util::shell_join(
        {tpuctl::test::tpuctl_binary(), "tpu-vm", "ssh", env.node, "--zone=us-central2-b",
         "--ssh-flag=-4 -L " + std::string(k_listen_address) + ":" + std::to_string(port) + ":" +
             echo_at});
    std::optional<tpuctl::util::ProcessResult> shell;
    std::thread session([&] {
      auto r = tpuctl::util::run_process({script, "-qec", cmd, "/dev/null"}, o);
      if (r) {
        shell = *r;
      }
    });
    const std::string back = round_trip(k_listen_address, port, "hello from the shell");
    std::ofstream(stop) << "";
    session.join();
    CHECK(back == "hello from the shell");
    REQUIRE(shell.has_value());
    CHECK_MESSAGE(shell->exit_code == 5, shell->out);
    CHECK(tpuctl::test::can_bind(k_listen_address, port));
  }
}

TEST_CASE("port forwarding: a taken port, a malformed spec, an ssh option tpuctl does not take, "
          "several workers: one line each, its exit status, nothing connected or left running") {
  ForwardEnv env;
  const std::string base = std::string(k_echo_address) + ":1";

  // A -L port another program holds: exit 1, naming it, before any connection.
  const int holder = listen_on(k_listen_address, 0);
  const std::string taken = std::to_string(port_of(holder));
  auto busy = env.run({"ssh", "fw", "--worker=0", "--", "-N", "-L",
                       std::string(k_listen_address) + ":" + taken + ":" + base});
  ::close(holder);
  CHECK(busy.exit_code == 1);
  CHECK(error_lines(busy.err) == 1);
  CHECK_MESSAGE(
      contains(busy.err, "local port " + taken + " on " + k_listen_address + " is already in use"),
      busy.err);

  struct Refused {
    std::vector<std::string> args;
    int exit_code;
    std::string says;
  };
  const std::vector<Refused> refused = {
      {{"ssh", "fw", "--ssh-flag=-v", "--command=true"}, 2, "ssh option '-v' is not supported"},
      {{"tpu-vm", "ssh", env.node, "--", "-o", "ServerAliveInterval=5"},
       2,
       "ssh option '-o' is not supported"},
      {{"ssh", "fw", "--ssh-flag=-D 1080"}, 2, "ssh option '-D' is not supported"},
      {{"ssh", "fw", "--ssh-flag=-L abc"}, 2, "-L 'abc' is not a forward"},
      {{"ssh", "fw", "--", "-L", "70000:x:1"}, 2, "'70000' is not a port number from 1 to 65535"},
      {{"ssh", "fw", "--ssh-flag=-L"}, 2, "ssh option -L needs a forward after it"},
      {{"ssh", "fw", "--worker=all", "--", "-N", "-L", "1234:" + base},
       2,
       "reaches one worker at a time, and this selects 4 workers"},
      {{"ssh", "fw", "--ssh-flag=-N", "--command=true"}, 2, "-N runs no remote command"},
  };
  for (const auto& r : refused) {
    const std::string shown = tpuctl::util::join(r.args, " ");
    auto got = env.run(r.args);
    CHECK_MESSAGE(got.exit_code == r.exit_code, shown << "\n" << got.err);
    CHECK_MESSAGE(error_lines(got.err) == 1, shown << "\n" << got.err);
    CHECK_MESSAGE(contains(got.err, r.says), shown << "\n" << got.err);
    CHECK(got.out.empty());
  }

  // --dry-run prints the ssh line with the forwards, binds nothing and connects nowhere.
  const uint16_t port = free_port(k_listen_address);
  auto dry = env.run({"tpu-vm", "ssh", env.node, "--dry-run",
                      "--ssh-flag=-4 -L " + std::string(k_listen_address) + ":" +
                          std::to_string(port) + ":localhost:9001"});
  CHECK_MESSAGE(dry.exit_code == 0, dry.err);
  CHECK_MESSAGE(contains(dry.out, "ssh -t -4 -L " + std::string(k_listen_address) + ":" +
                                      std::to_string(port) + ":localhost:9001 "),
                dry.out);
}
