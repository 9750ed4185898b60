// Timestamps as users type and read them: RFC 3339 ("2026-11-22T10:00:00Z",
// "2026-11-22T11:00:00+01:00"), as gcloud's --valid-until-time and --valid-after-time take them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/expected.hpp"

namespace tpuctl::util {

// Unix milliseconds of an RFC 3339 timestamp (date 'T' time, optional fraction, then 'Z' or
// +hh:mm / -hh:mm). Fails with usage naming `what` and `text` and showing the expected form.
Expected<int64_t> parse_timestamp(std::string_view text, std::string_view what);

// "2026-11-22T10:00:00Z" (UTC, whole seconds). 0 gives "".
std::string format_timestamp(int64_t unix_ms);
// "2026-11-22T10:00:00.123Z" (UTC, milliseconds: what json output carries, so no precision is
// lost against the stored unix milliseconds). 0 gives "".
std::string format_timestamp_ms(int64_t unix_ms);

// The system clock now, in unix milliseconds (what records and events store).
int64_t unix_now_ms();

} // namespace tpuctl::util
