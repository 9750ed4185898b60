// Standard base64 (RFC 4648 section 4), the one codec for the places that speak it: etcd's
// HTTP gateway (bytes fields, state/etcd_wire) and OpenSSH's key, known_hosts and fingerprint
// text (remote/ssh_wire).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tpuctl::util {

// `bytes` as base64, with '=' padding unless `pad` is false (OpenSSH's fingerprints have none).
std::string base64_encode(std::string_view bytes, bool pad = true);

// Decodes base64 with or without padding; nullopt on a character outside the alphabet or a
// length no encoding has (one character past a multiple of four).
std::optional<std::string> base64_decode(std::string_view text);

} // namespace tpuctl::util
