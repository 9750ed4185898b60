// Host certificates for libssh 0.10, which never negotiates one (it strips the certificate
// types from its host-key proposal) and skips `@cert-authority` and `@revoked` lines
// (shared/reference/ssh-fleets.md 2.3). tpuctl honours them in three steps:
//   1. Before a run (fetch_host_certificates, once per fan-out): every target whose known_hosts
//      has no plain line for it but a matching @cert-authority line "needs a certificate". Their
//      certificates are fetched out of band by ONE `ssh-keyscan -c -f -` per distinct port (a
//      pod: one process for all its hosts), into one pool. ssh-keyscan 9.2 prints certificates
//      without the host they came from, and it need not: a certificate binds a key to host
//      names under a CA's signature, whoever handed it over.
//   2. Before the key exchange (prepare_host_certificate): such a host gets its proposal
//      narrowed to the plain key types its certificates certify (SSH_OPTIONS_HOSTKEYS), so the
//      key the server proves is a certified one.
//   3. After it (check_host_key): a key @revoked for the host is refused whatever accepts it;
//      a host libssh finds unknown is accepted only when the key it proved in this session (its
//      signature over the exchange hash, which libssh checked) is the key of a pooled
//      certificate that passes check_host_certificate (host_cert.hpp) for this host. Else, under
//      --strict-host-key-checking=yes the host is refused naming the first failed check; under
//      accept-new or no the plain-key policy takes over with a warning, as OpenSSH falls back.
#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <set>
#include <sstream>

#include <libssh/libssh.h>
#include <spdlog/spdlog.h>

#include "remote/ssh_session.hpp"
#include "remote/ssh_wire.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote::detail {

namespace {

// A host trusted through a certificate: a @cert-authority line matches one of its names and no
// plain line matches any.
bool needs_certificate(const KnownHosts& known, const std::vector<std::string>& names) {
  bool ca = false;
  for (const auto& name : names) {
    if (!known.matching(name, KnownHostsMarker::none).empty()) {
      return false;
    }
    ca = ca || !known.matching(name, KnownHostsMarker::cert_authority).empty();
  }
  return ca;
}

// The first of `names` a @cert-authority line matches ("" when none).
std::string certificate_name(const KnownHosts& known, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    if (!known.matching(name, KnownHostsMarker::cert_authority).empty()) {
      return name;
    }
  }
  return "";
}

// The host-key algorithms that prove a key of `plain` type.
std::string algorithms_for(const std::string& plain) {
  return plain == "ssh-rsa" ? "rsa-sha2-512,rsa-sha2-256" : plain;
}

void parse_keyscan_output(const std::string& out, HostCertPool& pool) {
  for (const auto& line : util::split(out, '\n')) {
    std::istringstream in(line);
    std::vector<std::string> fields;
    for (std::string f; in >> f;) {
      fields.push_back(f);
    }
    for (size_t i = 0; i + 1 < fields.size(); ++i) {
      if (fields[i].find("-cert-v01@openssh.com") == std::string::npos) {
        continue;
      }
      auto blob = wire::base64_decode(fields[i + 1]);
      auto cert = blob ? parse_certificate(*blob) : Expected<SshCertificate>(Error{});
      if (cert) {
        pool.certs.push_back(std::move(*cert));
      } else if (blob) {
        spdlog::debug("ssh-keyscan gave a certificate tpuctl cannot read: {}",
                      cert.error().message);
      }
      break;
    }
  }
}

} // namespace

Expected<std::shared_ptr<const HostCertPool>>
fetch_host_certificates(const std::vector<const SshTarget*>& targets, const SshOptions& options) {
  auto pool = std::make_shared<HostCertPool>();
  std::map<unsigned, std::vector<std::string>> hosts_by_port;
  std::map<unsigned, std::vector<std::string>> names_by_port;
  std::set<std::string> seen;
  for (const SshTarget* t : targets) {
    TPUCTL_TRY_ASSIGN(auto files, host_key_files(*t, options));
    if (!files.known->has_markers() || !needs_certificate(*files.known, files.names)) {
      continue; // the common case: nothing to do for this host
    }
    const std::string name = known_hosts_name(files.resolved.hostname, files.resolved.port);
    if (!seen.insert(name).second) {
      continue;
    }
    std::string proxy = files.resolved.proxy_command;
    for (const auto& [key, value] : t->extra) {
      if (util::to_lower(key) == "proxycommand") {
        proxy = value;
      }
    }
    if (!proxy.empty() && proxy != "none") {
      pool->problems[name] = "it is reached through a ProxyCommand, which ssh-keyscan cannot use";
      continue;
    }
    hosts_by_port[files.resolved.port].push_back(files.resolved.hostname);
    names_by_port[files.resolved.port].push_back(name);
  }
  if (hosts_by_port.empty()) {
    return std::shared_ptr<const HostCertPool>(pool);
  }
  const std::string keyscan = util::find_program("ssh-keyscan");
  const long timeout_s =
      std::max<long>(1, static_cast<long>((options.connect_timeout.count() + 999) / 1000));
  for (const auto& [port, hosts] : hosts_by_port) {
    std::string problem;
    if (keyscan.empty()) {
      problem = "ssh-keyscan, which fetches host certificates, is not installed (install the "
                "Debian package openssh-client)";
    } else {
      util::ProcessOptions run;
      for (const auto& h : hosts) {
        run.stdin_data += h + "\n";
      }
      run.timeout = std::chrono::seconds(timeout_s * 3 + 10);
      spdlog::debug("fetching the host certificates of {} host(s) on port {} with ssh-keyscan -c",
                    hosts.size(), port);
      auto scanned =
          util::run_process({keyscan, "-c", "-t", "ed25519,ecdsa,rsa", "-T",
                             std::to_string(timeout_s), "-p", std::to_string(port), "-f", "-"},
                            run);
      if (!scanned) {
        problem = "ssh-keyscan could not be run: " + scanned.error().message;
      } else {
        if (scanned->timed_out) {
          problem = "ssh-keyscan -c did not finish in time";
        }
        parse_keyscan_output(scanned->out, *pool);
      }
    }
    if (!problem.empty()) {
      for (const auto& name : names_by_port[port]) {
        pool->problems[name] = problem;
      }
    }
  }
  return std::shared_ptr<const HostCertPool>(pool);
}

std::optional<Failure> SshSession::prepare_host_certificate(const SshTarget& target) {
  if (!m_files.known->has_markers()) {
    return std::nullopt;
  }
  m_cert_host = needs_certificate(*m_files.known, m_files.names);
  if (!m_cert_host) {
    return std::nullopt;
  }
  for (const auto& [key, value] : target.extra) {
    if (util::to_lower(key) == "hostkeyalgorithms") {
      return std::nullopt; // the user's choice stands
    }
  }
  // The types certified for this host's name first; every pooled type when none names it.
  std::vector<std::string> types, any;
  for (const auto& c : m_ctx.identities.host_certs().certs) {
    const std::string algs = algorithms_for(plain_key_type(c.type));
    bool named = false;
    for (const auto& p : c.principals) {
      named = named || host_patterns_match(p, m_host);
    }
    auto& list = named ? types : any;
    if (std::find(list.begin(), list.end(), algs) == list.end()) {
      list.push_back(algs);
    }
  }
  if (types.empty()) {
    types = any;
  }
  if (!types.empty()) {
    std::string joined;
    for (const auto& t : types) {
      joined += (joined.empty() ? "" : ",") + t;
    }
    ssh_options_set(m_session, SSH_OPTIONS_HOSTKEYS, joined.c_str());
  }
  return std::nullopt;
}

std::optional<Failure> SshSession::check_revoked(const std::string& name,
                                                 const std::string& server_blob,
                                                 const std::string& fp) {
  if (server_blob.empty()) {
    return std::nullopt;
  }
  if (const KnownHostsEntry* r = m_files.known->revoked(name, server_blob)) {
    return Failure{Outcome::host_key_changed,
                   "host key for " + name + " (" + fp + ") is @revoked in " + r->path +
                       " line " + std::to_string(r->line) +
                       ": tpuctl never accepts it; if the host has a new key, remove or replace "
                       "its known_hosts lines"};
  }
  return std::nullopt;
}

std::optional<Failure> SshSession::check_host_certificate_of(const std::string& server_blob,
                                                             const std::string& fp,
                                                             bool& fallback) {
  fallback = true;
  const HostCertPool& pool = m_ctx.identities.host_certs();
  const KnownHosts& known = *m_files.known;
  const std::string name = certificate_name(known, m_files.names);
  // The principal a certificate must name: HostKeyAlias, else the host connected to (ssh's
  // sshkey_cert_check_host).
  const std::string principal = m_files.resolved.host_key_alias.empty()
                                    ? m_host
                                    : m_files.resolved.host_key_alias;
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  std::optional<Error> first;
  for (const auto& c : pool.certs) {
    if (c.public_key != server_blob) {
      continue;
    }
    auto checked = check_host_certificate(c, known, principal, name, now);
    if (checked) {
      spdlog::debug("{}: host certificate '{}' (CA {}) accepted", m_label, c.key_id,
                    wire::fingerprint(c.signature_key));
      return std::nullopt;
    }
    if (known.revoked(name, c.signature_key)) {
      fallback = false;
    }
    if (!first) {
      first = checked.error();
    }
  }
  if (first) {
    const bool named = first->message.find(" line ") != std::string::npos;
    return Failure{Outcome::host_key_unknown,
                   first->message + (named ? "" : " (" + known.path + ")")};
  }
  auto problem = pool.problems.find(m_label);
  const std::string files = known.path.empty() ? std::string("no known_hosts file") : known.path;
  const std::string why = problem != pool.problems.end()
                              ? problem->second
                              : "ssh-keyscan -c got no certificate for that key from it";
  return Failure{Outcome::host_key_unknown,
                 "host key for " + name + " (" + fp + ") is not in " + files +
                     " and no host certificate for it could be had for its @cert-authority "
                     "line: " +
                     why};
}

} // namespace tpuctl::remote::detail
