#include "util/json_string.hpp"

#include <cstdint>

namespace tpuctl::util {

namespace {

constexpr const char* k_replacement = "\xEF\xBF\xBD"; // U+FFFD

// The length of the UTF-8 sequence lead byte `b` starts, 0 when it cannot start one; and the
// range its second byte must fall in (RFC 3629's table: no overlongs, no surrogates, <= U+10FFFF).
int sequence_length(uint8_t b, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    return 2;
  }
  if (b >= 0xE0 && b <= 0xEF) {
    lo = b == 0xE0 ? 0xA0 : 0x80;
    hi = b == 0xED ? 0x9F : 0xBF;
    return 3;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    lo = b == 0xF0 ? 0x90 : 0x80;
    hi = b == 0xF4 ? 0x8F : 0xBF;
    return 4;
  }
  return 0;
}

void escape_ascii(char c, std::string& out) {
  switch (c) {
  case '"':
    out += "\\\"";
    return;
  case '\\':
    out += "\\\\";
    return;
  case '\b':
    out += "\\b";
    return;
  case '\f':
    out += "\\f";
    return;
  case '\n':
    out += "\\n";
    return;
  case '\r':
    out += "\\r";
    return;
  case '\t':
    out += "\\t";
    return;
  default:
    break;
  }
  if (static_cast<uint8_t>(c) < 0x20) {
    static const char* hex = "0123456789abcdef";
    out += "\\u00";
    out += hex[(c >> 4) & 0xF];
    out += hex[c & 0xF];
    return;
  }
  out += c;
}

} // namespace

JsonStringWriter::JsonStringWriter(std::ostream& os) : m_os(os) {
  m_os << '"';
}

size_t JsonStringWriter::emit(std::string_view bytes, bool last) {
  m_out.clear();
  size_t i = 0;
  while (i < bytes.size()) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) {
      escape_ascii(static_cast<char>(b), m_out);
      ++i;
      continue;
    }
    uint8_t lo = 0, hi = 0;
    const int len = sequence_length(b, lo, hi);
    if (len == 0) {
      m_out += k_replacement;
      ++i;
      continue;
    }
    size_t k = 1;
    bool bad = false;
    for (; k < static_cast<size_t>(len) && i + k < bytes.size(); ++k) {
      const auto c = static_cast<uint8_t>(bytes[i + k]);
      const uint8_t min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
      if (c < min || c > max) {
        bad = true;
        break;
      }
    }
    if (bad) {
      m_out += k_replacement; // one for the broken sequence; the byte that broke it starts afresh
      i += k;
      continue;
    }
    if (k < static_cast<size_t>(len)) { // cut by the end of this piece
      if (!last) {
        m_os << m_out;
        return bytes.size() - i;
      }
      m_out += k_replacement; // one for the unfinished sequence at the very end
      break;
    }
    m_out.append(bytes.substr(i, static_cast<size_t>(len)));
    i += static_cast<size_t>(len);
  }
  m_os << m_out;
  return 0;
}

void JsonStringWriter::feed(std::string_view piece) {
  if (piece.empty()) {
    return;
  }
  if (m_carry.empty()) {
    const size_t left = emit(piece, false);
    m_carry.assign(piece.substr(piece.size() - left));
    return;
  }
  // A sequence was cut by the last piece's end (rare: copying this piece once costs nothing).
  const std::string joined = m_carry + std::string(piece);
  const size_t left = emit(joined, false);
  m_carry = joined.substr(joined.size() - left);
}

void JsonStringWriter::finish() {
  if (!m_carry.empty()) {
    emit(m_carry, true);
    m_carry.clear();
  }
  m_os << '"';
}

} // namespace tpuctl::util
