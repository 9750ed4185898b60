// Preflight, one worker's side.
//
// Every worker of a slice runs this at the same time, each with the links it checks: the peers
// it calls and the peers that call it (by default every pair of the node; provisioning gives
// O(N) links, provision/slice/preflight_peers.hpp). Each one listens on its OWN address
// (hostnames[worker]:port), never on 0.0.0.0: on a local pool every "host" is an address of one
// machine, and binding the wildcard would both collide and prove nothing about the address peers
// are told to use. Then, in one single-threaded poll() loop, it
//   * accepts peers: reads their hello line ("tpuctl-preflight <id>"), answers with its own
//     hello, and records who called (heard_from);
//   * calls each peer it was given at hostnames[j]:port with a non-blocking connect, sends its
//   hello and
//     waits for the peer's answer, which must name worker j (a different id means the address
//     leads to the wrong process). A refused or failed connect is retried until the deadline,
//     because peers start a little apart: after 10 ms, then twice as long each time up to 100 ms
//     (a fixed 100 ms made a peer that started just after the first try cost 100 ms of the
//     slice's preflight).
// The loop ends when every called peer answered and every expected peer called in (so a fast
// worker keeps its port open for slow peers), or at the deadline. A peer not reached by then is
// reported with the last error seen. Hostnames are resolved first (getaddrinfo, IPv4 and IPv6); one
// that does not resolve is unreachable at once. One thread and one socket per peer keeps even a
// 64-host slice on one machine (64 x 63 connections) cheap.
#include "agent/preflight.hpp"

#include <algorithm>
#include <cerrno>
#include <netinet/in.h>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/tcp.hpp"
#include "util/time_text.hpp"

namespace tpuctl::agent {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds k_first_retry{10};
constexpr milliseconds k_retry_delay{100}; // the longest wait between two tries
constexpr size_t k_max_line = 256;

// A peer's address, or why it has none.
struct Resolved {
  SocketAddress address;
  std::string error;
};

Resolved resolve(const std::string& host, int port) {
  Resolved r;
  auto a = resolve_address(host, port);
  if (a) {
    r.address = *a;
  } else {
    r.error = a.error().message;
  }
  return r;
}

// A connection in progress: outgoing (to a peer) or incoming (from one).
struct Conn {
  int fd = -1;
  int peer = -1; // outgoing: the worker called
  bool outgoing = false;
  bool connecting = false;
  std::string in;
};

struct Outgoing {
  enum class Phase { idle, busy, done } phase = Phase::idle;
  Clock::time_point retry_at{};
  milliseconds backoff = k_first_retry;
  void later(Clock::time_point now) {
    retry_at = now + backoff;
    backoff = std::min(backoff * 2, k_retry_delay);
  }
  std::string last_error = "no answer";
};

// Reads what is available; returns false at EOF or error (the connection is finished).
bool read_some(Conn& c) {
  char buf[256];
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      if (c.in.size() > k_max_line) {
        return false;
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    return false;
  }
}

void send_all(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return; // the peer's side reports it
    }
    off += static_cast<size_t>(n);
  }
}

} // namespace

bool PreflightResult::ok() const {
  return bind_error.empty() && unreachable.empty() && (!kernel.ran || kernel.ok);
}

std::string preflight_hello(int worker) {
  return "tpuctl-preflight " + std::to_string(worker) + "\n";
}

int parse_preflight_hello(const std::string& line) {
  const std::string prefix = "tpuctl-preflight ";
  if (line.rfind(prefix, 0) != 0 || line.size() == prefix.size() || line.size() > 40) {
    return -1;
  }
  int value = 0;
  for (size_t i = prefix.size(); i < line.size(); ++i) {
    if (line[i] < '0' || line[i] > '9' || value > 1000000) {
      return -1;
    }
    value = value * 10 + (line[i] - '0');
  }
  return value;
}

Status validate_preflight_options(const PreflightOptions& options) {
  ErrorList problems;
  int n = static_cast<int>(options.hostnames.size());
  if (n == 0) {
    problems.add(ErrorKind::usage, "--hostnames: give every worker's address, worker 0 first");
  }
  for (int i = 0; i < n; ++i) {
    const bool needed =
        !options.links_given || i == options.worker ||
        std::find(options.calls.begin(), options.calls.end(), i) != options.calls.end();
    if (needed && options.hostnames[static_cast<size_t>(i)].empty()) {
      problems.add(ErrorKind::usage,
                   "--hostnames: entry " + std::to_string(i) + " is empty (give an address)");
    }
  }
  if (n > 0 && (options.worker < 0 || options.worker >= n)) {
    problems.add(ErrorKind::usage, "--worker: '" + std::to_string(options.worker) +
                                       "' is not a worker of the " + std::to_string(n) +
                                       " hostnames (use 0 to " + std::to_string(n - 1) + ")");
  }
  if (options.port < 1 || options.port > 65535) {
    problems.add(ErrorKind::usage,
                 "--port: '" + std::to_string(options.port) + "' must be from 1 to 65535");
  }
  if (options.timeout.count() <= 0) {
    problems.add(ErrorKind::usage, "--timeout: must be longer than 0 (e.g. 20s)");
  }
  for (const auto* list : {&options.calls, &options.expects}) {
    for (int j : *list) {
      if (j < 0 || j >= n || j == options.worker) {
        problems.add(ErrorKind::usage,
                     std::string(list == &options.calls ? "--calls" : "--expects") + ": '" +
                         std::to_string(j) + "' is not another worker of the " + std::to_string(n) +
                         " hostnames");
      }
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return {};
}

Expected<PreflightResult> run_preflight(const PreflightOptions& options) {
  TPUCTL_TRY(validate_preflight_options(options));
  auto start = Clock::now();
  auto deadline = start + options.timeout;
  const int n = static_cast<int>(options.hostnames.size());
  const int self = options.worker;
  PreflightResult result;
  result.worker = self;

  // Whom to call and whom to wait for: the given links, else every pair.
  std::vector<char> calling(static_cast<size_t>(n), options.links_given ? 0 : 1);
  std::set<int> expected;
  for (int j : options.calls) {
    calling[static_cast<size_t>(j)] = 1;
  }
  calling[static_cast<size_t>(self)] = 0;
  if (options.links_given) {
    expected.insert(options.expects.begin(), options.expects.end());
  } else {
    for (int j = 0; j < n; ++j) {
      if (j != self) {
        expected.insert(j);
      }
    }
  }
  std::vector<Resolved> addrs(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    if (calling[static_cast<size_t>(j)] || j == self) {
      addrs[static_cast<size_t>(j)] =
          resolve(options.hostnames[static_cast<size_t>(j)], options.port);
    }
  }
  std::vector<Outgoing> out(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    const auto& a = addrs[static_cast<size_t>(j)];
    if (!calling[static_cast<size_t>(j)]) {
      out[static_cast<size_t>(j)].phase = Outgoing::Phase::done;
      out[static_cast<size_t>(j)].last_error.clear(); // not called: never reported
    } else if (!a.error.empty()) {
      out[static_cast<size_t>(j)].phase = Outgoing::Phase::done;
      result.unreachable.push_back(
          PeerProblem{j, options.hostnames[static_cast<size_t>(j)], a.error});
    }
  }

  // Listen on our own address.
  const auto& own = addrs[static_cast<size_t>(self)];
  result.bind_address = join_host_port(options.hostnames[static_cast<size_t>(self)], options.port);
  int listener = -1;
  if (!own.error.empty()) {
    result.bind_error = own.error;
  } else {
    listener = ::socket(own.address.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (listener < 0 ||
        ::bind(listener, reinterpret_cast<const sockaddr*>(&own.address.addr), own.address.len) !=
            0 ||
        ::listen(listener, 256) != 0) {
      result.bind_error = "cannot listen on " + result.bind_address + ": " + error_text(errno);
      if (listener >= 0) {
        ::close(listener);
      }
      listener = -1;
    } else {
      set_nonblocking(listener);
    }
  }

  std::vector<Conn> conns;
  std::set<int> heard;
  auto close_conn = [](Conn& c) {
    ::close(c.fd);
    c.fd = -1;
  };
  auto fail_attempt = [&](Conn& c, const std::string& why) {
    auto& o = out[static_cast<size_t>(c.peer)];
    o.last_error = why;
    o.phase = Outgoing::Phase::idle;
    o.later(Clock::now());
    close_conn(c);
  };

  for (;;) {
    auto now = Clock::now();
    bool calls_done = std::all_of(
        out.begin(), out.end(), [](const Outgoing& o) { return o.phase == Outgoing::Phase::done; });
    bool all_heard =
        listener < 0 || std::includes(heard.begin(), heard.end(), expected.begin(), expected.end());
    if ((calls_done && all_heard) || now >= deadline) {
      break;
    }
    // Start the calls that are due.
    for (int j = 0; j < n; ++j) {
      auto& o = out[static_cast<size_t>(j)];
      if (o.phase != Outgoing::Phase::idle || o.retry_at > now) {
        continue;
      }
      const auto& a = addrs[static_cast<size_t>(j)];
      Conn c;
      c.fd = ::socket(a.address.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      c.peer = j;
      c.outgoing = true;
      if (c.fd < 0) {
        o.last_error = "socket: " + error_text(errno);
        o.later(now);
        continue;
      }
      set_nonblocking(c.fd);
      // From our own address when it is one of this host's (best effort): the link checked is
      // the one between the two addresses the slice advertises.
      if (own.error.empty() && own.address.addr.ss_family == a.address.addr.ss_family) {
        sockaddr_storage from = own.address.addr;
        if (from.ss_family == AF_INET) {
          reinterpret_cast<sockaddr_in*>(&from)->sin_port = 0;
        } else if (from.ss_family == AF_INET6) {
          reinterpret_cast<sockaddr_in6*>(&from)->sin6_port = 0;
        }
        (void)::bind(c.fd, reinterpret_cast<const sockaddr*>(&from), own.address.len);
      }
      o.phase = Outgoing::Phase::busy;
      if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&a.address.addr), a.address.len) == 0) {
        send_all(c.fd, preflight_hello(self));
      } else if (errno == EINPROGRESS) {
        c.connecting = true;
      } else {
        conns.push_back(c);
        fail_attempt(conns.back(), error_text(errno));
        continue;
      }
      conns.push_back(c);
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const Conn& c) { return c.fd < 0; }),
                conns.end());

    std::vector<pollfd> fds;
    if (listener >= 0) {
      fds.push_back(pollfd{listener, POLLIN, 0});
    }
    for (const auto& c : conns) {
      fds.push_back(pollfd{c.fd, static_cast<short>(c.connecting ? POLLOUT : POLLIN), 0});
    }
    auto wait = std::min<Clock::duration>(deadline - now, milliseconds(50));
    int timeout_ms = static_cast<int>(std::chrono::duration_cast<milliseconds>(wait).count()) + 1;
    int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) {
      break;
    }
    size_t base = 0;
    if (listener >= 0) {
      base = 1;
      if (fds[0].revents & POLLIN) {
        for (;;) {
          int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) {
            break;
          }
          Conn c;
          c.fd = fd;
          conns.push_back(c);
        }
      }
    }
    for (size_t i = 0; i + base < fds.size(); ++i) {
      Conn& c = conns[i];
      short ev = fds[i + base].revents;
      if (ev == 0 || c.fd < 0) {
        continue;
      }
      if (c.outgoing && c.connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          fail_attempt(c, error_text(err));
          continue;
        }
        c.connecting = false;
        send_all(c.fd, preflight_hello(self));
        continue;
      }
      bool open = read_some(c);
      auto nl = c.in.find('\n');
      if (nl == std::string::npos) {
        if (!open) {
          if (c.outgoing) {
            fail_attempt(c, "the connection closed before the peer's hello");
          } else {
            close_conn(c);
          }
        }
        continue;
      }
      int id = parse_preflight_hello(c.in.substr(0, nl));
      if (c.outgoing) {
        auto& o = out[static_cast<size_t>(c.peer)];
        if (id == c.peer) {
          o.phase = Outgoing::Phase::done;
          result.reached.push_back(c.peer);
          close_conn(c);
        } else {
          fail_attempt(c, id < 0 ? "the listener is not a tpuctl preflight"
                                 : "answered as worker " + std::to_string(id));
        }
      } else {
        if (id >= 0 && id < n && id != self) {
          heard.insert(id);
        }
        send_all(c.fd, preflight_hello(self));
        close_conn(c);
      }
    }
  }
  for (auto& c : conns) {
    if (c.fd >= 0) {
      ::close(c.fd);
    }
  }
  if (listener >= 0) {
    ::close(listener);
  }
  for (int j = 0; j < n; ++j) {
    const auto& o = out[static_cast<size_t>(j)];
    if (calling[static_cast<size_t>(j)] && o.phase != Outgoing::Phase::done) {
      result.unreachable.push_back(
          PeerProblem{j, join_host_port(options.hostnames[static_cast<size_t>(j)], options.port),
                      o.last_error});
    }
  }
  std::sort(result.reached.begin(), result.reached.end());
  std::sort(result.unreachable.begin(), result.unreachable.end(),
            [](const PeerProblem& a, const PeerProblem& b) { return a.worker < b.worker; });
  result.heard_from.assign(heard.begin(), heard.end());
  if (options.kernel_check) {
    result.kernel = run_kernel_check(options.corrupt_kernel);
  }
  result.clock_ms = util::unix_now_ms();
  result.duration_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  return result;
}

} // namespace tpuctl::agent
