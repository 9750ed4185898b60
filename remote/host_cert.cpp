#include "remote/host_cert.hpp"

#include <ctime>

#include "remote/ssh_crypto.hpp"
#include "remote/ssh_wire.hpp"

namespace tpuctl::remote {

namespace {

constexpr std::string_view k_suffix = "-cert-v01@openssh.com";

Error bad(const std::string& why) {
  return Error{ErrorKind::auth, why};
}

std::vector<std::pair<std::string, std::string>> options_of(std::string_view packed, bool& ok) {
  std::vector<std::pair<std::string, std::string>> out;
  wire::Reader r(packed);
  while (!r.at_end() && !r.failed()) {
    std::string name(r.string());
    std::string data(r.string());
    out.emplace_back(std::move(name), std::move(data));
  }
  ok = ok && !r.failed();
  return out;
}

std::string utc(uint64_t t) {
  if (t > static_cast<uint64_t>(INT64_MAX / 2)) {
    return "forever";
  }
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    out += (out.empty() ? "" : ", ") + n;
  }
  return out;
}

} // namespace

std::string plain_key_type(std::string_view cert_type) {
  if (cert_type.size() > k_suffix.size() &&
      cert_type.substr(cert_type.size() - k_suffix.size()) == k_suffix) {
    return std::string(cert_type.substr(0, cert_type.size() - k_suffix.size()));
  }
  return std::string(cert_type);
}

Expected<SshCertificate> parse_certificate(std::string_view blob) {
  SshCertificate c;
  wire::Reader r(blob);
  c.type = std::string(r.string());
  const std::string plain = plain_key_type(c.type);
  if (r.failed() || plain == c.type) {
    return bad("not an OpenSSH certificate (its type is '" + c.type + "')");
  }
  r.string(); // nonce
  c.public_key = wire::string_field(plain);
  if (plain == "ssh-ed25519") {
    c.public_key += wire::string_field(r.string());
  } else if (plain.rfind("ecdsa-sha2-", 0) == 0) {
    c.public_key += wire::string_field(r.string()); // curve
    c.public_key += wire::string_field(r.string()); // point
  } else if (plain == "ssh-rsa") {
    c.public_key += wire::string_field(r.string()); // e
    c.public_key += wire::string_field(r.string()); // n
  } else {
    return bad("certificate type '" + c.type +
               "' is not supported (tpuctl reads ed25519, ecdsa and rsa certificates)");
  }
  c.serial = r.u64();
  c.cert_type = r.u32();
  c.key_id = std::string(r.string());
  wire::Reader principals(r.string());
  while (!principals.at_end() && !principals.failed()) {
    c.principals.emplace_back(principals.string());
  }
  c.valid_after = r.u64();
  c.valid_before = r.u64();
  bool ok = !principals.failed();
  c.critical_options = options_of(r.string(), ok);
  c.extensions = options_of(r.string(), ok);
  r.string(); // reserved
  c.signature_key = std::string(r.string());
  const size_t signed_end = r.position();
  c.signature = std::string(r.string());
  if (r.failed() || !ok || !r.at_end()) {
    return bad("the " + c.type + " certificate is malformed");
  }
  c.signed_data = std::string(blob.substr(0, signed_end));
  return c;
}

Status check_host_certificate(const SshCertificate& cert, const KnownHosts& known,
                              const std::string& principal, const std::string& name, int64_t now) {
  const std::string what = "the host certificate of " + name + " (key id '" + cert.key_id + "')";
  if (cert.cert_type != 2) {
    return bad(what + " is a user certificate, not a host certificate");
  }
  const KnownHostsEntry* ca = nullptr;
  for (const KnownHostsEntry* e : known.matching(name, KnownHostsMarker::cert_authority)) {
    if (e->key == cert.signature_key) {
      ca = e;
      break;
    }
  }
  wire::Reader ca_type(cert.signature_key);
  const std::string ca_text =
      std::string(ca_type.string()) + " " + wire::fingerprint(cert.signature_key);
  if (ca == nullptr) {
    return bad(what + " is signed by a CA (" + ca_text + ") that no @cert-authority line for " +
               name + " in " + known.path + " names");
  }
  const std::string where = ca->path + " line " + std::to_string(ca->line);
  if (auto verified = crypto::verify(cert.signature_key, cert.signature, cert.signed_data);
      !verified) {
    return bad(what + ": the CA's signature (CA of " + where +
               ") is not valid: " + verified.error().message);
  }
  if (const KnownHostsEntry* r = known.revoked(name, cert.public_key)) {
    return bad("the host key of " + name + " (" + wire::fingerprint(cert.public_key) +
               ") is @revoked in " + r->path + " line " + std::to_string(r->line));
  }
  if (const KnownHostsEntry* r = known.revoked(name, cert.signature_key)) {
    return bad(what + " is signed by a CA (" + ca_text + ") that is @revoked in " + r->path +
               " line " + std::to_string(r->line));
  }
  const uint64_t t = now < 0 ? 0 : static_cast<uint64_t>(now);
  if (t < cert.valid_after) {
    return bad(what + " is not valid yet: valid from " + utc(cert.valid_after) + " to " +
               utc(cert.valid_before));
  }
  if (t >= cert.valid_before) {
    return bad(what + " has expired: valid from " + utc(cert.valid_after) + " to " +
               utc(cert.valid_before));
  }
  if (cert.principals.empty()) {
    return bad(what + " lists no principals (tpuctl requires the host's name among them, as "
                      "OpenSSH 10.3 does)");
  }
  bool listed = false;
  for (const auto& p : cert.principals) {
    listed = listed || host_patterns_match(p, principal);
  }
  if (!listed) {
    return bad(what + " is for " + joined(cert.principals) + ", not for '" + principal + "'");
  }
  if (!cert.critical_options.empty()) {
    return bad(what + " has critical options (" + cert.critical_options.front().first +
               "), which no host certificate may have");
  }
  return tpuctl::ok();
}

} // namespace tpuctl::remote
