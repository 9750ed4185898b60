// Output of any size in bounded memory.
//
// A broadcast whose output is printed after a host ends (--output=grouped prints identical
// outputs once, jsonl prints one record per host) must hold every host's output until then: 64
// workers each printing 256 MB would be 16 GB. A Spool keeps the first `memory_limit` bytes in
// memory (most outputs are small and never touch the disk) and writes the rest to an unlinked
// temporary file (O_TMPFILE in $TMPDIR, else /tmp: it vanishes with the process, whatever kills
// it). It hashes everything as it arrives (SHA-256), so hosts with identical output are grouped
// by digest and size without comparing bytes, and reads back in pieces of at most 1 MiB for
// printing. A write the disk refuses is not fatal: the bytes after it are counted but lost, and
// error() says so, for the printer to tell the user.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "util/expected.hpp"
#include "util/sha256.hpp"

namespace tpuctl::remote {

inline constexpr size_t k_spool_memory = 64 * 1024; // per stream of each host

class Spool {
public:
  explicit Spool(size_t memory_limit = k_spool_memory) : m_limit(memory_limit) {}
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  void append(std::string_view data);
  uint64_t size() const { return m_size; }
  bool empty() const { return m_size == 0; }
  char last_byte() const { return m_last; }
  bool spilled() const { return m_fd >= 0; }
  // The hex SHA-256 of everything appended; no append may follow.
  const std::string& digest();
  // "" or why some bytes were lost ("the temporary file ... could not be written: ...").
  const std::string& error() const { return m_error; }
  // Calls `piece` with the content in order, in pieces of at most 1 MiB. Errors (failure): the
  // temporary file could not be read back.
  Status for_each(const std::function<void(std::string_view)>& piece) const;
  // Frees the content (memory and file) once it is printed or another host's identical one is
  // kept; size(), digest() and last_byte() stay. Reading it afterwards fails.
  void drop_content();
  bool has_content() const { return !m_dropped; }
  // The whole content as one string (for small outputs and tests).
  Expected<std::string> text() const;
  // Up to `max` bytes from `offset`: a view into the memory part, or into `buffer` filled from
  // the file. Empty at the end, or when the file cannot be read (`error` then says why).
  std::string_view read_at(uint64_t offset, size_t max, std::string& buffer,
                           std::string* error = nullptr) const;

private:
  bool spill();

  size_t m_limit;
  std::string m_head; // the first m_limit bytes
  int m_fd = -1;      // the rest, when there is more
  uint64_t m_file_size = 0;
  uint64_t m_size = 0;
  char m_last = '\0';
  util::Sha256 m_hash;
  std::string m_digest;
  std::string m_error;
  bool m_dropped = false;
};

} // namespace tpuctl::remote
