// Durations as users type them (--timeout, --lease, --interval): util::parse_duration and
// parse_optional_duration. Properties: a parsed duration is not negative, and format_duration's
// text (what messages show) parses back to it, to the second (format_duration drops the
// milliseconds of durations of a minute or more).
#include <chrono>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "util/strings.hpp"

using namespace tpuctl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 128) {
    return 0;
  }
  const std::string text = fuzz::text_of(data, size);
  auto optional = util::parse_optional_duration(text, "--timeout");
  auto d = util::parse_duration(text, "--timeout");
  FUZZ_CHECK(text.empty() ? optional && optional->count() == 0
                          : optional.has_value() == d.has_value(),
             text);
  if (!d) {
    FUZZ_CHECK(!d.error().message.empty(), text);
    return 0;
  }
  const int64_t ms = d->count();
  FUZZ_CHECK(ms >= 0, text + " -> " + std::to_string(ms));
  const std::string shown = util::format_duration(*d);
  auto again = util::parse_duration(shown, "--timeout");
  FUZZ_CHECK(again.has_value(), text + " -> " + shown + " does not parse");
  FUZZ_CHECK(std::llabs(again->count() - ms) < 1000, text + " -> " + std::to_string(ms) +
                                                         " ms -> " + shown + " -> " +
                                                         std::to_string(again->count()) + " ms");
  return 0;
}
