// SHA-256 as specified in FIPS 180-4: the message is padded with a 1 bit, zeros and its 64-bit
// big-endian bit length to a multiple of 512 bits; each 512-bit block is expanded into 64 words
// and mixed into the eight 32-bit state words by 64 rounds of the compression function.
#include "util/sha256.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "util/sha256_blocks.hpp"

namespace tpuctl::util {

namespace {

constexpr uint32_t rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

// The SHA extensions when the CPU has them, else the portable loop: chosen once per process.
using BlocksFn = void (*)(uint32_t*, const uint8_t*, size_t);
BlocksFn blocks_fn() {
  static const BlocksFn fn = detail::sha256_shani_available() ? detail::sha256_blocks_shani
                                                              : detail::sha256_blocks_portable;
  return fn;
}

} // namespace

namespace detail {

const uint32_t k_sha256_round[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

void sha256_blocks_portable(uint32_t state[8], const uint8_t* data, size_t blocks) {
  for (; blocks > 0; --blocks, data += 64) {
    const uint8_t* block = data;
    std::array<uint32_t, 64> w{};
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t{block[4 * i]} << 24) | (uint32_t{block[4 * i + 1]} << 16) |
             (uint32_t{block[4 * i + 2]} << 8) | uint32_t{block[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + s1 + ch + k_sha256_round[i] + w[i];
      uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = s0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

} // namespace detail

Sha256::Sha256()
    : m_state{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
              0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::update(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  m_total_bytes += size;
  if (m_block_used > 0) {
    size_t take = std::min(size, m_block.size() - m_block_used);
    std::memcpy(m_block.data() + m_block_used, p, take);
    m_block_used += take;
    p += take;
    size -= take;
    if (m_block_used < m_block.size()) {
      return;
    }
    blocks_fn()(m_state.data(), m_block.data(), 1);
    m_block_used = 0;
  }
  if (size >= 64) {
    blocks_fn()(m_state.data(), p, size / 64);
    p += size / 64 * 64;
    size %= 64;
  }
  std::memcpy(m_block.data(), p, size);
  m_block_used = size;
}

std::array<uint8_t, 32> Sha256::digest() {
  uint64_t bits = m_total_bytes * 8;
  uint8_t pad[128] = {0x80};
  size_t pad_len = (m_block_used < 56) ? 56 - m_block_used : 120 - m_block_used;
  for (int i = 0; i < 8; ++i) {
    pad[pad_len + static_cast<size_t>(i)] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  }
  update(pad, pad_len + 8);
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < 8; ++i) {
    out[4 * i] = static_cast<uint8_t>(m_state[i] >> 24);
    out[4 * i + 1] = static_cast<uint8_t>(m_state[i] >> 16);
    out[4 * i + 2] = static_cast<uint8_t>(m_state[i] >> 8);
    out[4 * i + 3] = static_cast<uint8_t>(m_state[i]);
  }
  return out;
}

std::string Sha256::hex_digest() {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t byte : digest()) {
    out += k_hex[byte >> 4];
    out += k_hex[byte & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex_digest();
}

Expected<std::string> sha256_file_hex(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return make_error(ErrorKind::failure, "cannot read '" + file.string() +
                                              "': " + std::strerror(errno) +
                                              " (check the path and its permissions)");
  }
  Sha256 h;
  std::array<char, 65536> buf{};
  while (in) {
    in.read(buf.data(), buf.size());
    h.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) {
    return make_error(ErrorKind::failure, "error while reading '" + file.string() + "'");
  }
  return h.hex_digest();
}

} // namespace tpuctl::util
