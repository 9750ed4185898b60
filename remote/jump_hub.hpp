// Internal to remote/: jump hosts (ProxyJump) done in process. One JumpHub per bastion and run:
// a thread that owns one authenticated session to the bastion (connected, host-key-checked and
// authenticated exactly as a worker is: SshSession::connect, the run's policy, known_hosts and
// identities) and serves the run's worker threads. For each worker connection it opens a
// direct-tcpip channel to the worker's address and port, and pumps bytes between that channel
// and one end of a socketpair; the worker's own SshSession runs over the other end
// (SSH_OPTIONS_FD, with SSH_OPTIONS_HOST still the worker's name, so known_hosts is checked for
// the worker itself). Several hops: the hub of the last hop reaches its bastion through the hub
// of the hops before it, the same way. libssh's rule holds: only the hub's thread touches the
// bastion's session and channels.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "remote/jump_spec.hpp"
#include "remote/ssh_session.hpp"

namespace tpuctl::remote::detail {

class JumpHub;

// A socket connected, through the jump hosts, to the worker's sshd; or why not. `hub` keeps the
// bastion's session alive as long as the socket is used.
struct JumpSocket {
  int fd = -1;
  std::shared_ptr<JumpHub> hub;
  std::optional<Failure> failure;
};

// The hubs of one run (held by its IdentityStore): one per chain of hops, identity file and
// known_hosts file, started on first use, all ended (threads joined, sessions to the bastions
// closed) when the run ends and no session uses them any more.
class JumpHubs {
public:
  JumpHubs() = default;
  JumpHubs(const JumpHubs&) = delete;
  JumpHubs& operator=(const JumpHubs&) = delete;
  ~JumpHubs();

  // Opens a connection to host:port through `chain` (not empty) for `target`'s session. Blocks
  // until the channel is open, refused, or `ctx` is cancelled.
  JumpSocket open(WorkerContext& ctx, const SshOptions& options, const SshTarget& target,
                  const std::vector<JumpHop>& chain, const std::string& host, unsigned port);

private:
  std::mutex m_mutex;
  std::map<std::string, std::shared_ptr<JumpHub>> m_hubs;
};

} // namespace tpuctl::remote::detail
