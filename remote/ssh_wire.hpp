// The small pieces of the SSH wire encoding (RFC 4251) that tpuctl reads itself because libssh
// 0.10 has no API for them: base64 as in .pub and known_hosts files, a bounds-checked reader of
// `string` / `uint32` / `uint64` fields, and OpenSSH's "SHA256:..." fingerprint of a key blob.
// Used by known_hosts.cpp and host_cert.cpp; nothing here touches the network or libssh.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/base64.hpp"

namespace tpuctl::remote::wire {

// Standard base64 (util/base64.hpp), as .pub and known_hosts files write it.
using util::base64_decode;
using util::base64_encode;

// "SHA256:" + unpadded base64 of the SHA-256 of `blob`, as ssh-keygen -l prints it.
std::string fingerprint(std::string_view blob);

// Reads RFC 4251 fields from a blob; a read past the end sets failed() and returns empty values.
class Reader {
public:
  explicit Reader(std::string_view data) : m_data(data) {}
  std::string_view string();
  uint32_t u32();
  uint64_t u64();
  bool failed() const { return m_failed; }
  bool at_end() const { return m_pos == m_data.size(); }
  size_t position() const { return m_pos; }

private:
  bool take(size_t n);
  std::string_view m_data;
  size_t m_pos = 0;
  bool m_failed = false;
};

// A `string` field: uint32 length, then the bytes.
std::string string_field(std::string_view bytes);

} // namespace tpuctl::remote::wire
