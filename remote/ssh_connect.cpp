// Session set-up for one host, in the order libssh 0.10 needs (shared/reference/ssh-fanout.md):
//   1. SSH_OPTIONS_HOST, then ~/.ssh/config (or none), then tpuctl's own per-host settings, and
//      strict host-key checking forced on, because 0.10 reports an unknown host as OK when the
//      user's config says `StrictHostKeyChecking no`.
//   2. Our own non-blocking TCP connect (every resolved address, one deadline, cancellable), so a
//      refused port, an unreachable host and a silent listener are told apart; the socket goes to
//      libssh with SSH_OPTIONS_FD. Jump hosts (the target's proxy_jump, else a ProxyJump in the
//      config, which libssh 0.10 rewrote into a ProxyCommand running `ssh -W`) are reached in
//      process instead (jump_hub.hpp): the socket is one end of a socketpair whose other end a
//      direct-tcpip channel from the bastion feeds. Any other ProxyCommand is left to libssh.
//   3. Banner and key exchange under SSH_OPTIONS_TIMEOUT (= the connect timeout).
//   4. tpuctl's host-key policy on ssh_session_is_known_server(); known_hosts writes are
//      serialized with a process-wide mutex (libssh appends without locking). `@revoked` keys
//      and hosts trusted through `@cert-authority` lines, which libssh skips, are handled in
//      ssh_host_certs.cpp (before the key exchange too: the host-key types to propose).
//   5. Public-key authentication: the run's pre-decrypted key when the target names one (with
//      its KEY-cert.pub user certificate first, when there is one; and then never the agent:
//      0.10 ignores IdentitiesOnly), else agent + default keys.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <spdlog/spdlog.h>

#include "remote/jump_hub.hpp"
#include "remote/ssh_config.hpp"
#include "remote/ssh_session.hpp"
#include "remote/ssh_wire.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote::detail {

namespace {

using Clock = std::chrono::steady_clock;

void libssh_log(int priority, const char* function, const char* buffer, void* /*userdata*/) {
  if (priority >= SSH_LOG_PROTOCOL) {
    spdlog::trace("libssh: {}: {}", function ? function : "", buffer ? buffer : "");
  } else {
    spdlog::debug("libssh: {}", buffer ? buffer : "");
  }
}

void set_socket_options(int fd, std::chrono::milliseconds keepalive) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (keepalive.count() <= 0) {
    return;
  }
  // TCP keepalive probes the peer while the session is idle; TCP_USER_TIMEOUT turns data left
  // unacknowledged (our keepalive@openssh.com requests) into an error, so a dead host is found
  // within about three keepalive intervals.
  int idle = static_cast<int>(std::max<int64_t>(1, keepalive.count() / 1000));
  int count = 3;
  unsigned user_timeout = static_cast<unsigned>(keepalive.count() * 3);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

// ssh_config keywords accepted in SshTarget::extra, applied after ~/.ssh/config.
bool apply_extra(ssh_session s, const std::string& key, const std::string& value) {
  std::string k;
  for (char c : key) {
    k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (k == "proxycommand") {
    return ssh_options_set(s, SSH_OPTIONS_PROXYCOMMAND, value.c_str()) == SSH_OK;
  }
  if (k == "ciphers") {
    return ssh_options_set(s, SSH_OPTIONS_CIPHERS_C_S, value.c_str()) == SSH_OK &&
           ssh_options_set(s, SSH_OPTIONS_CIPHERS_S_C, value.c_str()) == SSH_OK;
  }
  if (k == "kexalgorithms") {
    return ssh_options_set(s, SSH_OPTIONS_KEY_EXCHANGE, value.c_str()) == SSH_OK;
  }
  if (k == "hostkeyalgorithms") {
    return ssh_options_set(s, SSH_OPTIONS_HOSTKEYS, value.c_str()) == SSH_OK;
  }
  if (k == "compression") {
    return ssh_options_set(s, SSH_OPTIONS_COMPRESSION, value.c_str()) == SSH_OK;
  }
  return false;
}

} // namespace

std::string fingerprint(ssh_key key) {
  unsigned char* hash = nullptr;
  size_t len = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) != SSH_OK) {
    return "";
  }
  char* text = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
  ssh_clean_pubkey_hash(&hash);
  std::string out = std::string(ssh_key_type_to_char(ssh_key_type(key))) + " " + (text ? text : "");
  ssh_string_free_char(text);
  return out;
}

int libssh_log_level() {
  if (spdlog::should_log(spdlog::level::trace)) {
    return SSH_LOG_PROTOCOL;
  }
  if (spdlog::should_log(spdlog::level::debug)) {
    return SSH_LOG_WARNING;
  }
  return SSH_LOG_NOLOG;
}

void install_thread_logging() {
  ssh_set_log_callback(&libssh_log);
  ssh_set_log_level(libssh_log_level());
}

// ---- IdentityStore / ThreadKeys / WorkerSlot ----

namespace {

// What libssh's passphrase callback learnt about one identity file.
struct PassphraseAsk {
  const PassphraseSource* source = nullptr;
  std::string path;
  bool asked = false;        // libssh asked: the file is encrypted
  std::optional<Error> none; // the source gave none, and why
};

int ask_passphrase(const char* /*prompt*/, char* buf, size_t len, int /*echo*/, int /*verify*/,
                   void* userdata) {
  auto* ask = static_cast<PassphraseAsk*>(userdata);
  ask->asked = true;
  if (ask->source == nullptr || !*ask->source) {
    ask->none = Error{ErrorKind::auth, "no passphrase was given"};
    return -1;
  }
  auto passphrase = (*ask->source)(ask->path);
  if (!passphrase) {
    ask->none = passphrase.error();
    return -1;
  }
  if (passphrase->size() + 1 > len) {
    ask->none = Error{ErrorKind::auth, "the passphrase is longer than libssh takes"};
    return -1;
  }
  std::memcpy(buf, passphrase->c_str(), passphrase->size() + 1);
  return 0;
}

// A private key (unencrypted base64) with the certificate `cert` ("TYPE BASE64") attached;
// null when either cannot be imported or the certificate is not for that key.
ssh_key attach_certificate(const std::string& key_base64, const std::string& cert) {
  const size_t space = cert.find(' ');
  const std::string type = cert.substr(0, space);
  const std::string b64 = space == std::string::npos ? "" : cert.substr(space + 1);
  ssh_key key = nullptr;
  ssh_key certificate = nullptr;
  if (ssh_pki_import_privkey_base64(key_base64.c_str(), nullptr, nullptr, nullptr, &key) !=
          SSH_OK ||
      ssh_pki_import_cert_base64(b64.c_str(), ssh_key_type_from_name(type.c_str()), &certificate) !=
          SSH_OK ||
      ssh_pki_copy_cert_to_privkey(certificate, key) != SSH_OK) {
    ssh_key_free(key);
    ssh_key_free(certificate);
    return nullptr;
  }
  ssh_key_free(certificate);
  return key;
}

// The ssh_config as it applies to `t`, when the run reads one.
std::optional<SshResolved> target_config(const SshTarget& t, const SshOptions* options) {
  if (options == nullptr || !options->process_config) {
    return std::nullopt;
  }
  SshConfigQuery q;
  q.host = t.address;
  q.port = t.port;
  q.user = t.user;
  q.config_file = options->config_file;
  auto r = resolve_ssh_config(q);
  return r ? std::optional<SshResolved>(std::move(*r)) : std::nullopt;
}

std::string target_key(const SshTarget& t) {
  return t.user + "@" + t.address + ":" + std::to_string(t.port);
}

// The user certificate in `file` for identity file `path`, as "TYPE BASE64", when `file` exists
// and holds a certificate for that key; one warning when it exists but is not usable.
std::optional<std::string> load_user_certificate(const std::string& file, const std::string& path,
                                                 const std::string& key_base64) {
  std::ifstream in(file);
  if (!in) {
    return std::nullopt;
  }
  std::string type, b64;
  in >> type >> b64;
  const std::string cert = type + " " + b64;
  if (type.find("-cert-v01@openssh.com") == std::string::npos || b64.empty()) {
    spdlog::warn("'{}' is not an OpenSSH certificate; the key '{}' is offered without it", file,
                 path);
    return std::nullopt;
  }
  ssh_key key = attach_certificate(key_base64, cert);
  if (key == nullptr) {
    spdlog::warn("the certificate '{}' cannot be used with the key '{}' (not for that key, or a "
                 "type libssh does not read); the key is offered without it",
                 file, path);
    return std::nullopt;
  }
  ssh_key_free(key);
  spdlog::debug("offering the user certificate '{}' with '{}'", file, path);
  return cert;
}

// The user certificate offered with identity `path`: PATH-cert.pub, else the first usable
// CertificateFile the ssh_config `r` gives (as ssh tries them), when any.
std::optional<std::string> find_user_certificate(const std::string& path,
                                                 const std::string& key_base64,
                                                 const std::optional<SshResolved>& r) {
  std::vector<std::string> files{path + "-cert.pub"};
  if (r) {
    for (const auto& f : r->certificate_files) {
      files.push_back(expand_config_path(*r, f));
    }
  }
  for (const auto& file : files) {
    if (auto cert = load_user_certificate(file, path, key_base64)) {
      return cert;
    }
  }
  return std::nullopt;
}

} // namespace

Expected<IdentityStore> IdentityStore::load(const std::vector<const SshTarget*>& targets,
                                            const std::string& passphrase,
                                            const PassphraseSource& source, bool agent,
                                            const SshOptions* options) {
  install_thread_logging();
  IdentityStore store;
  store.m_hubs = std::make_shared<JumpHubs>();
  for (const SshTarget* t : targets) {
    const std::string& path = t->identity_file;
    if (path.empty() || store.m_base64.count(path)) {
      continue;
    }
    if (::access(path.c_str(), R_OK) != 0) {
      return Error{ErrorKind::auth, "identity file '" + path +
                                        "' cannot be read: " + std::strerror(errno) +
                                        " (check the path, or omit it to use ssh-agent)"};
    }
    ssh_key key = nullptr;
    PassphraseAsk ask{&source, path, false, std::nullopt};
    int rc =
        ssh_pki_import_privkey_file(path.c_str(), passphrase.empty() ? nullptr : passphrase.c_str(),
                                    passphrase.empty() ? &ask_passphrase : nullptr, &ask, &key);
    if (rc != SSH_OK || key == nullptr) {
      const char* sock = std::getenv("SSH_AUTH_SOCK");
      if (ask.none && agent && sock != nullptr && *sock != '\0') {
        store.m_agent.insert(path); // encrypted, no passphrase here: ssh-agent may hold it
        continue;
      }
      const std::string ways = "give its passphrase with --identity-passphrase-file FILE, "
                               "SSH_ASKPASS (with SSH_ASKPASS_REQUIRE=force) or on a terminal, "
                               "or add it to ssh-agent ('ssh-add " +
                               path + "')";
      if (ask.none) {
        return Error{ErrorKind::auth, "identity file '" + path + "' is encrypted and " +
                                          ask.none->message + ": " + ways};
      }
      if (ask.asked || !passphrase.empty()) {
        return Error{ErrorKind::auth,
                     "the passphrase of identity file '" + path + "' is wrong: " + ways};
      }
      return Error{ErrorKind::auth, "identity file '" + path +
                                        "' could not be loaded: it is not a private key (or "
                                        "its format is one libssh does not read)"};
    }
    char* b64 = nullptr;
    rc = ssh_pki_export_privkey_base64(key, nullptr, nullptr, nullptr, &b64);
    ssh_key_free(key);
    if (rc != SSH_OK || b64 == nullptr) {
      return Error{ErrorKind::auth, "identity file '" + path +
                                        "' could not be prepared for signing (unsupported key "
                                        "type? use an ed25519, ecdsa or rsa key)"};
    }
    store.m_base64[path] = b64;
    ssh_string_free_char(b64);
    if (auto cert = find_user_certificate(path, store.m_base64[path], target_config(*t, options))) {
      store.m_certificates[path] = *cert;
    }
  }
  // A target whose record names no key is left to libssh's choice (the ssh_config's
  // IdentityFile, the default keys, ssh-agent), which offers no certificate: the ssh_config's
  // identity files that have one (KEY-cert.pub or a CertificateFile) are loaded here, if they
  // open without a passphrase, and offered with it first.
  for (const SshTarget* t : targets) {
    if (!t->identity_file.empty() || store.m_config_certified.count(target_key(*t))) {
      continue;
    }
    auto r = target_config(*t, options);
    if (!r) {
      continue;
    }
    std::vector<std::string>& certified = store.m_config_certified[target_key(*t)];
    for (const auto& written : r->identity_files) {
      const std::string path = expand_config_path(*r, written);
      if (!store.m_base64.count(path)) {
        ssh_key key = nullptr;
        char* b64 = nullptr;
        if (::access(path.c_str(), R_OK) != 0 ||
            ssh_pki_import_privkey_file(path.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK ||
            key == nullptr) {
          continue; // absent, or encrypted: libssh's own attempt deals with it
        }
        const int rc = ssh_pki_export_privkey_base64(key, nullptr, nullptr, nullptr, &b64);
        ssh_key_free(key);
        if (rc != SSH_OK || b64 == nullptr) {
          continue;
        }
        store.m_base64[path] = b64;
        ssh_string_free_char(b64);
      }
      if (!store.m_certificates.count(path)) {
        if (auto cert = find_user_certificate(path, store.m_base64[path], r)) {
          store.m_certificates[path] = *cert;
        }
      }
      if (store.m_certificates.count(path)) {
        certified.push_back(path);
      }
    }
  }
  return store;
}

const std::vector<std::string>& IdentityStore::config_certified(const SshTarget& target) const {
  static const std::vector<std::string> k_none;
  auto it = m_config_certified.find(target_key(target));
  return it == m_config_certified.end() ? k_none : it->second;
}

const std::string* IdentityStore::certificate(const std::string& path) const {
  auto it = m_certificates.find(path);
  return it == m_certificates.end() ? nullptr : &it->second;
}

const std::string* IdentityStore::base64(const std::string& path) const {
  auto it = m_base64.find(path);
  return it == m_base64.end() ? nullptr : &it->second;
}

ThreadKeys::~ThreadKeys() {
  for (auto& [path, key] : m_keys) {
    ssh_key_free(key);
  }
  for (auto& [path, key] : m_certified) {
    ssh_key_free(key);
  }
}

ssh_key ThreadKeys::with_certificate(const IdentityStore& store, const std::string& path) {
  auto it = m_certified.find(path);
  if (it != m_certified.end()) {
    return it->second;
  }
  const std::string* b64 = store.base64(path);
  const std::string* cert = store.certificate(path);
  if (b64 == nullptr || cert == nullptr) {
    return nullptr;
  }
  ssh_key key = attach_certificate(*b64, *cert);
  if (key != nullptr) {
    m_certified[path] = key;
  }
  return key;
}

ssh_key ThreadKeys::get(const IdentityStore& store, const std::string& path) {
  auto it = m_keys.find(path);
  if (it != m_keys.end()) {
    return it->second;
  }
  const std::string* b64 = store.base64(path);
  if (b64 == nullptr) {
    return nullptr;
  }
  ssh_key key = nullptr;
  if (ssh_pki_import_privkey_base64(b64->c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) {
    return nullptr;
  }
  m_keys[path] = key;
  return key;
}

void WorkerSlot::arm(int fd) {
  std::lock_guard lock(m_mutex);
  m_fd = fd;
}

void WorkerSlot::disarm() {
  std::lock_guard lock(m_mutex);
  m_fd = -1;
}

void WorkerSlot::interrupt() {
  std::lock_guard lock(m_mutex);
  if (m_fd >= 0) {
    ::shutdown(m_fd, SHUT_RDWR);
  }
}

// ---- SshSession: connect ----

Connected connect_with_retries(WorkerContext& ctx, const SshOptions& options,
                               const SshTarget& target, SshOptions& attempt) {
  attempt = options;
  Connected c;
  for (int tries = 0;; ++tries) {
    c.attempts = tries + 1;
    c.session = std::make_unique<SshSession>(ctx, attempt);
    c.failure = c.session->connect(target);
    if (!c.failure) {
      return c;
    }
    if (!c.failure->transient || tries >= options.connect_retries || ctx.cancelled()) {
      if (tries > 0) {
        c.failure->message += " (" + std::to_string(tries + 1) + " attempts)";
      }
      c.session.reset();
      return c;
    }
    c.session.reset();
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(250 << tries);
    while (std::chrono::steady_clock::now() < until && !ctx.cancelled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    attempt.connect_timeout *= std::max(1, options.connect_timeout_growth);
  }
}

SshSession::SshSession(WorkerContext& ctx, const SshOptions& options)
    : m_ctx(ctx), m_options(options) {}

bool SshSession::alive() const {
  return m_session != nullptr && ssh_is_connected(m_session) != 0 &&
         (ssh_get_status(m_session) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0;
}

SshSession::~SshSession() {
  m_ctx.slot.disarm();
  if (m_session != nullptr) {
    ssh_disconnect(m_session);
    ssh_free(m_session);
  }
  // Close our socket unless libssh already did (then the number may have been reused: the inode
  // tells the two apart).
  struct stat st {};
  if (m_fd >= 0 && ::fstat(m_fd, &st) == 0 && st.st_ino == m_fd_inode) {
    ::close(m_fd);
  }
}

std::optional<Failure> SshSession::tcp_connect(const std::string& host, unsigned port,
                                               int& fd_out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  std::string port_text = std::to_string(port);
  int gai = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &list);
  if (gai != 0) {
    return Failure{Outcome::unreachable, "cannot resolve '" + host + "': " + ::gai_strerror(gai)};
  }
  auto deadline = Clock::now() + m_options.connect_timeout;
  int last_errno = ETIMEDOUT;
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS) {
      last_errno = errno;
      ::close(fd);
      continue;
    }
    bool connected = rc == 0;
    while (!connected) {
      if (m_ctx.cancelled()) {
        ::close(fd);
        ::freeaddrinfo(list);
        return Failure{Outcome::interrupted, "interrupted while connecting"};
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        last_errno = ETIMEDOUT;
        break;
      }
      pollfd p{fd, POLLOUT, 0};
      int pr = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 50)));
      if (pr < 0 && errno != EINTR) {
        last_errno = errno;
        break;
      }
      if (pr > 0) {
        int so_error = 0;
        socklen_t len = sizeof so_error;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        if (so_error == 0) {
          connected = true;
        } else {
          last_errno = so_error;
          break;
        }
      }
    }
    if (connected) {
      ::freeaddrinfo(list);
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      set_socket_options(fd, m_options.keepalive_interval);
      fd_out = fd;
      return std::nullopt;
    }
    ::close(fd);
  }
  ::freeaddrinfo(list);
  std::string where = m_label;
  if (last_errno == ECONNREFUSED) {
    return Failure{Outcome::refused, "connection refused (" + where + ")"};
  }
  if (last_errno == ETIMEDOUT) {
    return Failure{Outcome::unreachable,
                   "connection to " + where + " timed out after " +
                       util::format_duration(m_options.connect_timeout),
                   true};
  }
  return Failure{Outcome::unreachable,
                 "cannot connect to " + where + ": " + std::strerror(last_errno)};
}

std::string session_option(ssh_session s, int which) {
  char* value = nullptr;
  if (ssh_options_get(s, static_cast<ssh_options_e>(which), &value) != SSH_OK || value == nullptr) {
    return "";
  }
  std::string out(value);
  ssh_string_free_char(value);
  return out;
}

std::optional<Failure> configure_session(ssh_session s, const SshTarget& target,
                                         const SshOptions& options) {
  ssh_options_set(s, SSH_OPTIONS_HOST, target.address.c_str());
  if (options.process_config) {
    const char* file = options.config_file.empty() ? nullptr : options.config_file.c_str();
    if (ssh_options_parse_config(s, file) != SSH_OK) {
      return Failure{Outcome::error, "cannot parse ssh config '" +
                                         (file ? options.config_file : "~/.ssh/config") +
                                         "': " + ssh_get_error(s)};
    }
  } else {
    bool no = false;
    ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &no);
  }
  // tpuctl's settings come after the config, so they win.
  if (target.port != 0) {
    unsigned port = target.port;
    ssh_options_set(s, SSH_OPTIONS_PORT, &port);
  }
  if (!target.user.empty()) {
    ssh_options_set(s, SSH_OPTIONS_USER, target.user.c_str());
  }
  if (!target.known_hosts_file.empty()) {
    ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, target.known_hosts_file.c_str());
  }
  for (const auto& [key, value] : target.extra) {
    if (!apply_extra(s, key, value)) {
      return Failure{Outcome::error, "ssh option '" + key + "' = '" + value +
                                         "' was rejected by libssh: check its value"};
    }
  }
  if (target.identity_file.empty() && !options.use_agent) {
    ssh_options_set(s, SSH_OPTIONS_IDENTITY_AGENT, "/nonexistent/tpuctl-no-agent");
  }
  long timeout_s =
      std::max<long>(1, static_cast<long>((options.connect_timeout.count() + 999) / 1000));
  ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout_s);
  int strict = 1;
  ssh_options_set(s, SSH_OPTIONS_STRICTHOSTKEYCHECK, &strict);
  int level = libssh_log_level();
  ssh_options_set(s, SSH_OPTIONS_LOG_VERBOSITY, &level);
  return std::nullopt;
}

std::optional<Failure> SshSession::connect(const SshTarget& target) {
  m_session = ssh_new();
  if (m_session == nullptr) {
    return Failure{Outcome::error, "out of memory creating an ssh session"};
  }
  ssh_session s = m_session;
  if (auto failure = configure_session(s, target, m_options)) {
    return failure;
  }

  if (auto failure = prepare_host_keys(target)) {
    return failure;
  }
  if (auto failure = prepare_host_certificate(target)) {
    return failure;
  }

  // Jump hosts: the inventory's, else ssh_config's ProxyJump (which libssh 0.10 has turned into
  // a ProxyCommand running `ssh -W`: read back and done here instead, never run).
  std::string proxy = session_option(s, SSH_OPTIONS_PROXYCOMMAND);
  const std::optional<std::string> config_jump = jump_from_proxy_command(proxy);
  const std::string jump =
      !target.proxy_jump.empty() ? target.proxy_jump : config_jump.value_or(std::string());
  std::vector<JumpHop> chain;
  if (!jump.empty()) {
    auto hops = parse_jump_spec(jump, target.proxy_jump.empty() ? "ProxyJump" : "proxy_jump");
    if (!hops) {
      return Failure{Outcome::error, hops.error().message};
    }
    chain = std::move(*hops);
  }
  if (!chain.empty()) {
    JumpSocket socket =
        m_ctx.identities.jump_hubs().open(m_ctx, m_options, target, chain, m_host, m_port);
    if (socket.failure) {
      return socket.failure;
    }
    int fd = socket.fd;
    m_jump = std::move(socket.hub);
    m_ctx.slot.arm(fd);
    struct stat st {};
    ::fstat(fd, &st);
    m_fd = fd;
    m_fd_inode = st.st_ino;
    ssh_options_set(s, SSH_OPTIONS_FD, &fd); // libssh then runs no ProxyCommand
  } else if (proxy.empty() || proxy == "none" || config_jump) {
    int fd = -1;
    if (auto failure = tcp_connect(m_host, m_port, fd)) {
      return failure;
    }
    m_ctx.slot.arm(fd);
    struct stat st {};
    ::fstat(fd, &st);
    m_fd = fd;
    m_fd_inode = st.st_ino;
    ssh_options_set(s, SSH_OPTIONS_FD, &fd);
  }
  if (m_ctx.cancelled()) {
    return Failure{Outcome::interrupted, "interrupted while connecting"};
  }
  if (ssh_connect(s) != SSH_OK) {
    std::string why = ssh_get_error(s);
    if (m_ctx.cancelled()) {
      return Failure{Outcome::interrupted, "interrupted while connecting"};
    }
    if (why.find("Timeout") != std::string::npos || why.find("timeout") != std::string::npos) {
      return Failure{Outcome::unreachable,
                     "no ssh banner and key exchange from " + m_label + " within " +
                         util::format_duration(m_options.connect_timeout) + " (is sshd hung?)",
                     true};
    }
    if (why.find("refused") != std::string::npos) {
      return Failure{Outcome::refused, "connection refused (" + m_label + ")"};
    }
    // The server closing or resetting the connection mid-handshake (an sshd at MaxStartups,
    // an overloaded host) is worth another try; anything else is not.
    const bool dropped = why.find("reset") != std::string::npos ||
                         why.find("Socket error") != std::string::npos ||
                         why.find("disconnected") != std::string::npos ||
                         why.find("Connection closed") != std::string::npos;
    return Failure{Outcome::error, "ssh connection to " + m_label + " failed: " + why, dropped};
  }
  if (auto failure = check_host_key()) {
    return failure;
  }
  return authenticate(target);
}

std::optional<Failure> SshSession::authenticate(const SshTarget& target) {
  std::string user = session_option(m_session, SSH_OPTIONS_USER);
  int rc = SSH_AUTH_ERROR;
  std::string offered;
  if (!target.identity_file.empty() && m_ctx.identities.through_agent(target.identity_file)) {
    offered = "ssh-agent (the identity file '" + target.identity_file +
              "' is encrypted and no passphrase was given: the agent does not hold it; give "
              "it with --identity-passphrase-file FILE or 'ssh-add " +
              target.identity_file + "')";
    rc = ssh_userauth_agent(m_session, nullptr);
  } else if (!target.identity_file.empty()) {
    ssh_key key = m_ctx.keys.get(m_ctx.identities, target.identity_file);
    if (key == nullptr) {
      return Failure{Outcome::auth,
                     "identity file '" + target.identity_file + "' is not loaded (internal error)"};
    }
    offered = "the key '" + target.identity_file + "'";
    // Its certificate first (as ssh(1) does), then the plain key.
    bool plain = true;
    if (ssh_key certified = m_ctx.keys.with_certificate(m_ctx.identities, target.identity_file)) {
      offered = "the key '" + target.identity_file + "' (with and without its certificate '" +
                target.identity_file + "-cert.pub')";
      rc = ssh_userauth_publickey(m_session, nullptr, certified);
      plain = rc == SSH_AUTH_DENIED || rc == SSH_AUTH_PARTIAL;
    }
    if (plain) {
      rc = ssh_userauth_publickey(m_session, nullptr, key);
    }
  } else {
    offered = m_options.use_agent ? "ssh-agent and the default keys" : "the default keys";
    // The ssh_config's identities that have a certificate, each with it, first.
    for (const auto& path : m_ctx.identities.config_certified(target)) {
      if (ssh_key certified = m_ctx.keys.with_certificate(m_ctx.identities, path)) {
        offered = "the certificate of '" + path + "', " + offered;
        rc = ssh_userauth_publickey(m_session, nullptr, certified);
        if (rc != SSH_AUTH_DENIED && rc != SSH_AUTH_PARTIAL) {
          break;
        }
      }
    }
    if (rc != SSH_AUTH_SUCCESS) {
      const char* pass =
          m_options.identity_passphrase.empty() ? nullptr : m_options.identity_passphrase.c_str();
      rc = ssh_userauth_publickey_auto(m_session, nullptr, pass);
    }
  }
  if (rc == SSH_AUTH_SUCCESS) {
    return std::nullopt;
  }
  if (m_ctx.cancelled()) {
    return Failure{Outcome::interrupted, "interrupted while authenticating"};
  }
  if (rc == SSH_AUTH_DENIED || rc == SSH_AUTH_PARTIAL) {
    return Failure{Outcome::auth, "permission denied (publickey) for user '" + user + "' at " +
                                      m_label + ": the server accepted none of " + offered};
  }
  return Failure{Outcome::error,
                 "authentication with " + m_label + " failed: " + ssh_get_error(m_session)};
}

} // namespace tpuctl::remote::detail
