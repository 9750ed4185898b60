// The vocabulary of the fan-out engine: where to connect (SshTarget), how (SshOptions), what to
// run (Job), what came back (HostResult), and how results stream out while hosts run
// (FanoutCallbacks). Nothing here talks to the network; see fanout.hpp and push.hpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "remote/input_bytes.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

// One host to reach over SSH.
struct SshTarget {
  std::string name;             // shown in output ("[name] line"); the address when empty
  std::string address;          // host name or IP; ~/.ssh/config may map it (Hostname)
  uint16_t port = 0;            // 0: from ~/.ssh/config, else 22
  std::string user;             // empty: from ~/.ssh/config, else the local user
  std::string identity_file;    // private key; empty: ssh-agent, then the default keys
  std::string known_hosts_file; // empty: from ~/.ssh/config, else ~/.ssh/known_hosts
  // Further ssh_config keywords applied after ~/.ssh/config: ProxyCommand, Ciphers,
  // KexAlgorithms, HostKeyAlgorithms, Compression. Others are rejected before any connection.
  std::map<std::string, std::string> extra;
  // Jump hosts (remote/jump_spec.hpp: "[user@]host[:port][,...]", or "none"), reached by
  // tpuctl itself (remote/jump_hub.hpp). Empty: ssh_config's ProxyJump for the host, if any.
  std::string proxy_jump;

  const std::string& display_name() const { return name.empty() ? address : name; }
};

// --strict-host-key-checking. `yes` refuses unknown keys; `accept_new` records them; `no`
// connects to them without recording them. A changed key is refused under every policy.
enum class HostKeyPolicy { yes, accept_new, no };

// The passphrase of the encrypted identity file `path`, asked once per file and run. Errors
// (auth): why none can be had ("no passphrase was given").
using PassphraseSource = std::function<Expected<std::string>(const std::string& path)>;

struct SshOptions {
  HostKeyPolicy host_key_policy = HostKeyPolicy::yes;
  std::chrono::milliseconds connect_timeout{10000}; // TCP connect + banner + key exchange
  // A connection that fails transiently (no banner or key exchange in time, reset during the
  // handshake: ssh_session.hpp Failure::transient) is tried again this many times, after
  // 0.25 s, 0.5 s, 1 s ..., each try's connect timeout `connect_timeout_growth` times the
  // last's; nothing has run yet, so a retry never runs a command twice. A broadcast retries once
  // at the same timeout; provisioning retries more, with growing timeouts, within its deadline.
  int connect_retries = 1;
  int connect_timeout_growth = 1;
  std::chrono::milliseconds command_timeout{0};        // 0: none; then the command is killed
  std::chrono::milliseconds keepalive_interval{15000}; // keepalive@openssh.com when idle
  std::chrono::milliseconds kill_grace{1500};          // TERM -> KILL escalation delay
  size_t batch_size = 64;          // hosts in flight at once (a sliding window, not waves)
  bool use_agent = true;           // ssh-agent when a target names no identity file
  bool process_config = true;      // read ~/.ssh/config and /etc/ssh/ssh_config
  std::string config_file;         // a specific ssh_config instead (when process_config)
  std::string identity_passphrase; // for encrypted identity files (asked once by cli/)
  // Asks for the passphrase of an encrypted identity file (remote/passphrase.hpp); unset: none
  // (an encrypted file then goes to ssh-agent when there is one, else fails naming the ways out).
  PassphraseSource passphrase_source;
  bool tty = false;        // request a PTY (merges stderr; remote dies on hang-up)
  bool keep_output = true; // collect stdout/stderr into HostResult::out/err
  // Collect them into HostResult::out_spool/err_spool instead: any size in bounded memory
  // (remote/spool.hpp), for a broadcast's grouped and jsonl output.
  bool spool_output = false;
  // --stdin: the same bytes go to every host, then EOF. Null: EOF at once.
  std::shared_ptr<const InputBytes> stdin_data;
};

enum class Stream { out, err };

class Spool;

class StreamInput;
class ForwardSet;

// One command on one host. `command` is already shell-quoted; it runs through the remote
// login shell. `index` is the position reported back (worker index, job order).
struct Job {
  SshTarget target;
  std::string command;
  size_t index = 0;
  // When set, every chunk of the command's output as it arrives, raw (not split into lines),
  // called from this job's worker thread only (so it needs no lock of its own): pull_file
  // streams a remote file into a local one through it.
  std::function<void(Stream, const char* data, size_t size)> on_bytes;
  // run_streams only: what other threads write to the running command's stdin (a stream's
  // control lines: the workload monitor's stop). Null: nothing, stdin stays open and silent.
  std::shared_ptr<StreamInput> input = nullptr;
  // Port forwards (remote/forwarding.hpp) carried while this job's command runs; one job only.
  std::shared_ptr<ForwardSet> forwards = nullptr;
};

// Bytes for a running stream's stdin, written from any thread: the session that runs the stream
// wakes at once (an eventfd it polls with its socket) and sends them as the channel's window
// allows. Bytes written after the stream ended go nowhere.
class StreamInput {
public:
  StreamInput();
  ~StreamInput();
  StreamInput(const StreamInput&) = delete;
  StreamInput& operator=(const StreamInput&) = delete;

  void write(std::string_view data);
  // The session's side: the descriptor to poll (-1 when eventfd failed: it polls in slices),
  // what was written since the last take (and clears the wake-up).
  int wake_fd() const { return m_fd; }
  std::string take();

private:
  std::mutex m_mutex;
  std::string m_pending;
  int m_fd = -1;
};

// How one host ended. Transport failures are refused..error; everything from ok to
// interrupted means the session was established.
enum class Outcome {
  ok,               // exit status 0
  exit_code,        // exited with a non-zero status
  signal,           // killed by a signal (remote `kill -9 $$`)
  timeout,          // ran past SshOptions::command_timeout and was killed
  interrupted,      // cancelled (Ctrl-C) and killed, or never started
  refused,          // TCP connection refused
  unreachable,      // no route, name not resolved, or no SSH banner within the connect timeout
  auth,             // the server refused every key
  host_key_unknown, // not in known_hosts and the policy is `yes`
  host_key_changed, // known_hosts holds a different key: possible man-in-the-middle
  error,            // any other failure: protocol error, connection lost, remote I/O failure
};

std::string_view to_string(Outcome outcome);
// True for refused, unreachable, auth, host_key_unknown, host_key_changed and error.
bool is_transport_failure(Outcome outcome);
// The Linux number of a signal named as in SSH exit-signal requests ("KILL" -> 9); 0 if unknown.
int signal_number(std::string_view name);

struct HostResult {
  size_t index = 0;
  std::string host; // SshTarget::display_name()
  Outcome outcome = Outcome::error;
  int exit_code = -1;         // the remote exit status; -1 when it did not exit by itself
  int signal_number = 0;      // Linux number of signal_name, 0 when unknown or none
  std::string signal_name;    // "KILL", "TERM"... (exit-signal request), empty when none
  std::string error;          // why it failed, e.g. "connection refused (127.0.0.2:2222)"
  int64_t duration_ms = 0;    // from the start of the connection to the end
  int64_t first_byte_ms = -1; // first stdout/stderr byte, -1 when none
  std::string out;            // stdout (when SshOptions::keep_output)
  std::string err;            // stderr (when SshOptions::keep_output)
  // stdout and stderr when SshOptions::spool_output (run_fanout only), else null.
  std::shared_ptr<Spool> out_spool, err_spool;
  bool unchanged = false; // push_file: the file was already there with the same sha256

  bool succeeded() const { return outcome == Outcome::ok; }
};

// One line of remote output. `text` has no trailing newline; `complete` is false for a last
// line that had none (flushed at EOF) or for a piece of a line longer than 1 MiB.
struct HostLine {
  size_t index = 0;
  std::string_view host;
  Stream stream = Stream::out;
  std::string_view text;
  bool complete = true;
};

// Streaming callbacks. The engine calls them one at a time (never concurrently), from worker
// threads, so they need no locking; a slow callback slows every host down.
struct FanoutCallbacks {
  std::function<void(const HostLine&)> on_line;
  std::function<void(const HostResult&)> on_host_done;
  // Called after on_line has had every line of one piece of a host's output as it arrived (and
  // after a host's last, unterminated line): where a printer that buffers lines flushes them,
  // one write per arrival instead of one per line, with no line held back past its arrival.
  std::function<void()> on_lines_flush;
};

// Set from a SIGINT handler (cancel() is async-signal-safe): running commands are killed and
// the engine returns promptly, marking unfinished hosts `interrupted`.
class CancelToken {
public:
  void cancel() noexcept { m_cancelled.store(true, std::memory_order_relaxed); }
  bool cancelled() const noexcept { return m_cancelled.load(std::memory_order_relaxed); }

private:
  std::atomic<bool> m_cancelled{false};
};

} // namespace tpuctl::remote
