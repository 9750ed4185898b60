// What a command reads on its stdin: a string (a script, the secrets tpuctl sends first), or
// --stdin's bytes, which may be any size: those are spooled (remote/spool.hpp: the first 64 KiB
// in memory, the rest in an unlinked temporary file) and every host's session reads them from
// there at its own pace, so a 10 GB stdin sent to 256 workers costs 64 KiB of memory, not
// 10 GB, and a slow host never holds the others back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "remote/spool.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

class InputBytes {
public:
  static std::shared_ptr<const InputBytes> of(std::string text);
  static std::shared_ptr<const InputBytes> of(std::shared_ptr<const std::string> text);
  // `prefix`, then what `fd` gives until EOF. Errors (failure): reading `fd` or writing the
  // temporary file failed (naming why).
  static Expected<std::shared_ptr<const InputBytes>> spool(std::string_view prefix, int fd);

  uint64_t size() const;
  bool empty() const { return size() == 0; }
  // Up to `max` bytes from `offset`: a view of the string, or of `buffer` read from the spool.
  // Empty at the end, or when the spool cannot be read (`error` says why).
  std::string_view read(uint64_t offset, size_t max, std::string& buffer,
                        std::string* error = nullptr) const;

private:
  std::shared_ptr<const std::string> m_text;
  std::unique_ptr<Spool> m_spool;
};

} // namespace tpuctl::remote
