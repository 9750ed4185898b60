// Internal to remote/: the forwards of one connected session, pumped by the loop of the thread
// that owns it (libssh's rule: a session and its channels are never used from two threads).
// The loop asks which descriptors to wait on (want), waits on them together with the session's
// socket (its own poll, or an ssh_event: add_to_event), then lets the pump act (service):
// accept -L connections and open their direct-tcpip channels (without blocking: the open is
// finished on later turns), take -R connections the server offers and connect them locally
// (non-blocking too), and move bytes both ways within the channel window and the socket's room.
#pragma once

#include <memory>
#include <poll.h>
#include <string>
#include <vector>

#include <libssh/libssh.h>

#include "remote/forwarding.hpp"

namespace tpuctl::remote::detail {

class ForwardPump {
public:
  ForwardPump(ssh_session session, ForwardSet& forwards, std::string label);
  ~ForwardPump(); // closes every tunnel (socket and channel)
  ForwardPump(const ForwardPump&) = delete;
  ForwardPump& operator=(const ForwardPump&) = delete;

  // Asks the server for every -R forward (a blocking global request each; a port 0 gets the
  // port the server picked, told through ForwardSet::notice). Returns why one was refused, or
  // an empty string.
  std::string start();

  // Appends the descriptors to wait on now, with the events each needs.
  void want(std::vector<pollfd>& fds) const;
  // Acts on what the wait found: `fds` (n entries) as want() appended them, revents filled.
  // Also looks for connections the server forwards (-R) and finished channel opens.
  void service(const pollfd* fds, size_t n);
  // True when service() has work that needs no wait (bytes a channel holds and the socket can
  // take): the loop should not block.
  bool ready() const;

private:
  struct Tunnel;
  void accept_from(const ForwardSet::Listener& listener);
  void take_remote_connections();
  void pump(Tunnel& t, short revents);
  void close_tunnel(Tunnel& t);

  ssh_session m_session;
  ForwardSet& m_forwards;
  std::string m_label;
  std::vector<uint16_t> m_bound; // per spec: the -R port the server listens on
  std::vector<std::unique_ptr<Tunnel>> m_tunnels;
};

// Registers `fds` (as want() filled them) with `event`, each fd's revents written back into its
// pollfd by the event's callback, for a loop driven by ssh_event_dopoll. remove_from_event undoes
// it. `fds` must not be resized in between.
void add_to_event(ssh_event event, std::vector<pollfd>& fds);
void remove_from_event(ssh_event event, const std::vector<pollfd>& fds);

} // namespace tpuctl::remote::detail
