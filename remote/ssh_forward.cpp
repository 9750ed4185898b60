// ssh -N (remote/forwarding.hpp run_forwarding): one session that runs nothing and only carries
// port forwards, until SIGINT/SIGTERM (the CancelToken) or the connection ends. One thread owns
// the session: an ssh_event waits on its socket together with the forwards' sockets, in slices of
// 200 ms between which the loop checks the token and keeps an idle connection alive.
#include <chrono>
#include <poll.h>
#include <vector>

#include <libssh/libssh.h>
#include <libssh/server.h> // ssh_send_keepalive (it works on client sessions)

#include "remote/forward_pump.hpp"
#include "remote/forwarding.hpp"
#include "remote/ssh_session.hpp"
#include "remote/worker_pool.hpp"

namespace tpuctl::remote {

namespace detail {

std::string SshSession::forward_only(ForwardSet& forwards, const CancelToken& cancel) {
  using Clock = std::chrono::steady_clock;
  m_ctx.slot.disarm();
  ForwardPump pump(m_session, forwards, m_label);
  if (std::string why = pump.start(); !why.empty()) {
    return why;
  }
  ssh_event event = ssh_event_new();
  ssh_event_add_session(event, m_session);
  std::string error;
  std::vector<pollfd> fds;
  auto last_activity = Clock::now();
  while (!cancel.cancelled()) {
    fds.clear();
    pump.want(fds);
    add_to_event(event, fds);
    const int rc = ssh_event_dopoll(event, pump.ready() ? 0 : 200);
    remove_from_event(event, fds);
    pump.service(fds.data(), fds.size());
    if (rc == SSH_ERROR || (ssh_get_status(m_session) & (SSH_CLOSED | SSH_CLOSED_ERROR)) != 0) {
      error = "connection to " + m_label + " lost: " + ssh_get_error(m_session);
      break;
    }
    const auto now = Clock::now();
    for (const auto& p : fds) {
      if (p.revents != 0) {
        last_activity = now;
      }
    }
    if (m_options.keepalive_interval.count() > 0 &&
        now - last_activity >= m_options.keepalive_interval) {
      ssh_send_keepalive(m_session);
      last_activity = now;
    }
  }
  ssh_event_remove_session(event, m_session);
  ssh_event_free(event);
  return error;
}

} // namespace detail

Expected<int> run_forwarding(const SshTarget& target, const SshOptions& options,
                             ForwardSet& forwards, const CancelToken& cancel) {
  TPUCTL_TRY_ASSIGN(auto identities, detail::prepare_run({&target}, options));
  detail::install_thread_logging();
  detail::WorkerSlot slot;
  detail::ThreadKeys keys;
  detail::WorkerContext ctx{slot, keys, identities, &cancel};
  detail::SshSession session(ctx, options);
  if (auto failure = session.connect(target)) {
    return Error(failure->outcome == Outcome::auth ? ErrorKind::auth : ErrorKind::failure,
                 target.display_name() + ": " + failure->message,
                 std::string(to_string(failure->outcome)));
  }
  if (std::string error = session.forward_only(forwards, cancel); !error.empty()) {
    return Error(ErrorKind::failure, target.display_name() + ": " + error,
                 std::string(to_string(Outcome::error)));
  }
  return 0;
}

} // namespace tpuctl::remote
