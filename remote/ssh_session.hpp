// Internal to remote/: one blocking libssh session owned by one worker thread from connect to
// close (libssh's rule: a session and its channels are never shared between threads).
// fanout.cpp and push.cpp build on it; nothing outside remote/ includes this header.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "remote/forwarding.hpp"
#include "remote/host_cert.hpp"
#include "remote/ssh_config.hpp"
#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

struct ssh_session_struct;
struct ssh_key_struct;

namespace tpuctl::remote::detail {

// Host certificates fetched for a run (ssh_host_certs.cpp): every certificate the hosts that
// need one presented to `ssh-keyscan -c`, in one pool; a host is matched to a certificate by
// the key it proves in its session, never by where the certificate came from.
struct HostCertPool {
  std::vector<SshCertificate> certs;
  // known_hosts name -> why no certificate could be fetched for it (no ssh-keyscan, a
  // ProxyCommand host, ssh-keyscan failed).
  std::map<std::string, std::string> problems;
};
class JumpHub;
class JumpHubs;

// Decrypted identity keys for one run, loaded once before any thread starts (a passphrase-
// protected key is decrypted once, not once per host). Kept as unencrypted base64 so that each
// worker thread imports its own ssh_key object: no key object is shared between threads.
class IdentityStore {
public:
  // Loads every distinct identity file named by `targets`. An encrypted one is opened with
  // `passphrase`, else with what `source` gives; when neither gives one and `agent` (ssh-agent
  // allowed, SSH_AUTH_SOCK set), authentication for it goes through the agent. Errors (auth),
  // each naming the file: it cannot be read, is not a private key, its passphrase is wrong, or
  // it is encrypted and nothing gives its passphrase (saying how to give one).
  // Each key's user certificate is KEY-cert.pub, else the first usable CertificateFile that
  // `options`' ssh_config gives the first target naming the key (ssh_config.hpp).
  static Expected<IdentityStore> load(const std::vector<const SshTarget*>& targets,
                                      const std::string& passphrase,
                                      const PassphraseSource& source = {}, bool agent = true,
                                      const SshOptions* options = nullptr);
  const std::string* base64(const std::string& path) const;
  // The user certificate offered with `path` ("TYPE BASE64" of PATH-cert.pub), null when none.
  const std::string* certificate(const std::string& path) const;
  // The identity files the ssh_config gives `target` (a target whose record names none) that
  // have a user certificate (KEY-cert.pub or a CertificateFile), loaded: offered with their
  // certificate before libssh's own choice of keys, as ssh offers every identity's certificate.
  const std::vector<std::string>& config_certified(const SshTarget& target) const;
  // The run's host certificates (empty when no host needed one).
  const HostCertPool& host_certs() const { return *m_host_certs; }
  void set_host_certs(std::shared_ptr<const HostCertPool> pool) { m_host_certs = std::move(pool); }
  // True when `path` is encrypted and left to ssh-agent.
  bool through_agent(const std::string& path) const { return m_agent.count(path) > 0; }
  // The run's jump host sessions (jump_hub.hpp), shared by its worker threads; they end with
  // the run (the last copy of this store) once no session uses them.
  JumpHubs& jump_hubs() const { return *m_hubs; }

private:
  std::map<std::string, std::string> m_base64;
  std::map<std::string, std::string> m_certificates;
  std::set<std::string> m_agent;
  std::map<std::string, std::vector<std::string>> m_config_certified; // by target_key()
  std::shared_ptr<const HostCertPool> m_host_certs = std::make_shared<HostCertPool>();
  std::shared_ptr<JumpHubs> m_hubs; // last: ended first
};

// A worker thread's own copies of the identity keys.
class ThreadKeys {
public:
  ThreadKeys() = default;
  ThreadKeys(const ThreadKeys&) = delete;
  ThreadKeys& operator=(const ThreadKeys&) = delete;
  ~ThreadKeys();
  // The key for `path`, imported on first use; null if the store lacks it.
  ssh_key_struct* get(const IdentityStore& store, const std::string& path);
  // Another copy of that key with its user certificate attached (what the server then sees);
  // null when the store holds no certificate for it.
  ssh_key_struct* with_certificate(const IdentityStore& store, const std::string& path);

private:
  std::map<std::string, ssh_key_struct*> m_keys;
  std::map<std::string, ssh_key_struct*> m_certified;
};

// Lets the thread watching the CancelToken interrupt a worker blocked in connect, key exchange
// or authentication: it shuts the socket down, so libssh's blocking call fails at once. Once the
// remote command has started the slot is disarmed and the worker kills the command itself.
class WorkerSlot {
public:
  void arm(int fd);
  void disarm();
  // Shuts the armed socket down (called by the watcher thread). Never fails.
  void interrupt();

private:
  std::mutex m_mutex;
  int m_fd = -1;
};

struct WorkerContext {
  WorkerSlot& slot;
  ThreadKeys& keys;
  const IdentityStore& identities;
  const CancelToken* cancel = nullptr;
  bool cancelled() const { return cancel != nullptr && cancel->cancelled(); }
};

struct Failure {
  Outcome outcome = Outcome::error;
  std::string message;
  // A failure an overloaded host gives and a retry may not (no banner or key exchange in time,
  // a TCP connect that timed out, a connection reset or closed during the handshake); never a
  // refusal, an authentication or a host key problem. Nothing has run on the host yet.
  bool transient = false;
};

// What a held command gets once its first part is done (ExecRequest::hold_mark).
struct HoldAnswer {
  std::string input;                    // written to its stdin, then EOF
  std::chrono::milliseconds timeout{0}; // for the rest of the command, from now; 0: none
};

struct ExecRequest {
  ExecRequest() = default;
  ExecRequest(std::string command_, std::shared_ptr<const InputBytes> stdin_data_,
              std::chrono::milliseconds timeout_, bool reap_ = true)
      : command(std::move(command_)), stdin_data(std::move(stdin_data_)), timeout(timeout_),
        reap(reap_) {}

  std::string command;
  std::shared_ptr<const InputBytes> stdin_data; // null: EOF at once
  std::chrono::milliseconds timeout{0};         // 0: none
  // Start the reaper that kills the command if the connection is lost. A command that ends by
  // itself in bounded time whatever happens to the connection (push's scripts, an agent with a
  // --timeout) goes without: three processes fewer per command on the host.
  bool reap = true;
  // A command in two parts on one channel (remote/session_steps.hpp's held steps). The first
  // part ends by printing "\n" + hold_mark + " STATUS\n" on stdout and then reads its stdin,
  // which stays open until then; that line never reaches the sink. On it, on_hold(STATUS) runs
  // on this thread and says what to write to the command's stdin (then EOF) and the timeout
  // from then on. A command that ends without the mark ends as any other.
  std::string hold_mark; // empty: an ordinary command
  std::function<HoldAnswer(int status)> on_hold;
  // A stream (remote::run_streams): stdin stays open as long as the channel (the command ends
  // when it reads end-of-file), a cancel closes the channel (the watcher may cut the socket)
  // instead of running the kill script, and the loop wakes every `poll_slice` instead of every
  // 100 ms.
  bool stream = false;
  std::chrono::milliseconds poll_slice{100};
  // A stream's control input (Job::input): written to its stdin as it comes, never EOF.
  std::shared_ptr<StreamInput> input;
  // Port forwards carried while the command runs (Job::forwards): set up before the command
  // starts (a refused -R fails it unstarted), pumped in the same loop, closed when it ends.
  ForwardSet* forwards = nullptr;
};

struct ExecResult {
  Outcome outcome = Outcome::error;
  int exit_code = -1;
  std::string signal_name;
  int signal_number = 0;
  std::string error;
};

// Receives remote output as it arrives (stream, bytes).
using ExecSink = std::function<void(Stream, const char*, size_t)>;

// The known_hosts side of one target (ssh_known.cpp): its ssh_config as ssh resolves it, every
// line of its user files then its global files (the target's known_hosts_file standing for the
// user files), the names its key is looked up under (HostKeyAlias or "[host]:port", then,
// without an alias off port 22, the bare host) and the file accept-new records in.
struct HostKeyFiles {
  SshResolved resolved;
  std::shared_ptr<const KnownHosts> known = std::make_shared<const KnownHosts>();
  std::vector<std::string> names;
  std::string write_file; // "" when there is no user file (UserKnownHostsFile none)
};
Expected<HostKeyFiles> host_key_files(const SshTarget& target, const SshOptions& options);

// "ssh-ed25519 SHA256:..." for a public key; empty when it cannot be computed.
std::string fingerprint(ssh_key_struct* key);

class SshSession {
public:
  SshSession(WorkerContext& ctx, const SshOptions& options);
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;
  ~SshSession();

  // Resolves, connects (own TCP connect so refused/unreachable are told apart), exchanges keys,
  // applies the host-key policy and authenticates. nullopt on success, else why it failed.
  std::optional<Failure> connect(const SshTarget& target);

  // Runs `request.command` on a new channel; stdout and stderr go to `sink` as they arrive.
  // On timeout or cancellation the whole remote process tree is killed (see ssh_exec.cpp).
  ExecResult exec(const ExecRequest& request, const ExecSink& sink);

  // Runs `command` (a login shell when empty) in a PTY and relays this process's stdin, stdout
  // and window size to it until it ends (ssh_interactive.cpp), carrying `forwards` (if any)
  // meanwhile; `cancel` (SIGINT, SIGTERM) closes it. Returns the exit status (255 for a signal
  // or a dropped connection); `error` says what went wrong, if anything.
  int interactive(const std::string& command, std::string& error, ForwardSet* forwards = nullptr,
                  const CancelToken* cancel = nullptr);

  // ssh -N: carries `forwards` until `cancel` or the connection ends (ssh_forward.cpp).
  // Returns what went wrong (a refused -R, the connection lost), empty when cancelled.
  std::string forward_only(ForwardSet& forwards, const CancelToken& cancel);

  // Still connected (the server has not closed the session, nor has a transport error).
  bool alive() const;

  // "[host]:port" or "host" as known_hosts writes it (after ~/.ssh/config mapping).
  const std::string& host_label() const { return m_label; }

  // The libssh session, for the thread that owns this one (jump_hub.cpp serves channels on it).
  ssh_session_struct* handle() const { return m_session; }

private:
  std::optional<Failure> tcp_connect(const std::string& host, unsigned port, int& fd_out);
  // ssh_known.cpp: the target's known_hosts files and lookup names (ssh_config resolved as ssh
  // does, its HostName, Port and User given to libssh), and the key types to propose first;
  // after the key exchange, the decision on the key the server proved, and accept-new's record.
  std::optional<Failure> prepare_host_keys(const SshTarget& target);
  std::optional<Failure> check_host_key();
  std::optional<Failure> record_host_key(const std::string& name, const std::string& type,
                                         const std::string& blob, const std::string& fp);
  // ssh_host_certs.cpp: before the key exchange, whether this host is to be trusted through a
  // host certificate (no plain known_hosts line for it, a @cert-authority line that matches)
  // and, if so, the plain key types its certificates certify (SSH_OPTIONS_HOSTKEYS); after it,
  // @revoked and the certificate check on the key the server proved.
  std::optional<Failure> prepare_host_certificate(const SshTarget& target);
  std::optional<Failure> check_revoked(const std::string& name, const std::string& server_blob,
                                       const std::string& fp);
  // nullopt: accepted through a certificate; else why not (`fallback`: the plain-key policy
  // may still take the host, as OpenSSH falls back when a certificate is not valid).
  std::optional<Failure> check_host_certificate_of(const std::string& server_blob,
                                                   const std::string& fp, bool& fallback);
  std::optional<Failure> authenticate(const SshTarget& target);

  WorkerContext& m_ctx;
  const SshOptions& m_options;
  ssh_session_struct* m_session = nullptr;
  std::string m_host;
  unsigned m_port = 22;
  std::string m_label;
  HostKeyFiles m_files;     // where its key is looked up, and under which names
  bool m_cert_host = false; // trusted through a host certificate, if at all
  int m_fd = -1; // our socket; libssh 0.10 does not close an SSH_OPTIONS_FD socket
  unsigned long m_fd_inode = 0;
  // The jump host this session goes through (its socket is m_fd): released after m_fd closes.
  std::shared_ptr<JumpHub> m_jump;
};

// The text of one of the session's options (ssh_options_get; `which` is an ssh_options_e), ""
// when it is unset.
std::string session_option(ssh_session_struct* s, int which);

// Applies `target` and `options` to a new session as connect() does (config, port, user,
// known_hosts, extra keywords, agent, timeout, strict checking, log level). Errors: why libssh
// refused a setting.
std::optional<Failure> configure_session(ssh_session_struct* s, const SshTarget& target,
                                         const SshOptions& options);

// Fetches (ssh-keyscan -c, one process per distinct port) the certificates of the targets that
// need one: no plain known_hosts line, a matching @cert-authority line. Errors (usage): a
// known_hosts file whose marker lines are malformed (one line naming the file and line).
Expected<std::shared_ptr<const HostCertPool>>
fetch_host_certificates(const std::vector<const SshTarget*>& targets, const SshOptions& options);

// A connected session to `target`, retrying transient failures (Failure::transient) up to
// options.connect_retries times with backoff (0.25 s, 0.5 s, ...) and a connect timeout grown
// by options.connect_timeout_growth each time; `attempt` holds the options of the last try (the
// session refers to it, so it must outlive the session). On failure the session is null and the
// failure says how many attempts were made.
struct Connected {
  std::unique_ptr<SshSession> session;
  std::optional<Failure> failure;
  int attempts = 1; // connects tried (1 when the first one succeeded or failed for good)
};
Connected connect_with_retries(WorkerContext& ctx, const SshOptions& options,
                               const SshTarget& target, SshOptions& attempt);

// The command line sent for `command`: exports TPUCTL_RUN=<nonce> (which a timeout's kill uses)
// and, with `reap`, starts the reaper that kills the command's processes if the connection is
// lost (ssh_exec.cpp).
std::string wrap_command(const std::string& nonce, const std::string& command, bool reap = true);

// Routes this thread's libssh log lines to spdlog (debug), never to stdout or stderr directly.
// libssh keeps the log callback and level per thread, so every worker thread calls this.
void install_thread_logging();

// libssh verbosity matching spdlog's level.
int libssh_log_level();

// Moving bytes between a channel and a local socket (port forwarding, a jump host's tunnels):
// read in pieces of k_pump_chunk, and stop reading the channel while k_pump_pending bytes wait
// for a slow socket, so that libssh's window holds the peer back and memory stays bounded.
inline constexpr size_t k_pump_chunk = 32 * 1024;
inline constexpr size_t k_pump_pending = 256 * 1024;

} // namespace tpuctl::remote::detail
