// Deadline-bound TCP: every call below polls with the time left to its deadline, so a silent
// peer costs at most that long. connect_until retries refused and unreachable peers because the
// workers of a slice start a little apart (an ssh fan-out reaches them one by one).
#include "agent/tcp.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <thread>
#include <unistd.h>

namespace tpuctl::agent {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds k_connect_retry{100};

Error timeout_error(std::string message) {
  return Error{ErrorKind::timeout, std::move(message)};
}

// Waits for `events` on `fd` until `deadline`. Returns true when ready; false on timeout.
Expected<bool> wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    if (SteadyClock::now() >= deadline) {
      return false;
    }
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc < 0 && errno == EINTR) {
      continue;
    }
    if (rc < 0) {
      return make_error(ErrorKind::failure, "poll: " + error_text(errno));
    }
    if (rc > 0) {
      return true;
    }
  }
}

bool retryable_connect_error(int err) {
  return err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH || err == ETIMEDOUT ||
         err == ECONNRESET || err == EADDRNOTAVAIL;
}

} // namespace

Expected<SocketAddress> resolve_address(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return make_error(ErrorKind::failure, "name not resolved: '" + host + "' (" +
                                              std::string(::gai_strerror(rc)) + ")");
  }
  SocketAddress out;
  std::memcpy(&out.addr, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

std::string join_host_port(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Expected<HostPort> split_host_port(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return usage_error(what + ": '" + text + "' is not host:port (" + why + ")");
  };
  HostPort out;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("an IPv6 address needs the form [addr]:port");
    }
    out.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) {
      return bad("the port is missing");
    }
    out.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (out.host.empty()) {
    return bad("the host is empty");
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return bad("the port must be a number from 1 to 65535");
  }
  out.port = std::stoi(port);
  if (out.port < 1 || out.port > 65535) {
    return bad("the port must be a number from 1 to 65535");
  }
  return out;
}

std::string error_text(int err) {
  std::string s = std::strerror(err);
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z') {
    s[0] = static_cast<char>(s[0] - 'A' + 'a');
  }
  return s;
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    m_fd = other.release();
  }
  return *this;
}

int Socket::release() {
  int fd = m_fd;
  m_fd = -1;
  return fd;
}

void Socket::close() {
  if (m_fd >= 0) {
    ::close(m_fd);
    m_fd = -1;
  }
}

Expected<Socket> listen_on(const std::string& host, int port) {
  TPUCTL_TRY_ASSIGN(auto address, resolve_address(host, port));
  const std::string where = join_host_port(host, port);
  Socket s(::socket(address.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) {
    return make_error(ErrorKind::failure, "cannot listen on " + where + ": " + error_text(errno));
  }
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&address.addr), address.len) != 0 ||
      ::listen(s.fd(), 256) != 0) {
    return make_error(ErrorKind::failure, "cannot listen on " + where + ": " + error_text(errno));
  }
  set_nonblocking(s.fd());
  return s;
}

int local_port(const Socket& socket) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return 0;
  }
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  }
  return 0;
}

std::string peer_address(const Socket& socket) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return "an unknown peer";
  }
  char host[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
    port = ntohs(in->sin6_port);
  } else {
    return "an unknown peer";
  }
  return join_host_port(host, port);
}

Expected<Socket> accept_until(const Socket& listener, Deadline deadline) {
  for (;;) {
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      return Socket(fd);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      return make_error(ErrorKind::failure, "accept: " + error_text(errno));
    }
    TPUCTL_TRY_ASSIGN(bool ready, wait_for(listener.fd(), POLLIN, deadline));
    if (!ready) {
      return timeout_error("nobody connected before the deadline");
    }
  }
}

Expected<Socket> connect_until(const SocketAddress& address, Deadline deadline,
                               const SocketAddress* source) {
  std::string last_error = "no attempt finished";
  for (;;) {
    Socket s(::socket(address.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
      return make_error(ErrorKind::failure, "socket: " + error_text(errno));
    }
    set_nonblocking(s.fd());
    if (source != nullptr && source->addr.ss_family == address.addr.ss_family) {
      // Port 0: any free port on that address. A failure leaves the choice to the kernel.
      SocketAddress from = *source;
      if (from.addr.ss_family == AF_INET) {
        reinterpret_cast<sockaddr_in*>(&from.addr)->sin_port = 0;
      } else if (from.addr.ss_family == AF_INET6) {
        reinterpret_cast<sockaddr_in6*>(&from.addr)->sin6_port = 0;
      }
      (void)::bind(s.fd(), reinterpret_cast<const sockaddr*>(&from.addr), from.len);
    }
    int err = 0;
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&address.addr), address.len) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        TPUCTL_TRY_ASSIGN(bool ready, wait_for(s.fd(), POLLOUT, deadline));
        if (!ready) {
          return timeout_error("the connection did not complete (last error: " + last_error + ")");
        }
        socklen_t len = sizeof err;
        ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      int one = 1;
      ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return s;
    }
    if (!retryable_connect_error(err)) {
      return make_error(ErrorKind::failure, error_text(err));
    }
    last_error = error_text(err);
    auto now = SteadyClock::now();
    if (now + k_connect_retry >= deadline) {
      return timeout_error(last_error);
    }
    std::this_thread::sleep_for(k_connect_retry);
  }
}

Status send_all_until(const Socket& socket, const void* data, size_t size, Deadline deadline) {
  const char* p = static_cast<const char*>(data);
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::send(socket.fd(), p + off, size - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      TPUCTL_TRY_ASSIGN(bool ready, wait_for(socket.fd(), POLLOUT, deadline));
      if (!ready) {
        return timeout_error("sending stalled: " + std::to_string(off) + " of " +
                             std::to_string(size) + " bytes sent before the deadline");
      }
      continue;
    }
    return make_error(ErrorKind::failure, "send: " + error_text(errno));
  }
  return ok();
}

Status recv_exact_until(const Socket& socket, void* data, size_t size, Deadline deadline) {
  char* p = static_cast<char*>(data);
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::recv(socket.fd(), p + off, size - off, 0);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return make_error(ErrorKind::failure, "the connection closed after " + std::to_string(off) +
                                                " of " + std::to_string(size) + " bytes");
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      TPUCTL_TRY_ASSIGN(bool ready, wait_for(socket.fd(), POLLIN, deadline));
      if (!ready) {
        return timeout_error("nothing received before the deadline (" + std::to_string(off) +
                             " of " + std::to_string(size) + " bytes)");
      }
      continue;
    }
    return make_error(ErrorKind::failure, "recv: " + error_text(errno));
  }
  return ok();
}

int poll_timeout_ms(Deadline deadline, int cap_ms) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()).count();
  return static_cast<int>(std::clamp<long long>(left + 1, 0, cap_ms));
}

} // namespace tpuctl::agent
