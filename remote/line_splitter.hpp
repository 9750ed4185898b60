// Cuts a byte stream into lines for `[host] line` output: bytes are buffered until a newline,
// so a line is always handed out whole, however the remote's writes were split into packets.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tpuctl::remote {

class LineSplitter {
public:
  // emit(text, complete): `text` without its newline; complete=false for the unterminated last
  // line at finish() and for the pieces of a line longer than `max_line` bytes.
  using Emit = std::function<void(std::string_view text, bool complete)>;

  explicit LineSplitter(size_t max_line = size_t{1} << 20) : m_max_line(max_line) {}

  // Emits every line completed by `data`. Never fails.
  void feed(std::string_view data, const Emit& emit);
  // Emits what is left (a last line without newline), if anything. Never fails.
  void finish(const Emit& emit);
  size_t buffered() const { return m_partial.size(); }

private:
  size_t m_max_line;
  std::string m_partial;
};

} // namespace tpuctl::remote
