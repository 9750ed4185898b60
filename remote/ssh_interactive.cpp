// An interactive PTY session (remote/interactive.hpp): one channel with a PTY of the local
// terminal's size, a shell or command on it, and a relay loop polling stdin and the session's
// socket. The local terminal is put in raw mode only when stdin is one, and always restored.
// SIGWINCH marks a pending size change, forwarded on the next turn of the loop. Port forwards
// (ssh -L/-R with a shell, as the profiling guide's `tpu-vm ssh --ssh-flag="-4 -L ..."` opens)
// are pumped by the same loop: their sockets join the poll (remote/forward_pump.hpp).
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include <vector>

#include <libssh/libssh.h>

#include "remote/forward_pump.hpp"
#include "remote/interactive.hpp"
#include "remote/ssh_session.hpp"
#include "remote/worker_pool.hpp"

namespace tpuctl::remote {

namespace detail {

namespace {

volatile std::sig_atomic_t g_resized = 0;

void on_winch(int) {
  g_resized = 1;
}

// Raw mode on the local terminal for the lifetime of the object (nothing when stdin is not one).
class RawTerminal {
public:
  RawTerminal() {
    if (::isatty(STDIN_FILENO) && ::tcgetattr(STDIN_FILENO, &m_saved) == 0) {
      termios raw = m_saved;
      ::cfmakeraw(&raw);
      m_active = ::tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
    }
  }
  ~RawTerminal() {
    if (m_active) {
      ::tcsetattr(STDIN_FILENO, TCSADRAIN, &m_saved);
    }
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

private:
  termios m_saved{};
  bool m_active = false;
};

void window_size(int& cols, int& rows) {
  winsize ws{};
  cols = 80;
  rows = 24;
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    cols = ws.ws_col;
    rows = ws.ws_row;
  }
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

} // namespace

int SshSession::interactive(const std::string& command, std::string& error, ForwardSet* forwards,
                            const CancelToken* cancel) {
  m_ctx.slot.disarm();
  std::unique_ptr<ForwardPump> pump;
  if (forwards != nullptr) {
    pump = std::make_unique<ForwardPump>(m_session, *forwards, m_label);
    if (error = pump->start(); !error.empty()) {
      return 255;
    }
  }
  ssh_channel ch = ssh_channel_new(m_session);
  if (ch == nullptr || ssh_channel_open_session(ch) != SSH_OK) {
    error = std::string("cannot open a session channel: ") + ssh_get_error(m_session);
    if (ch != nullptr) {
      ssh_channel_free(ch);
    }
    return 255;
  }
  int cols = 80, rows = 24;
  window_size(cols, rows);
  const char* term = std::getenv("TERM");
  std::string term_name = term != nullptr && *term ? term : "xterm";
  // A terminal only for a terminal, as ssh decides without -t: with stdin a file or a pipe the
  // remote shell reads it as a script and ends at its end (a pty would wait for more forever).
  const bool tty = ::isatty(STDIN_FILENO) != 0;
  if ((tty && ssh_channel_request_pty_size(ch, term_name.c_str(), cols, rows) != SSH_OK) ||
      (command.empty() ? ssh_channel_request_shell(ch)
                       : ssh_channel_request_exec(ch, command.c_str())) != SSH_OK) {
    error = std::string("the host refused the terminal session: ") + ssh_get_error(m_session);
    ssh_channel_free(ch);
    return 255;
  }
  struct sigaction act {
  }, old{};
  act.sa_handler = on_winch;
  sigemptyset(&act.sa_mask);
  ::sigaction(SIGWINCH, &act, &old);
  int status = 255;
  bool cancelled = false;
  {
    RawTerminal raw;
    bool stdin_open = true;
    char buf[16384];
    std::vector<pollfd> fds;
    while (ssh_channel_is_open(ch) && !ssh_channel_is_eof(ch)) {
      if (cancel != nullptr && cancel->cancelled()) {
        cancelled = true; // SIGINT or SIGTERM: the caller reports it
        break;
      }
      if (tty && g_resized) {
        g_resized = 0;
        window_size(cols, rows);
        ssh_channel_change_pty_size(ch, cols, rows);
      }
      // The session, stdin while it is open, then the forwards' sockets.
      fds.assign({{ssh_get_fd(m_session), POLLIN, 0}, {stdin_open ? STDIN_FILENO : -1, POLLIN, 0}});
      if (pump) {
        pump->want(fds);
      }
      int n = ::poll(fds.data(), fds.size(), pump && pump->ready() ? 0 : 200);
      if (n < 0 && errno != EINTR) {
        error = "poll failed";
        break;
      }
      if (pump && n >= 0) {
        pump->service(fds.data() + 2, fds.size() - 2);
      }
      if (stdin_open && n > 0 && (fds[1].revents & (POLLIN | POLLHUP))) {
        ssize_t got = ::read(STDIN_FILENO, buf, sizeof buf);
        if (got > 0) {
          if (ssh_channel_write(ch, buf, static_cast<uint32_t>(got)) < 0) {
            error = std::string("connection lost: ") + ssh_get_error(m_session);
            break;
          }
        } else if (got == 0 || errno != EINTR) {
          stdin_open = false;
          ssh_channel_send_eof(ch);
        }
      }
      for (int is_stderr : {0, 1}) {
        int got;
        while ((got = ssh_channel_read_nonblocking(ch, buf, sizeof buf, is_stderr)) > 0) {
          write_all(is_stderr ? STDERR_FILENO : STDOUT_FILENO, buf, static_cast<size_t>(got));
        }
        if (got == SSH_ERROR) {
          error = std::string("connection lost: ") + ssh_get_error(m_session);
        }
      }
      if (!error.empty()) {
        break;
      }
    }
    // Whatever arrived with the end.
    for (int is_stderr : {0, 1}) {
      int got;
      while ((got = ssh_channel_read_nonblocking(ch, buf, sizeof buf, is_stderr)) > 0) {
        write_all(is_stderr ? STDERR_FILENO : STDOUT_FILENO, buf, static_cast<size_t>(got));
      }
    }
  }
  ::sigaction(SIGWINCH, &old, nullptr);
  pump.reset(); // the tunnels end with the shell
  if (cancelled) {
    status = 130; // the shell is left running: closing the channel hangs its terminal up
  } else if (error.empty()) {
    int exit = ssh_channel_get_exit_status(ch);
    status = exit >= 0 ? exit : 255;
  }
  ssh_channel_close(ch);
  ssh_channel_free(ch);
  return status;
}

} // namespace detail

Expected<int> run_interactive(const SshTarget& target, const SshOptions& options,
                              const std::string& command, ForwardSet* forwards,
                              const CancelToken* cancel) {
  TPUCTL_TRY_ASSIGN(auto identities, detail::prepare_run({&target}, options));
  detail::install_thread_logging();
  detail::WorkerSlot slot;
  detail::ThreadKeys keys;
  detail::WorkerContext ctx{slot, keys, identities, nullptr};
  detail::SshSession session(ctx, options);
  if (auto failure = session.connect(target)) {
    return Error(is_transport_failure(failure->outcome) && failure->outcome == Outcome::auth
                     ? ErrorKind::auth
                     : ErrorKind::failure,
                 target.display_name() + ": " + failure->message,
                 std::string(to_string(failure->outcome)));
  }
  std::string error;
  int status = session.interactive(command, error, forwards, cancel);
  if (!error.empty()) {
    return Error(ErrorKind::failure, target.display_name() + ": " + error,
                 std::string(to_string(Outcome::error)));
  }
  return status;
}

} // namespace tpuctl::remote
