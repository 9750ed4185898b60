// Pumping forwarded connections through one session's channels (remote/forward_pump.hpp).
//
// Each forwarded connection is a tunnel: a non-blocking local socket and a channel. Nothing here
// blocks the loop that owns the session: a -L channel is opened with the session switched to
// non-blocking for the call (SSH_AGAIN, then the same call on later turns until the server
// confirms or refuses), a -R connection's local connect is non-blocking (POLLOUT, then
// SO_ERROR), and bytes move only as far as the other side takes them at once.
//
// Flow control: bytes from the socket are read only while the channel's window (what the peer
// still accepts) is open, at most that much; bytes from the channel are read only while the
// socket's pending buffer is below k_pump_pending, and libssh gives the peer more window only as
// they are read. So a slow reader on either side slows its writer down instead of filling memory,
// and the socket is not polled for input while the window is shut (no busy loop).
//
// Ends: the socket's end-of-file becomes the channel's EOF and the channel's EOF a shutdown of
// the socket's write side, so half-closed protocols work; a tunnel ends when both directions
// have ended, the channel is closed, or either side fails, and then its socket and channel are
// closed. Tunnels, listeners and -R forwards end with the session.
#include "remote/forward_pump.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "remote/ssh_session.hpp"

namespace tpuctl::remote::detail {

namespace {

constexpr int k_accepts_per_turn = 16;

std::string peer_of(const sockaddr_storage& ss, std::string& host, int& port) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
    host = text;
    return host + ":" + std::to_string(port);
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
  ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
  port = ntohs(in6->sin6_port);
  host = text;
  return "[" + host + "]:" + std::to_string(port);
}

int event_callback(socket_t, int revents, void* user) {
  static_cast<pollfd*>(user)->revents |= static_cast<short>(revents);
  return 0;
}

} // namespace

struct ForwardPump::Tunnel {
  enum class State { opening, connecting, open };
  State state = State::opening;
  int fd = -1;
  ssh_channel channel = nullptr;
  size_t spec = 0;
  std::string peer;        // the other end of the local socket, for messages
  std::string origin_host; // -L: the accepted peer, told to the server
  int origin_port = 0;
  std::string to_socket;   // bytes from the channel the socket has not taken yet
  bool socket_eof = false; // the socket's input ended (EOF sent on the channel)
  bool eof_passed = false; // the channel's EOF passed on (the socket's write side shut)
  bool finished = false;
};

ForwardPump::ForwardPump(ssh_session session, ForwardSet& forwards, std::string label)
    : m_session(session), m_forwards(forwards), m_label(std::move(label)),
      m_bound(forwards.specs().size(), 0) {}

ForwardPump::~ForwardPump() {
  for (auto& t : m_tunnels) {
    close_tunnel(*t);
  }
}

std::string ForwardPump::start() {
  const auto& specs = m_forwards.specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const ForwardSpec& spec = specs[i];
    if (spec.kind != ForwardKind::remote) {
      continue;
    }
    // OpenSSH's client: no BIND is "localhost" (the server's loopback), `*` or empty is "".
    const std::string address = spec.any_address            ? ""
                                : spec.bind_address.empty() ? "localhost"
                                                            : spec.bind_address;
    int bound = 0;
    if (ssh_channel_listen_forward(m_session, address.c_str(), spec.port, &bound) != SSH_OK) {
      return "the worker's sshd refused " + describe(spec) + " (" + ssh_get_error(m_session) +
             "): its port may be in use there, or its sshd_config forbids remote forwarding "
             "(AllowTcpForwarding, PermitListen)";
    }
    m_bound[i] = spec.port != 0 ? spec.port : static_cast<uint16_t>(bound);
    if (spec.port == 0) {
      m_forwards.notice("allocated port " + std::to_string(m_bound[i]) + " on " + m_label +
                        " for " + describe(spec) + " (remote forward to " + spec.host + ":" +
                        std::to_string(spec.host_port) + ")");
    }
    spdlog::debug("{}: {} listening on port {}", m_label, describe(spec), m_bound[i]);
  }
  return {};
}

void ForwardPump::want(std::vector<pollfd>& fds) const {
  for (const auto& l : m_forwards.listeners()) {
    fds.push_back({l.fd, POLLIN, 0});
  }
  for (const auto& t : m_tunnels) {
    short events = 0;
    if (t->state == Tunnel::State::connecting) {
      events = POLLOUT;
    } else if (t->state == Tunnel::State::open) {
      if (!t->socket_eof && ssh_channel_window_size(t->channel) > 0) {
        events |= POLLIN;
      }
      if (!t->to_socket.empty()) {
        events |= POLLOUT;
      }
    }
    if (events != 0) { // an opening tunnel waits for the session's socket
      fds.push_back({t->fd, events, 0});
    }
  }
}

bool ForwardPump::ready() const {
  for (const auto& t : m_tunnels) {
    if (t->state == Tunnel::State::open && t->to_socket.size() < k_pump_pending &&
        ssh_channel_poll(t->channel, 0) > 0) {
      return true;
    }
  }
  return false;
}

void ForwardPump::service(const pollfd* fds, size_t n) {
  auto revents_of = [&](int fd) -> short {
    for (size_t i = 0; i < n; ++i) {
      if (fds[i].fd == fd) {
        return fds[i].revents;
      }
    }
    return 0;
  };
  for (const auto& l : m_forwards.listeners()) {
    if (revents_of(l.fd) & POLLIN) {
      accept_from(l);
    }
  }
  take_remote_connections();
  for (auto& t : m_tunnels) {
    if (!t->finished) {
      pump(*t, revents_of(t->fd));
    }
    if (t->finished) {
      close_tunnel(*t);
    }
  }
  std::erase_if(m_tunnels, [](const auto& t) { return t->fd < 0 && t->channel == nullptr; });
}

void ForwardPump::accept_from(const ForwardSet::Listener& listener) {
  const ForwardSpec& spec = m_forwards.specs()[listener.spec];
  for (int i = 0; i < k_accepts_per_turn; ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const int fd = ::accept4(listener.fd, reinterpret_cast<sockaddr*>(&ss), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        spdlog::warn("{}: cannot accept on {}: {}", describe(spec), listener.address,
                     std::strerror(errno));
      }
      return;
    }
    auto t = std::make_unique<Tunnel>();
    t->fd = fd;
    t->spec = listener.spec;
    t->peer = peer_of(ss, t->origin_host, t->origin_port);
    t->channel = ssh_channel_new(m_session);
    if (t->channel == nullptr) {
      spdlog::warn("{}: cannot open a channel on {} for {}: {}", describe(spec), m_label, t->peer,
                   ssh_get_error(m_session));
      ::close(fd);
      continue;
    }
    spdlog::debug("{}: connection from {} on {}", describe(spec), t->peer, listener.address);
    t->state = Tunnel::State::opening;
    pump(*t, 0); // sends the open request
    if (t->finished) {
      close_tunnel(*t);
    } else {
      m_tunnels.push_back(std::move(t));
    }
  }
}

void ForwardPump::take_remote_connections() {
  const auto& specs = m_forwards.specs();
  bool any_remote = false;
  for (const auto& s : specs) {
    any_remote = any_remote || s.kind == ForwardKind::remote;
  }
  while (any_remote) {
    int port = 0, origin_port = 0;
    char* origin = nullptr;
    ssh_channel ch = ssh_channel_open_forward_port(m_session, 0, &port, &origin, &origin_port);
    if (ch == nullptr) {
      return;
    }
    const std::string from = (origin != nullptr ? std::string(origin) : std::string("?")) + ":" +
                             std::to_string(origin_port);
    ssh_string_free_char(origin);
    size_t spec = specs.size();
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].kind == ForwardKind::remote && m_bound[i] == port) {
        spec = i;
        break;
      }
    }
    auto refuse = [&](const std::string& why) {
      spdlog::warn("{}", why);
      ssh_channel_close(ch);
      ssh_channel_free(ch);
    };
    if (spec == specs.size()) {
      refuse(m_label + " forwarded a connection to port " + std::to_string(port) +
             ", which no -R asked for; closed");
      continue;
    }
    const ForwardSpec& s = specs[spec];
    addrinfo hints{};
    hints.ai_family = m_forwards.ipv4_only() ? AF_INET : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(s.host_port);
    if (const int rc = ::getaddrinfo(s.host.c_str(), service.c_str(), &hints, &found); rc != 0) {
      refuse(describe(s) + ": cannot resolve '" + s.host + "': " + ::gai_strerror(rc));
      continue;
    }
    const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                            found->ai_protocol);
    const int rc = fd < 0 ? -1 : ::connect(fd, found->ai_addr, found->ai_addrlen);
    const int err = errno;
    ::freeaddrinfo(found);
    if (fd < 0 || (rc != 0 && err != EINPROGRESS)) {
      if (fd >= 0) {
        ::close(fd);
      }
      refuse(describe(s) + ": cannot connect to " + s.host + ":" + service + " for " + from + ": " +
             std::strerror(err));
      continue;
    }
    auto t = std::make_unique<Tunnel>();
    t->fd = fd;
    t->channel = ch;
    t->spec = spec;
    t->peer = s.host + ":" + service;
    t->state = rc == 0 ? Tunnel::State::open : Tunnel::State::connecting;
    spdlog::debug("{}: connection from {} on {}, to {}", describe(s), from, m_label, t->peer);
    m_tunnels.push_back(std::move(t));
  }
}

void ForwardPump::pump(Tunnel& t, short revents) {
  const ForwardSpec& spec = m_forwards.specs()[t.spec];
  if (t.state == Tunnel::State::opening) {
    const std::string origin = t.origin_host.empty() ? "127.0.0.1" : t.origin_host;
    ssh_set_blocking(m_session, 0);
    const int rc = ssh_channel_open_forward(t.channel, spec.host.c_str(), spec.host_port,
                                            origin.c_str(), t.origin_port);
    ssh_set_blocking(m_session, 1);
    if (rc == SSH_AGAIN) {
      return;
    }
    if (rc != SSH_OK) {
      spdlog::warn("{}: {} could not open a connection to {}:{} for {}: {}", describe(spec),
                   m_label, spec.host, spec.host_port, t.peer, ssh_get_error(m_session));
      t.finished = true;
      return;
    }
    t.state = Tunnel::State::open;
  }
  if (t.state == Tunnel::State::connecting) {
    if ((revents & (POLLOUT | POLLERR | POLLHUP)) == 0) {
      return;
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(t.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      spdlog::warn("{}: cannot connect to {} for a connection {} forwarded: {}", describe(spec),
                   t.peer, m_label, std::strerror(err));
      t.finished = true;
      return;
    }
    t.state = Tunnel::State::open;
  }
  char buf[k_pump_chunk];
  // Channel -> socket.
  while (t.to_socket.size() < k_pump_pending) {
    const int got = ssh_channel_read_nonblocking(t.channel, buf, sizeof buf, 0);
    if (got > 0) {
      t.to_socket.append(buf, static_cast<size_t>(got));
      continue;
    }
    if (got == SSH_ERROR) {
      t.finished = true;
      return;
    }
    break; // nothing now, or its EOF
  }
  while (!t.to_socket.empty()) {
    const ssize_t sent =
        ::send(t.fd, t.to_socket.data(), t.to_socket.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      t.to_socket.erase(0, static_cast<size_t>(sent));
      continue;
    }
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      break;
    }
    t.finished = true; // the local end went away
    return;
  }
  // Socket -> channel, within the window.
  if (!t.socket_eof && (revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
    size_t moved = 0;
    while (moved < k_pump_pending) {
      const uint32_t window = ssh_channel_window_size(t.channel);
      if (window == 0) {
        break;
      }
      const ssize_t got = ::recv(t.fd, buf, std::min<size_t>(window, sizeof buf), MSG_DONTWAIT);
      if (got > 0) {
        if (ssh_channel_write(t.channel, buf, static_cast<uint32_t>(got)) < 0) {
          t.finished = true;
          return;
        }
        moved += static_cast<size_t>(got);
        continue;
      }
      if (got == 0) {
        t.socket_eof = true;
        ssh_channel_send_eof(t.channel);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        t.finished = true; // reset by the local end
        return;
      }
      break;
    }
  }
  if (!t.eof_passed && t.to_socket.empty() && ssh_channel_is_eof(t.channel)) {
    ::shutdown(t.fd, SHUT_WR);
    t.eof_passed = true;
  }
  if ((t.socket_eof && t.eof_passed) || (t.to_socket.empty() && ssh_channel_is_closed(t.channel))) {
    t.finished = true;
  }
}

void ForwardPump::close_tunnel(Tunnel& t) {
  if (t.channel != nullptr) {
    // Only an open channel is closed: one still opening, or refused, has no peer id yet, and
    // ssh_channel_free does what is left.
    if (ssh_channel_is_open(t.channel)) {
      ssh_channel_close(t.channel);
    }
    ssh_channel_free(t.channel);
    t.channel = nullptr;
  }
  if (t.fd >= 0) {
    ::close(t.fd);
    t.fd = -1;
  }
}

void add_to_event(ssh_event event, std::vector<pollfd>& fds) {
  for (auto& p : fds) {
    p.revents = 0;
    ssh_event_add_fd(event, p.fd, p.events, event_callback, &p);
  }
}

void remove_from_event(ssh_event event, const std::vector<pollfd>& fds) {
  for (const auto& p : fds) {
    ssh_event_remove_fd(event, p.fd);
  }
}

} // namespace tpuctl::remote::detail
