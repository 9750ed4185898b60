// Small string helpers that know nothing about TPUs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::util {

std::vector<std::string> split(std::string_view text, char sep);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string_view trim(std::string_view text);
// The last line of `text` with surrounding whitespace trimmed: what a failed command's stderr
// says last ("" for none).
std::string last_line(std::string_view text);
bool starts_with(std::string_view text, std::string_view prefix);
std::string to_lower(std::string_view text);
// `text` safe to show in a message: control characters and bytes >= 0x7f become \xNN, so a
// hostile name cannot move the cursor or forge a line. Long text is cut at 80 with "...".
std::string printable(std::string_view text);
// `text` with only its control characters (below 0x20, and 0x7f) as \xNN; UTF-8 and length kept.
std::string escape_controls(std::string_view text);

// Parses a whole decimal integer in [min, max]. The error names `what` and the offending text,
// e.g. "--port: 'abc' is not a whole number".
Expected<int64_t> parse_int(std::string_view text, std::string_view what, int64_t min = INT64_MIN,
                            int64_t max = INT64_MAX);

// Parses a comma list of integers: "4,64" -> {4, 64}. Every entry must lie in [min, max].
Expected<std::vector<int64_t>> parse_int_list(std::string_view text, std::string_view what,
                                              int64_t min, int64_t max);

// The longest duration parse_duration accepts: 100 years (36500d).
inline constexpr std::chrono::milliseconds k_max_duration{36'500LL * 86'400'000};

// Parses a duration such as "90s", "15m", "2h", "1d", "1h30m", "1.5s" or a bare number of
// seconds. Errors (usage, naming `what` and the text): not a duration, or longer than
// k_max_duration.
Expected<std::chrono::milliseconds> parse_duration(std::string_view text, std::string_view what);
// An optional --timeout: "" is 0 (no limit), anything else as parse_duration.
Expected<std::chrono::milliseconds> parse_optional_duration(std::string_view text,
                                                            std::string_view what);
// The inverse, for messages: 1500 -> "1.5s", 90000 -> "1m30s", 7200000 -> "2h", 250 -> "250ms".
std::string format_duration(std::chrono::milliseconds duration);

// A count and its noun, reading right for one: counted(1, "host") is "1 host", counted(3, "host")
// "3 hosts"; `plural` for nouns that do not just take an s ("queued resources" is the default's).
std::string counted(size_t n, std::string_view singular, std::string_view plural = {});

// Levenshtein edit distance (for "did you mean").
size_t edit_distance(std::string_view a, std::string_view b);

// The candidates closest to `word` (distance <= max(2, |word|/3), or a prefix match), best first.
std::vector<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates,
                                 size_t limit = 3);

// 16 random lowercase hex digits (std::random_device seeded): unique ids such as the uid of a
// queued resource or a workload, which tag every process they start.
std::string random_hex_id();

} // namespace tpuctl::util
