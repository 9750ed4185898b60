// The local side of -L: every listener bound before any connection is made (so a port in use
// fails at once, naming it, with nothing connected and nothing left bound), on the addresses
// OpenSSH binds with GatewayPorts=no (remote/forwarding.hpp).
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "remote/forwarding.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote {

namespace {

std::string address_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
  ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
  port = ntohs(in6->sin6_port);
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

// The addresses a -L spec listens on, each with whether failing to bind it is fine (::1 on a
// host without IPv6).
struct BindTarget {
  std::string host;
  bool optional = false;
};

std::vector<BindTarget> bind_targets(const ForwardSpec& spec, bool ipv4) {
  if (spec.any_address) {
    std::vector<BindTarget> out{{"0.0.0.0", false}};
    if (!ipv4) {
      out.push_back({"::", true});
    }
    return out;
  }
  if (spec.bind_address.empty()) {
    std::vector<BindTarget> out{{"127.0.0.1", false}};
    if (!ipv4) {
      out.push_back({"::1", true});
    }
    return out;
  }
  return {{spec.bind_address, false}};
}

std::string bind_failure(const ForwardSpec& spec, const std::string& where, int err) {
  const std::string port = std::to_string(spec.port);
  switch (err) {
  case EADDRINUSE:
    return "local port " + port + " on " + where + " is already in use (" + describe(spec) +
           "): another program listens there; stop it or pick another local port (-L " +
           (spec.bind_address.empty() ? "" : spec.bind_address + ":") + "OTHER_PORT:" + spec.host +
           ":" + std::to_string(spec.host_port) + ")";
  case EACCES:
    return "local port " + port + " on " + where + " needs privileges to listen on (" +
           describe(spec) + "): pick a port from 1024 up";
  case EADDRNOTAVAIL:
    return "'" + where + "' is not an address of this machine (" + describe(spec) +
           "): give one of its addresses, or none for loopback";
  default:
    return "cannot listen on " + where + " port " + port + " (" + describe(spec) +
           "): " + std::strerror(err);
  }
}

} // namespace

ForwardSet::ForwardSet(std::vector<ForwardSpec> specs, bool ipv4, ForwardNotice notice)
    : m_specs(std::move(specs)), m_ipv4(ipv4), m_notice(std::move(notice)) {}

ForwardSet::~ForwardSet() {
  for (const auto& l : m_listeners) {
    ::close(l.fd);
  }
}

void ForwardSet::notice(const std::string& text) const {
  if (m_notice) {
    m_notice(text);
  } else {
    spdlog::info("{}", text);
  }
}

Status ForwardSet::bind() {
  std::vector<Listener> bound;
  auto fail = [&](const std::string& message) -> Status {
    for (const auto& l : bound) {
      ::close(l.fd);
    }
    return Error(ErrorKind::failure, message);
  };
  for (size_t i = 0; i < m_specs.size(); ++i) {
    const ForwardSpec& spec = m_specs[i];
    if (spec.kind != ForwardKind::local) {
      continue;
    }
    for (const auto& target : bind_targets(spec, m_ipv4)) {
      addrinfo hints{};
      hints.ai_family = m_ipv4 ? AF_INET : AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
      addrinfo* found = nullptr;
      const std::string port = std::to_string(spec.port);
      const int rc = ::getaddrinfo(target.host.c_str(), port.c_str(), &hints, &found);
      if (rc != 0) {
        if (target.optional) {
          continue;
        }
        return fail("cannot listen on '" + util::printable(target.host) + "' (" + describe(spec) +
                    "): " + ::gai_strerror(rc) + (m_ipv4 ? " (with -4: IPv4 only)" : ""));
      }
      size_t bound_here = 0;
      for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const std::string where = address_text(a->ai_addr);
        const std::string where_host = where.substr(0, where.rfind(':'));
        const int fd =
            ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
          if (target.optional || a->ai_family == AF_INET6) {
            continue; // no IPv6 here
          }
          const int err = errno;
          ::freeaddrinfo(found);
          return fail(bind_failure(spec, where_host, err));
        }
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (a->ai_family == AF_INET6) {
          ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        }
        if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
          const int err = errno;
          ::close(fd);
          const bool no_v6 =
              a->ai_family == AF_INET6 && (err == EADDRNOTAVAIL || err == EAFNOSUPPORT);
          if (no_v6 && (target.optional || a->ai_next != nullptr || bound_here > 0)) {
            continue; // this host has no IPv6 loopback: IPv4 carries it
          }
          ::freeaddrinfo(found);
          return fail(bind_failure(spec, where_host, err));
        }
        bound.push_back({fd, i, where});
        ++bound_here;
        spdlog::debug("{}: listening on {}", describe(spec), where);
      }
      ::freeaddrinfo(found);
      if (bound_here == 0 && !target.optional) {
        return fail("cannot listen on '" + util::printable(target.host) + "' (" + describe(spec) +
                    "): no usable address");
      }
    }
  }
  m_listeners = std::move(bound);
  return tpuctl::ok();
}

Expected<std::shared_ptr<ForwardSet>> bind_forwards(std::vector<ForwardSpec> specs, bool ipv4,
                                                    ForwardNotice notice) {
  auto set = std::make_shared<ForwardSet>(std::move(specs), ipv4, std::move(notice));
  TPUCTL_TRY(set->bind());
  return set;
}

} // namespace tpuctl::remote
