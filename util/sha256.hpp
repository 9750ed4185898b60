// SHA-256 (FIPS 180-4), used to verify files pushed to remote hosts against the remote's
// `sha256sum`. A small streaming implementation so util/ needs no crypto library; it runs on the
// x86 SHA extensions where the CPU has them (util/sha256_blocks.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "util/expected.hpp"

namespace tpuctl::util {

// Streaming SHA-256: update() any number of times, then digest() once.
class Sha256 {
public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // The 32-byte digest. The object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  // The digest as 64 lowercase hex characters (what `sha256sum` prints).
  std::string hex_digest();

private:
  std::array<uint32_t, 8> m_state{};
  std::array<uint8_t, 64> m_block{};
  size_t m_block_used = 0;
  uint64_t m_total_bytes = 0;
};

// The hex SHA-256 of `data`. Never fails.
std::string sha256_hex(std::string_view data);

// The hex SHA-256 of a file's contents. Error (failure) naming the file when it cannot be read.
Expected<std::string> sha256_file_hex(const std::filesystem::path& file);

} // namespace tpuctl::util
