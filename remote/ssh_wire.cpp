#include "remote/ssh_wire.hpp"

#include "util/sha256.hpp"

namespace tpuctl::remote::wire {

namespace {

constexpr char k_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int value_of(char c) {
  if (c >= 'A' && c <= 'Z') {
    return c - 'A';
  }
  if (c >= 'a' && c <= 'z') {
    return c - 'a' + 26;
  }
  if (c >= '0' && c <= '9') {
    return c - '0' + 52;
  }
  if (c == '+') {
    return 62;
  }
  if (c == '/') {
    return 63;
  }
  return -1;
}

} // namespace

std::optional<std::string> base64_decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') {
    text.remove_suffix(1);
  }
  if (text.size() % 4 == 1) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = value_of(c);
    if (v < 0) {
      return std::nullopt;
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string base64_encode(std::string_view bytes, bool pad) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (static_cast<uint8_t>(bytes[i]) << 16) |
                 (static_cast<uint8_t>(bytes[i + 1]) << 8) | static_cast<uint8_t>(bytes[i + 2]);
    out += k_alphabet[(n >> 18) & 63];
    out += k_alphabet[(n >> 12) & 63];
    out += k_alphabet[(n >> 6) & 63];
    out += k_alphabet[n & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (rest == 2) {
      n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    }
    out += k_alphabet[(n >> 18) & 63];
    out += k_alphabet[(n >> 12) & 63];
    if (rest == 2) {
      out += k_alphabet[(n >> 6) & 63];
    }
    if (pad) {
      out += rest == 2 ? "=" : "==";
    }
  }
  return out;
}

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
