// Signature verification and HMAC-SHA1 for what libssh 0.10 cannot check: a certificate
// authority's signature on an OpenSSH certificate (host_cert.cpp) and hashed known_hosts names
// (known_hosts.cpp). Uses Debian's libcrypto (OpenSSL 3), the library libssh itself is built
// on, loaded on first use as libssh is (libssh_lazy.cpp), so commands that never check a
// certificate never load it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "util/expected.hpp"

namespace tpuctl::remote::crypto {

// The signature algorithms verify() accepts: "ssh-ed25519", "ecdsa-sha2-nistp256",
// "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "rsa-sha2-256", "rsa-sha2-512" (not "ssh-rsa",
// SHA-1, which OpenSSH's default CASignatureAlgorithms refuses too).
extern const char* const k_signature_algorithms;

// Checks that `signature` (an SSH signature blob: string algorithm, string signature) over
// `data` was made by `public_key` (an SSH public key blob). Errors (auth) say why: the key or
// algorithm is not supported, the blobs are malformed, the signature does not verify, or
// libcrypto cannot be loaded.
Status verify(std::string_view public_key, std::string_view signature, std::string_view data);

// HMAC-SHA1(key, data), 20 bytes; nullopt when libcrypto cannot be loaded.
std::optional<std::string> hmac_sha1(std::string_view key, std::string_view data);

} // namespace tpuctl::remote::crypto
