#include "util/base64.hpp"

#include <array>
#include <cstdint>

namespace tpuctl::util {

namespace {

constexpr char k_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::array<int, 256> decode_table() {
  std::array<int, 256> t{};
  t.fill(-1);
  for (int i = 0; i < 64; ++i) {
    t[static_cast<unsigned char>(k_alphabet[i])] = i;
  }
  return t;
}

} // namespace

std::string base64_encode(std::string_view bytes, bool pad) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t n = (static_cast<uint8_t>(bytes[i]) << 16) |
                 (static_cast<uint8_t>(bytes[i + 1]) << 8) | static_cast<uint8_t>(bytes[i + 2]);
    out += k_alphabet[(n >> 18) & 63];
    out += k_alphabet[(n >> 12) & 63];
    out += k_alphabet[(n >> 6) & 63];
    out += k_alphabet[n & 63];
  }
  const size_t rest = bytes.size() - i;
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

std::optional<std::string> base64_decode(std::string_view text) {
  static const std::array<int, 256> k_table = decode_table();
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
    const int v = k_table[static_cast<unsigned char>(c)];
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

} // namespace tpuctl::util
