// A JSON string written piece by piece: for a value too large to hold (a host's 256 MB of
// output in a jsonl record), escaped as it streams through, giving the text nlohmann::json's
// dump(-1, ' ', false, error_handler_t::replace) gives for the whole string: UTF-8 passes as it
// is; a byte that cannot start a sequence, and a sequence broken off (by a byte that cannot
// continue it, or by the end), each become one U+FFFD; control characters are escaped (\n, \t,
// \u001b ...), as are '"' and '\'. A sequence split between two pieces is carried over whole.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace tpuctl::util {

class JsonStringWriter {
public:
  // Writes the opening quote.
  explicit JsonStringWriter(std::ostream& os);
  void feed(std::string_view piece);
  // Whatever incomplete sequence is left becomes U+FFFD; then the closing quote.
  void finish();

private:
  // Escapes what of `bytes` is complete, returns how many trailing bytes form a sequence that
  // may still be completed by the next piece.
  size_t emit(std::string_view bytes, bool last);

  std::ostream& m_os;
  std::string m_carry; // at most 3 bytes of an unfinished sequence
  std::string m_out;   // the escaped text of one piece, written at once
};

} // namespace tpuctl::util
