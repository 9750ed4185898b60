// Port forwarding over one SSH session, as ssh's -L and -R do it (gcloud's --ssh-flag passes
// them on): `-L [BIND:]PORT:HOST:HOSTPORT` listens here and carries each connection to HOST:
// HOSTPORT as the worker sees it (a direct-tcpip channel); `-R [BIND:]PORT:HOST:HOSTPORT` has the
// worker's sshd listen and carries each connection there to HOST:HOSTPORT as this machine sees
// it (a forwarded-tcpip channel). libssh opens the channels; binding the local ports, accepting,
// connecting and copying the bytes both ways is tpuctl's (remote/forward_pump.cpp), in the thread
// that owns the session, in the same loop as the shell or command that runs on it.
//
// A -L listener binds like OpenSSH's with GatewayPorts=no: loopback only (127.0.0.1, and ::1
// unless -4) when no BIND is given, every interface for `*` or an empty BIND, else the addresses
// BIND names. Every -L listener is bound before any connection is made, so a port in use fails
// at once and nothing is left running; a -R the server refuses fails the session before anything
// runs on it (ssh's ExitOnForwardFailure=yes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

enum class ForwardKind { local, remote }; // -L, -R

struct ForwardSpec {
  ForwardKind kind = ForwardKind::local;
  std::string bind_address; // empty: loopback (or the server's default for -R), unless `any`
  bool any_address = false; // `*` or an empty BIND: every interface
  uint16_t port = 0;        // where to listen; 0 (-R only): the server picks
  std::string host;         // where to connect, as the other side resolves it
  uint16_t host_port = 0;
  std::string text; // the spec as given ("9001:localhost:9001")
};

// "-L 9001:localhost:9001" (the option and the spec as given). Never fails.
std::string describe(const ForwardSpec& spec);

// Parses ssh's `[BIND:]PORT:HOST:HOSTPORT` (an IPv6 address in brackets: `[::1]:9001:[::1]:80`;
// `*` or an empty BIND means every interface). PORT is 1-65535, or 0 for -R (the worker's sshd
// picks one). Errors: usage, one line naming the option and the spec, and what is wrong.
Expected<ForwardSpec> parse_forward_spec(ForwardKind kind, std::string_view text);

// Notices a forward gives while it runs ("allocated port 40123 on the worker for -R 0:..."),
// called from the thread that owns the session.
using ForwardNotice = std::function<void(const std::string&)>;

// The forwards of one session: the -L listeners (bound by bind_forwards) and the -R specs,
// handed to the session that carries them (Job::forwards, run_interactive, run_forwarding).
// Used by one session at a time.
class ForwardSet {
public:
  struct Listener {
    int fd = -1;
    size_t spec = 0;     // index in specs()
    std::string address; // "127.0.0.1:9001", "[::1]:9001"
  };
  ForwardSet(std::vector<ForwardSpec> specs, bool ipv4, ForwardNotice notice);
  ~ForwardSet(); // closes the listeners
  ForwardSet(const ForwardSet&) = delete;
  ForwardSet& operator=(const ForwardSet&) = delete;

  const std::vector<ForwardSpec>& specs() const { return m_specs; }
  const std::vector<Listener>& listeners() const { return m_listeners; }
  bool ipv4_only() const { return m_ipv4; }
  void notice(const std::string& text) const;

  // Binds and listens on every -L spec's addresses. Errors (failure), nothing left bound: a port
  // in use (naming it and the address), a port below 1024 without the privilege, an address
  // this machine does not have or cannot resolve.
  Status bind();

private:
  std::vector<ForwardSpec> m_specs;
  bool m_ipv4 = false;
  ForwardNotice m_notice;
  std::vector<Listener> m_listeners;
};

// The forwards parsed from the command line, their -L ports bound. Errors: ForwardSet::bind's.
Expected<std::shared_ptr<ForwardSet>> bind_forwards(std::vector<ForwardSpec> specs, bool ipv4,
                                                    ForwardNotice notice);

// ssh -N: connects to `target` (host-key policy, keys, agent and jump hosts as for any session),
// sets the forwards up and carries them until `cancel` (SIGINT, SIGTERM) or the connection ends.
// Returns 0 when cancelled. Errors: the connection's failure (Error::reason is the Outcome, as
// run_interactive's), a -R the server refuses, the connection lost (failure, "error").
Expected<int> run_forwarding(const SshTarget& target, const SshOptions& options,
                             ForwardSet& forwards, const CancelToken& cancel);

} // namespace tpuctl::remote
