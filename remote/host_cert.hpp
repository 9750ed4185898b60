// OpenSSH host certificates, checked by tpuctl because libssh 0.10 cannot: it never negotiates
// a certificate host key and skips `@cert-authority` lines. A certificate is a self-contained
// statement "this key is host N, from T1 to T2, signed by CA K", so where it was fetched from
// does not matter: ssh_connect.cpp fetches the certificates of the hosts that need one out of
// band (ssh-keyscan -c), and accepts a host when the key it proves in the real session is the
// key of a certificate that passes check_host_certificate for that host.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "remote/known_hosts.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

struct SshCertificate {
  std::string type;       // "ssh-ed25519-cert-v01@openssh.com"
  std::string public_key; // the certified key's plain blob (what a .pub file holds)
  uint64_t serial = 0;
  uint32_t cert_type = 0; // 1 user, 2 host
  std::string key_id;
  std::vector<std::string> principals;
  uint64_t valid_after = 0;
  uint64_t valid_before = 0;
  std::vector<std::pair<std::string, std::string>> critical_options;
  std::vector<std::pair<std::string, std::string>> extensions;
  std::string signature_key; // the CA's public key blob
  std::string signature;     // the CA's signature blob
  std::string signed_data;   // the bytes the signature covers
};

// Parses a certificate blob (PROTOCOL.certkeys) of type ssh-ed25519, ecdsa-sha2-nistp256/384/521
// or ssh-rsa. Errors (auth): the type is not a certificate tpuctl reads, or the blob is malformed.
Expected<SshCertificate> parse_certificate(std::string_view blob);

// The plain key type of a certificate type: "ssh-ed25519-cert-v01@openssh.com" -> "ssh-ed25519".
std::string plain_key_type(std::string_view cert_type);

// Everything OpenSSH checks before it trusts a host certificate (reference: ssh-fleets.md 2.2),
// for the host `principal` (the name connected to, after ssh_config's HostName) whose known_hosts
// name is `name` ("[host]:port" off port 22), at `now` (seconds since the epoch):
//   the certificate is a host certificate; a @cert-authority line of `known` matching `name`
//   holds its signing key; that key's signature verifies (ssh_crypto.hpp); neither the
//   certified key nor the CA is @revoked for `name`; valid_after <= now < valid_before; the
//   principals are not empty and include `principal`; there are no critical options.
// Errors (auth): the first check that fails, naming what the certificate holds and the file.
Status check_host_certificate(const SshCertificate& cert, const KnownHosts& known,
                              const std::string& principal, const std::string& name, int64_t now);

} // namespace tpuctl::remote
