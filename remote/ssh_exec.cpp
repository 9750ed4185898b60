// Running one command on an established session, and killing it for real.
//
// Output: channel callbacks receive stdout and stderr as packets arrive and always consume all
// of it, so libssh returns window credit at once and a full stderr can never stall stdout (the
// classic read-stdout-to-EOF-then-stderr deadlock). A per-session ssh_event drives the socket in
// slices of at most 100 ms, between which the loop checks the deadline, the cancel token, feeds
// --stdin data within the remote window and sends keepalives when the line is idle.
//
// Exit: exit-status and exit-signal both arrive as channel requests (in 0.10 a signal death
// leaves the exit status at -1, so the signal callback is the only way to see it).
//
// Forwards (ExecRequest::forwards, remote/forward_pump.hpp): their listening and connected
// sockets join the same wait as the session's socket, and they are pumped on this thread between
// waits, so the command and its tunnels share the session without a second thread.
//
// Kill: closing a channel does not stop a remote command without a PTY, and sshd refuses the
// "signal" channel request for root logins ("session signalling requires privilege separation",
// measured with OpenSSH 9.2). So on timeout or Ctrl-C tpuctl sends the signal request (enough for
// unprivileged users) AND opens a second channel on the same connection that runs a small kill
// script. The script finds its sibling sessions (children of the same sshd connection process:
// sshd makes every session's shell a session leader) and signals each one's process group, then
// signals every process still carrying this command's TPUCTL_RUN nonce in its environment
// (orphans whose session leader already exited, or that called setsid or setpgid). TERM first,
// KILL after SshOptions::kill_grace if the channel has not closed. The command is prefixed with
// `export TPUCTL_RUN=<nonce>` for that purpose.
//
// Lost connections: when the connection dies instead (tpuctl killed, the network cut, the
// session's sshd killed), nobody is left to send that kill, and a command without a PTY runs on
// as an orphan. So the prefix also starts a reaper next to the command: a tiny sh loop, with its
// fds on /dev/null so it never holds the channel open, that checks once a second whether the
// command's shell and the sshd session process above it are alive. The shell gone first is a
// normal end (the reaper exits and leaves anything the user backgrounded alone); the session
// gone while the shell still runs is a lost connection, and the reaper signals every process
// carrying the nonce, TERM then KILL. It runs without TPUCTL_RUN in its own environment, so it
// never matches itself.
#include <memory>
#include <optional>
#include <poll.h>
#include <random>
#include <string>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/server.h> // ssh_send_keepalive (it works on client sessions)
#include <spdlog/spdlog.h>

#include "remote/forward_pump.hpp"
#include "remote/ssh_session.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote::detail {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// State shared with libssh's channel callbacks.
struct ChannelState {
  const ExecSink* sink = nullptr;
  bool discard = false; // kill-script channels: output is dropped
  bool exit_status_seen = false;
  int exit_status = -1;
  std::string signal_name;
  bool eof = false;
  bool closed = false;
  uint64_t bytes = 0;
  // A held command (ExecRequest::hold_mark): "\n" + mark + " " is looked for in stdout, which
  // is passed on except for a tail that could be the start of it; then `held_status` is set.
  std::string hold_mark;
  std::string held_back;
  std::optional<int> held_status;
  ssh_channel_callbacks_struct callbacks{};

  void deliver(Stream stream, const char* data, size_t len) const {
    if (!discard && sink != nullptr && *sink && len > 0) {
      (*sink)(stream, data, len);
    }
  }
  // stdout while the mark is awaited.
  void watch_for_mark(const char* data, size_t len) {
    held_back.append(data, len);
    const size_t at = held_back.find(hold_mark);
    if (at != std::string::npos) {
      const size_t eol = held_back.find('\n', at + hold_mark.size());
      if (eol == std::string::npos) {
        deliver(Stream::out, held_back.data(), at);
        held_back.erase(0, at);
        return; // the status is still on its way
      }
      int status = -1;
      try {
        status = std::stoi(held_back.substr(at + hold_mark.size(), eol - at - hold_mark.size()));
      } catch (const std::exception&) {
        status = -1; // a garbled status line: part one failed
      }
      deliver(Stream::out, held_back.data(), at);
      const std::string rest = held_back.substr(eol + 1);
      held_back.clear();
      hold_mark.clear();
      held_status = status;
      deliver(Stream::out, rest.data(), rest.size());
      return;
    }
    const size_t keep = std::min(held_back.size(), hold_mark.size());
    deliver(Stream::out, held_back.data(), held_back.size() - keep);
    held_back.erase(0, held_back.size() - keep);
  }
  // At the end: whatever was held back was output after all.
  void flush_held_back() {
    deliver(Stream::out, held_back.data(), held_back.size());
    held_back.clear();
  }
};

int on_data(ssh_session, ssh_channel, void* data, uint32_t len, int is_stderr, void* user) {
  auto* st = static_cast<ChannelState*>(user);
  st->bytes += len;
  if (!is_stderr && !st->hold_mark.empty() && !st->discard) {
    st->watch_for_mark(static_cast<const char*>(data), len);
  } else {
    st->deliver(is_stderr ? Stream::err : Stream::out, static_cast<const char*>(data), len);
  }
  return static_cast<int>(len);
}

void on_exit_status(ssh_session, ssh_channel, int status, void* user) {
  auto* st = static_cast<ChannelState*>(user);
  st->exit_status_seen = true;
  st->exit_status = status;
}

void on_exit_signal(ssh_session, ssh_channel, const char* signal, int, const char*, const char*,
                    void* user) {
  static_cast<ChannelState*>(user)->signal_name = signal ? signal : "?";
}

void on_eof(ssh_session, ssh_channel, void* user) {
  static_cast<ChannelState*>(user)->eof = true;
}

void on_close(ssh_session, ssh_channel, void* user) {
  static_cast<ChannelState*>(user)->closed = true;
}

void attach(ssh_channel ch, ChannelState& st) {
  st.callbacks = {};
  st.callbacks.userdata = &st;
  st.callbacks.channel_data_function = on_data;
  st.callbacks.channel_exit_status_function = on_exit_status;
  st.callbacks.channel_exit_signal_function = on_exit_signal;
  st.callbacks.channel_eof_function = on_eof;
  st.callbacks.channel_close_function = on_close;
  ssh_callbacks_init(&st.callbacks);
  ssh_set_channel_callbacks(ch, &st.callbacks);
}

std::string random_nonce() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 20; ++i) {
    out += k_hex[rng() & 15];
  }
  return out;
}

// POSIX sh, run by the login shell of a second channel on the same connection. Its cost is the
// connection's own processes plus one pass over the environments: the sibling sessions come from
// /proc/PPID/task/*/children (pgrep -P where a kernel lacks it) and each is signalled as a whole
// process group, never with a pkill that scans the process table once per sibling. It ends at
// once when its connection is gone (the reaper's case).
std::string kill_script(const std::string& nonce, const char* signal) {
  std::string s = signal;
  return "s=" + s +
         "; m=$$\n"
         "c=$(cat /proc/\"$PPID\"/task/*/children 2>/dev/null)\n"
         "[ -n \"$c\" ] || c=$(pgrep -P \"$PPID\" 2>/dev/null)\n"
         "for p in $c; do\n"
         "  [ \"$p\" = \"$m\" ] || kill -$s -- \"-$p\" 2>/dev/null || kill -$s \"$p\" 2>/dev/null\n"
         "done\n"
         "kill -0 \"$PPID\" 2>/dev/null || exit 0\n"
         "for f in $(grep -lzx 'TPUCTL_RUN=" +
         nonce +
         "' /proc/[0-9]*/environ 2>/dev/null); do\n"
         "  f=${f#/proc/}; kill -$s \"${f%%/*}\" 2>/dev/null\n"
         "done\n"
         "exit 0\n";
}

// The reaper (see the top of this file). $1: the sshd session process, $2: the command's shell,
// $3: the nonce.
constexpr const char* k_reaper_script =
    "while kill -0 \"$1\" 2>/dev/null; do\n"
    "  kill -0 \"$2\" 2>/dev/null || exit 0\n"
    "  sleep 1\n"
    "done\n"
    "kill -0 \"$2\" 2>/dev/null || exit 0\n"
    "for s in TERM KILL; do\n"
    "  for f in $(grep -lzx \"TPUCTL_RUN=$3\" /proc/[0-9]*/environ 2>/dev/null); do\n"
    "    f=${f#/proc/}; kill -$s \"${f%%/*}\" 2>/dev/null\n"
    "  done\n"
    "  sleep 2\n"
    "done\n";

} // namespace

std::string wrap_command(const std::string& nonce, const std::string& command, bool reap) {
  if (!reap) {
    return "export TPUCTL_RUN=" + nonce + "\n" + command;
  }
  // A subshell that unsets the nonce and execs sh: one process image fewer than `env -u
  // TPUCTL_RUN sh`, and no copy of the command line (a tag in it stays the command's alone). In
  // a subshell $$ and $PPID are still the command shell's.
  return "export TPUCTL_RUN=" + nonce + "\n(unset TPUCTL_RUN; exec sh -c '" + k_reaper_script +
         "' tpuctl-reaper \"$PPID\" \"$$\" " + nonce + ") </dev/null >/dev/null 2>&1 &\n" + command;
}

namespace {

// A channel running the kill script; owned by exec() until the loop ends.
struct KillChannel {
  ssh_channel channel = nullptr;
  ChannelState state;
};

} // namespace

ExecResult SshSession::exec(const ExecRequest& request, const ExecSink& sink) {
  ExecResult result;
  ssh_session s = m_session;
  ChannelState st;
  st.sink = &sink;
  ssh_channel ch = ssh_channel_new(s);
  if (ch == nullptr) {
    result.error = "cannot create a channel to " + m_label;
    return result;
  }
  attach(ch, st);
  // Output can arrive while the exec request is still being answered: watch from the start.
  const bool held = !request.hold_mark.empty() && request.on_hold;
  if (held) {
    st.hold_mark = "\n" + request.hold_mark + " ";
  }
  std::vector<std::unique_ptr<KillChannel>> killers;
  auto cleanup = [&]() {
    for (auto& k : killers) {
      ssh_channel_close(k->channel);
      ssh_channel_free(k->channel);
    }
    ssh_channel_close(ch);
    ssh_channel_free(ch);
  };
  // Forwards first: a -R the server refuses fails the command before it starts.
  std::unique_ptr<ForwardPump> pump;
  if (request.forwards != nullptr) {
    pump = std::make_unique<ForwardPump>(s, *request.forwards, m_label);
    if (std::string why = pump->start(); !why.empty()) {
      result.error = why;
      ssh_channel_free(ch);
      return result;
    }
  }
  if (ssh_channel_open_session(ch) != SSH_OK) {
    result.outcome = m_ctx.cancelled() ? Outcome::interrupted : Outcome::error;
    result.error = "cannot open a session channel on " + m_label + ": " + ssh_get_error(s);
    ssh_channel_free(ch);
    return result;
  }
  if (m_options.tty && ssh_channel_request_pty_size(ch, "xterm", 200, 50) != SSH_OK) {
    result.error = "the server refused a pty on " + m_label + ": " + ssh_get_error(s);
    cleanup();
    return result;
  }
  // From here on the command may be running, so the watcher must not cut the socket: this
  // thread kills the command itself. A stream's socket may be cut: its command ends with its
  // connection, and a cancel then wakes this thread at once whatever its poll slice.
  if (!request.stream) {
    m_ctx.slot.disarm();
  }
  if (m_ctx.cancelled()) {
    result.outcome = Outcome::interrupted;
    result.error = "interrupted before the command started";
    cleanup();
    return result;
  }
  const std::string nonce = random_nonce();
  const std::string wrapped = wrap_command(nonce, request.command, request.reap);
  if (ssh_channel_request_exec(ch, wrapped.c_str()) != SSH_OK) {
    result.error = "the server refused to run the command on " + m_label + ": " + ssh_get_error(s);
    cleanup();
    return result;
  }
  const InputBytes* input = request.stdin_data.get();
  uint64_t input_off = 0;
  std::string input_buffer; // a piece of a spooled input, read from its file
  bool input_done = input == nullptr || input->empty();
  std::shared_ptr<const InputBytes> held_input; // the answer to the hold, written instead
  if (held) {
    input = nullptr;
    input_done = true; // stdin stays open: the first part's end is answered on it
  } else if (input_done && !request.stream) {
    ssh_channel_send_eof(ch);
  }

  ssh_event event = ssh_event_new();
  ssh_event_add_session(event, s);
  // A stream's control input wakes the loop as it is written (StreamInput's eventfd).
  StreamInput* control = request.stream ? request.input.get() : nullptr;
  std::string control_out; // taken from `control`, not yet sent
  if (control != nullptr && control->wake_fd() >= 0) {
    ssh_event_add_fd(
        event, control->wake_fd(), POLLIN, [](socket_t, int, void*) { return 0; }, nullptr);
  }
  const auto start = Clock::now();
  milliseconds timeout = request.timeout;
  auto deadline = timeout.count() > 0 ? start + timeout : Clock::time_point::max();
  bool hold_answered = false;
  auto last_activity = start;
  uint64_t last_bytes = 0;
  enum class Kill { none, term, kill } kill_phase = Kill::none;
  Outcome kill_reason = Outcome::ok;
  auto phase_start = start;
  bool lost = false;
  bool abandoned = false;
  bool closed_stream = false;

  auto start_kill_channel = [&](const char* signal) {
    ssh_channel_request_send_signal(ch, signal);
    auto k = std::make_unique<KillChannel>();
    k->state.discard = true;
    k->channel = ssh_channel_new(s);
    if (k->channel == nullptr) {
      return;
    }
    attach(k->channel, k->state);
    std::string script = kill_script(nonce, signal);
    if (ssh_channel_open_session(k->channel) != SSH_OK ||
        ssh_channel_request_exec(k->channel, script.c_str()) != SSH_OK) {
      spdlog::debug("{}: cannot start the kill script: {}", m_label, ssh_get_error(s));
      ssh_channel_free(k->channel);
      return;
    }
    ssh_channel_send_eof(k->channel);
    killers.push_back(std::move(k));
  };
  auto killers_done = [&]() {
    for (auto& k : killers) {
      if (!k->state.closed) {
        return false;
      }
    }
    return true;
  };

  while (true) {
    auto now = Clock::now();
    if (st.closed && killers_done()) {
      break;
    }
    if (kill_phase == Kill::none && !st.closed) {
      if (request.stream && m_ctx.cancelled()) {
        closed_stream = true; // the command ends when its stdin does: no kill script
        break;
      }
      if (m_ctx.cancelled() || now >= deadline) {
        kill_reason = m_ctx.cancelled() ? Outcome::interrupted : Outcome::timeout;
        spdlog::debug("{}: {}; sending TERM", m_label,
                      kill_reason == Outcome::timeout ? "timed out" : "interrupted");
        start_kill_channel("TERM");
        kill_phase = Kill::term;
        phase_start = now;
      }
    } else if (kill_phase == Kill::term && !st.closed &&
               now >= phase_start + m_options.kill_grace) {
      spdlog::debug("{}: still running {} after TERM; sending KILL", m_label,
                    util::format_duration(m_options.kill_grace));
      start_kill_channel("KILL");
      kill_phase = Kill::kill;
      phase_start = now;
    } else if (kill_phase != Kill::none && now >= phase_start + milliseconds(5000)) {
      abandoned = !st.closed;
      break;
    }
    if (held && !hold_answered && st.held_status && kill_phase == Kill::none && !st.closed) {
      // The first part is done: the caller decides what comes next (this may wait for others).
      HoldAnswer answer = request.on_hold(*st.held_status);
      hold_answered = true;
      held_input = InputBytes::of(std::move(answer.input));
      input = held_input.get();
      input_off = 0;
      now = Clock::now();
      timeout = answer.timeout;
      deadline = timeout.count() > 0 ? now + timeout : Clock::time_point::max();
      last_activity = now;
      input_done = held_input->empty();
      if (input_done) {
        ssh_channel_send_eof(ch);
      }
    }
    if (!input_done && kill_phase == Kill::none && !st.closed) {
      uint32_t window = ssh_channel_window_size(ch);
      if (window > 0) {
        std::string unread;
        const std::string_view piece = input->read(
            input_off, std::min<size_t>(window, size_t{256} << 10), input_buffer, &unread);
        const int w = piece.empty() ? 0
                                    : ssh_channel_write(ch, piece.data(),
                                                        static_cast<uint32_t>(piece.size()));
        if (piece.empty()) { // the spool could not be read: the command's stdin ends here
          spdlog::warn("{}: {}; the command's stdin ends there", m_label, unread);
          input_done = true;
          ssh_channel_send_eof(ch);
        } else if (w < 0) {
          input_done = true; // the remote closed its stdin; the exit status will tell
        } else {
          input_off += static_cast<uint64_t>(w);
          if (input_off >= input->size()) {
            input_done = true;
            ssh_channel_send_eof(ch);
          }
        }
        last_activity = now;
      }
    }
    if (control != nullptr && kill_phase == Kill::none && !st.closed) {
      control_out += control->take();
      uint32_t window = control_out.empty() ? 0 : ssh_channel_window_size(ch);
      if (window > 0) {
        const size_t n = std::min<size_t>(window, control_out.size());
        const int w = ssh_channel_write(ch, control_out.data(), static_cast<uint32_t>(n));
        if (w > 0) {
          control_out.erase(0, static_cast<size_t>(w));
        }
        last_activity = now;
      }
    }
    if (st.bytes != last_bytes) {
      last_bytes = st.bytes;
      last_activity = now;
    }
    if (m_options.keepalive_interval.count() > 0 &&
        now - last_activity >= m_options.keepalive_interval) {
      ssh_send_keepalive(s);
      last_activity = now;
    }
    // Without an eventfd, a stream's control input is looked for every 100 ms.
    const int slice = static_cast<int>(control != nullptr && control->wake_fd() < 0
                                           ? std::min<int64_t>(100, request.poll_slice.count())
                                           : request.poll_slice.count());
    int wait_ms = slice;
    if ((!input_done || !control_out.empty()) && kill_phase == Kill::none &&
        ssh_channel_window_size(ch) > 0) {
      wait_ms = 0; // more stdin can go out now: only pick up what already arrived
    } else if (deadline != Clock::time_point::max() && kill_phase == Kill::none) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - now).count();
      wait_ms = static_cast<int>(std::clamp<int64_t>(left, 0, slice));
    }
    // The forwards' sockets wake the same wait; they are pumped while the command runs.
    std::vector<pollfd> forward_fds;
    const bool forwarding = pump && kill_phase == Kill::none && !st.closed;
    if (forwarding) {
      pump->want(forward_fds);
      add_to_event(event, forward_fds);
      if (pump->ready()) {
        wait_ms = 0;
      }
    }
    int rc = ssh_event_dopoll(event, wait_ms);
    if (forwarding) {
      remove_from_event(event, forward_fds);
      pump->service(forward_fds.data(), forward_fds.size());
    }
    if (rc == SSH_ERROR || (ssh_get_status(s) & (SSH_CLOSED | SSH_CLOSED_ERROR)) != 0) {
      if (request.stream && m_ctx.cancelled()) {
        closed_stream = true; // the watcher cut it
      } else if (!st.closed) {
        lost = true;
      }
      break;
    }
  }
  if (control != nullptr && control->wake_fd() >= 0) {
    ssh_event_remove_fd(event, control->wake_fd());
  }
  ssh_event_remove_session(event, s);
  ssh_event_free(event);
  pump.reset(); // the tunnels end with the command
  st.flush_held_back();

  if (closed_stream) {
    result.outcome = Outcome::interrupted;
    result.error = "interrupted; the stream was closed";
  } else if (kill_reason != Outcome::ok) {
    result.outcome = kill_reason;
    result.error = kill_reason == Outcome::timeout
                       ? "timed out after " + util::format_duration(timeout) +
                             "; the remote command was killed"
                       : std::string("interrupted; the remote command was killed");
    if (abandoned || lost) {
      result.error += " (its end could not be confirmed)";
    }
  } else if (lost) {
    result.outcome = Outcome::error;
    result.error = std::string("connection to ") + m_label + " lost: " + ssh_get_error(s);
  } else if (!st.signal_name.empty()) {
    result.outcome = Outcome::signal;
    result.signal_name = st.signal_name;
    result.signal_number = signal_number(st.signal_name);
  } else if (st.exit_status_seen) {
    result.exit_code = st.exit_status;
    result.outcome = st.exit_status == 0 ? Outcome::ok : Outcome::exit_code;
  } else {
    result.outcome = Outcome::error;
    result.error = "the remote command on " + m_label + " ended without an exit status";
  }
  cleanup();
  return result;
}

} // namespace tpuctl::remote::detail
