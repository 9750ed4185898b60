// Deadline-bound TCP helpers for the programs a worker runs (preflight, spmd-matmul): name
// resolution, listening on one address (never the wildcard: on a local pool every "host" is an
// address of the same machine), connecting with retries while a peer is not up yet, and sending
// or receiving whole buffers. Every blocking operation takes a deadline and fails with
// ErrorKind::timeout once it passes, so nothing a worker does on the network can hang.
// Sockets are non-blocking, close-on-exec, and owned by the move-only Socket.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <sys/socket.h>

#include "util/expected.hpp"

namespace tpuctl::agent {

using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;

// A resolved socket address.
struct SocketAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// Resolves `host` (a name, an IPv4 or an IPv6 literal) for TCP on `port`; the first answer wins.
// Errors: failure "name not resolved: 'host' (<reason>)".
Expected<SocketAddress> resolve_address(const std::string& host, int port);

// "host:port", with brackets around an IPv6 literal.
std::string join_host_port(const std::string& host, int port);

struct HostPort {
  std::string host;
  int port = 0;
};
// Splits "host:port" or "[v6]:port". Errors: usage naming `text` (`what` is the variable or flag
// it came from) when the port is missing or not 1..65535.
Expected<HostPort> split_host_port(const std::string& text, const std::string& what);

// strerror's text starting lowercase ("connection refused").
std::string error_text(int err);

void set_nonblocking(int fd);

// An owned file descriptor (closed on destruction; move-only).
class Socket {
public:
  Socket() = default;
  explicit Socket(int fd) : m_fd(fd) {}
  Socket(Socket&& other) noexcept : m_fd(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return m_fd; }
  bool valid() const { return m_fd >= 0; }
  int release();
  void close();

private:
  int m_fd = -1;
};

// Listens on host:port (port 0: an ephemeral port) with SO_REUSEADDR.
// Errors: failure "cannot listen on host:port: <reason>" (e.g. address already in use).
Expected<Socket> listen_on(const std::string& host, int port);

// The port a bound socket got. Returns 0 when it cannot be read.
int local_port(const Socket& socket);

// "addr:port" of the other end of a connected socket; "an unknown peer" when it cannot be read.
std::string peer_address(const Socket& socket);

// Accepts one connection before `deadline`. Errors: timeout (nobody called), failure.
Expected<Socket> accept_until(const Socket& listener, Deadline deadline);

// Connects to `address` before `deadline`, retrying every 100 ms while the peer refuses or is
// unreachable (it may not have started yet). With `source`, the connection leaves from that
// local address (a worker's own address, so peers see who called); when it cannot be bound the
// kernel picks one. Errors: timeout with the last attempt's error ("connection refused"; the
// caller says who the peer is), failure for anything else.
Expected<Socket> connect_until(const SocketAddress& address, Deadline deadline,
                               const SocketAddress* source = nullptr);

// Sends all `size` bytes before `deadline`. Errors: timeout, failure (e.g. the peer closed).
Status send_all_until(const Socket& socket, const void* data, size_t size, Deadline deadline);

// Receives exactly `size` bytes before `deadline`. Errors: timeout, failure "the connection
// closed after N of M bytes" or the socket error.
Status recv_exact_until(const Socket& socket, void* data, size_t size, Deadline deadline);

// Milliseconds left until `deadline` for poll(), at least 0 and at most `cap_ms`.
int poll_timeout_ms(Deadline deadline, int cap_ms = 1000);

} // namespace tpuctl::agent
