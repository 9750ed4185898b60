#include "remote/ssh_wire.hpp"

#include "util/sha256.hpp"

namespace tpuctl::remote::wire {

std::string fingerprint(std::string_view blob) {
  util::Sha256 h;
  h.update(blob);
  auto d = h.digest();
  return "SHA256:" +
         base64_encode(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()), false);
}

bool Reader::take(size_t n) {
  if (m_failed || m_data.size() - m_pos < n) {
    m_failed = true;
    return false;
  }
  return true;
}

std::string_view Reader::string() {
  uint32_t n = u32();
  if (!take(n)) {
    return {};
  }
  std::string_view s = m_data.substr(m_pos, n);
  m_pos += n;
  return s;
}

uint32_t Reader::u32() {
  if (!take(4)) {
    return 0;
  }
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v = (v << 8) | static_cast<uint8_t>(m_data[m_pos++]);
  }
  return v;
}

uint64_t Reader::u64() {
  uint64_t hi = u32();
  uint64_t lo = u32();
  return (hi << 32) | lo;
}

std::string string_field(std::string_view bytes) {
  std::string out;
  uint32_t n = static_cast<uint32_t>(bytes.size());
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  }
  out.append(bytes);
  return out;
}

} // namespace tpuctl::remote::wire
