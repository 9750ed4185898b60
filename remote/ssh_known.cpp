// A host's key decided as OpenSSH 9.2's ssh decides it (sshconnect.c check_host_key), by tpuctl
// rather than libssh 0.10, which reads one user file and one global file, ignores HostKeyAlias
// and never looks again without the port:
//   * The files: every UserKnownHostsFile, then every GlobalKnownHostsFile, as the one resolver
//     (ssh_config.hpp) gives them for the target (the inventory's known_hosts file, when it
//     names one, stands for UserKnownHostsFile, as `-o UserKnownHostsFile=` would), read as
//     one set.
//   * The name: HostKeyAlias, else "host" on port 22 and "[host]:port" elsewhere. When nothing
//     is known under "[host]:port" (and there is no alias), the bare host is looked up again
//     ("checking without port identifier"); only a matching key there lets the host in.
//   * The lookup (known_hosts.hpp lookup_host_key): a line with the key accepts; a line with
//     another key (of any type) is a changed key, refused under every policy; a matching
//     @revoked line refuses whatever else matches. Nothing known: --strict-host-key-checking
//     decides (yes refuses, accept-new records the key in the first user file under the lookup
//     name, hashed when HashKnownHosts says so, no connects without recording).
//   * The key exchange proposes the key types known for the name first (ssh's
//     order_hostkeyalgs), so a host known by its RSA key is not refused for offering Ed25519.
//   * Hosts trusted through @cert-authority lines are ssh_host_certs.cpp's; they read the same
//     files under the same names.
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

#include <libssh/libssh.h>
#include <spdlog/spdlog.h>

#include "remote/ssh_session.hpp"
#include "remote/ssh_wire.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote::detail {

namespace {

std::mutex& known_hosts_mutex() {
  static std::mutex m;
  return m;
}

// The merged lines of `files`, shared while none of them changes (a fan-out's sessions read
// them once).
std::shared_ptr<const KnownHosts>
merged(const std::vector<std::shared_ptr<const KnownHosts>>& files) {
  struct Cached {
    std::vector<std::shared_ptr<const KnownHosts>> files;
    std::shared_ptr<const KnownHosts> merged;
  };
  static std::mutex mutex;
  static std::map<std::string, Cached> cache;
  std::string key;
  for (const auto& f : files) {
    key += f->path + '\n';
  }
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end() && it->second.files == files) {
    return it->second.merged;
  }
  auto m = std::make_shared<const KnownHosts>(merge_known_hosts(files));
  cache[key] = Cached{files, m};
  return m;
}

// The host-key algorithms that prove a key of `type`.
std::string algorithms_of(const std::string& type) {
  return type == "ssh-rsa" ? "rsa-sha2-512,rsa-sha2-256" : type;
}

const char* const k_default_host_key_algorithms[] = {
    "ssh-ed25519",  "ecdsa-sha2-nistp521", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp256",
    "rsa-sha2-512", "rsa-sha2-256"};

} // namespace

Expected<HostKeyFiles> host_key_files(const SshTarget& target, const SshOptions& options) {
  SshConfigQuery q;
  q.host = target.address;
  q.port = target.port;
  q.user = target.user;
  q.process_config = options.process_config;
  q.config_file = options.config_file;
  HostKeyFiles out;
  TPUCTL_TRY_ASSIGN(out.resolved, resolve_ssh_config(q));
  if (!options.process_config) {
    out.resolved.port = target.port != 0 ? target.port : 22;
  }
  std::vector<std::string> user = out.resolved.user_known_hosts;
  if (!target.known_hosts_file.empty()) {
    user = {expand_user_path(target.known_hosts_file)};
  }
  std::vector<std::shared_ptr<const KnownHosts>> files;
  for (const auto* list : {&user, &out.resolved.global_known_hosts}) {
    for (const auto& path : *list) {
      TPUCTL_TRY_ASSIGN(auto f, load_known_hosts(path));
      files.push_back(std::move(f));
    }
  }
  out.known = merged(files);
  out.write_file = user.empty() ? std::string() : user[0];
  const SshResolved& r = out.resolved;
  out.names.push_back(known_hosts_lookup_name(r));
  if (r.host_key_alias.empty() && r.port != 22) {
    out.names.push_back(r.hostname);
  }
  return out;
}

std::optional<Failure> SshSession::prepare_host_keys(const SshTarget& target) {
  auto files = host_key_files(target, m_options);
  if (!files) {
    return Failure{Outcome::error, files.error().message};
  }
  m_files = std::move(*files);
  if (m_options.process_config) {
    // The resolver's answer is ssh's: it wins over libssh's reading of the same files.
    const SshResolved& r = m_files.resolved;
    ssh_options_set(m_session, SSH_OPTIONS_HOST, r.hostname.c_str());
    unsigned port = r.port;
    ssh_options_set(m_session, SSH_OPTIONS_PORT, &port);
    ssh_options_set(m_session, SSH_OPTIONS_USER, r.user.c_str());
  }
  m_host = session_option(m_session, SSH_OPTIONS_HOST);
  ssh_options_get_port(m_session, &m_port);
  m_label = known_hosts_name(m_host, m_port);
  for (const auto& [key, value] : target.extra) {
    if (util::to_lower(key) == "hostkeyalgorithms") {
      return std::nullopt; // the user's choice stands
    }
  }
  std::vector<std::string> known;
  for (const auto& name : m_files.names) {
    known = known_key_types(*m_files.known, name);
    if (!known.empty()) {
      break;
    }
  }
  if (known.empty()) {
    return std::nullopt;
  }
  std::string list;
  auto add = [&](const std::string& algs) {
    for (const auto& a : util::split(algs, ',')) {
      if (("," + list + ",").find("," + a + ",") == std::string::npos) {
        list += (list.empty() ? "" : ",") + a;
      }
    }
  };
  for (const auto& type : known) {
    add(algorithms_of(type));
  }
  for (const char* a : k_default_host_key_algorithms) {
    add(a);
  }
  ssh_options_set(m_session, SSH_OPTIONS_HOSTKEYS, list.c_str());
  return std::nullopt;
}

std::optional<Failure> SshSession::check_host_key() {
  ssh_key server_key = nullptr;
  if (ssh_get_server_publickey(m_session, &server_key) != SSH_OK) {
    return Failure{Outcome::error, "no host key from " + m_label + ": " + ssh_get_error(m_session)};
  }
  const std::string fp = fingerprint(server_key);
  const std::string type = ssh_key_type_to_char(ssh_key_type(server_key));
  std::string blob;
  if (char* b64 = nullptr; ssh_pki_export_pubkey_base64(server_key, &b64) == SSH_OK) {
    blob = wire::base64_decode(b64).value_or("");
    ssh_string_free_char(b64);
  }
  ssh_key_free(server_key);
  const KnownHosts& known = *m_files.known;
  const std::string& name = m_files.names[0];
  const std::string files = known.path.empty() ? std::string("no known_hosts file") : known.path;
  for (const auto& n : m_files.names) {
    if (auto failure = check_revoked(n, blob, fp)) {
      return failure;
    }
  }
  if (m_cert_host) {
    bool fallback = true;
    auto failure = check_host_certificate_of(blob, fp, fallback);
    if (!failure) {
      return std::nullopt;
    }
    if (!fallback || m_options.host_key_policy == HostKeyPolicy::yes) {
      return failure;
    }
    spdlog::warn("{}; trusting the plain host key instead (--strict-host-key-checking={})",
                 failure->message,
                 m_options.host_key_policy == HostKeyPolicy::no ? "no" : "accept-new");
  }
  HostKeyLookup found = lookup_host_key(known, name, blob);
  if (found.status == HostKeyStatus::unknown && m_files.names.size() > 1) {
    // ssh: "checking without port identifier"; only a matching key counts there.
    HostKeyLookup bare = lookup_host_key(known, m_files.names[1], blob);
    if (bare.status == HostKeyStatus::ok) {
      spdlog::debug("host key of {} ({}) found under '{}' in {} line {} (without the port)",
                    m_label, fp, m_files.names[1], bare.entry->path, bare.entry->line);
      return std::nullopt;
    }
  }
  switch (found.status) {
  case HostKeyStatus::ok:
    spdlog::debug("host key of {} ({}) found under '{}' in {} line {}", m_label, fp, name,
                  found.entry->path, found.entry->line);
    return std::nullopt;
  case HostKeyStatus::revoked:
  case HostKeyStatus::changed:
    return Failure{Outcome::host_key_changed,
                   "host key for " + name + " changed (the server now offers " + fp + "); see " +
                       found.entry->path + " line " + std::to_string(found.entry->line) +
                       ": if the host was reinstalled, remove that line; otherwise this may "
                       "be a man-in-the-middle attack"};
  case HostKeyStatus::unknown:
    break;
  }
  if (m_options.host_key_policy == HostKeyPolicy::no) {
    spdlog::info("{} ({}) is not in {}; not recorded (--strict-host-key-checking=no)", name, fp,
                 files);
    return std::nullopt;
  }
  if (m_options.host_key_policy == HostKeyPolicy::yes || m_files.write_file.empty()) {
    return Failure{Outcome::host_key_unknown,
                   "host key for " + name + " (" + fp + ") is not in " + files +
                       ": verify the fingerprint and add it, or use "
                       "--strict-host-key-checking=accept-new"};
  }
  return record_host_key(name, type, blob, fp);
}

std::optional<Failure> SshSession::record_host_key(const std::string& name,
                                                   const std::string& type,
                                                   const std::string& blob, const std::string& fp) {
  const std::string& file = m_files.write_file;
  const std::string line = known_hosts_line(name, type, blob, m_files.resolved.hash_known_hosts);
  std::lock_guard lock(known_hosts_mutex());
  // ~/.ssh is made (0700) when missing, as ssh does; any other missing directory is an error.
  const size_t slash = file.rfind('/');
  if (slash != std::string::npos && file.substr(0, slash) == user_home() + "/.ssh") {
    ::mkdir(file.substr(0, slash).c_str(), 0700);
  }
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  bool ok = fd >= 0;
  if (ok) {
    // A file without a final newline gets one first, so the new line stands alone.
    struct stat st {};
    char last = '\n';
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      const int rd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (rd >= 0) {
        if (::pread(rd, &last, 1, st.st_size - 1) != 1) {
          last = '\n';
        }
        ::close(rd);
      }
    }
    const std::string text = (last == '\n' ? "" : "\n") + line;
    ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ok = ::close(fd) == 0 && ok;
  }
  if (!ok) {
    return Failure{Outcome::error, "cannot record the host key of " + name + " in " + file +
                                       ": " + std::strerror(errno)};
  }
  spdlog::info("added {} ({}) to {}", name, fp, file);
  return std::nullopt;
}

} // namespace tpuctl::remote::detail
