// The checks every command's values get on entry, as CLI11 validators: a count, a duration, a
// timeout, a port. They run while the command line is parsed, so a bad value is refused (exit 2,
// one `tpuctl: error: --FLAG: ...` line naming the value and the range) before anything is read
// or stored, the same way in every command.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace tpuctl::cli {

// A whole number from `min` to `max`: "--node-count: '0' is not a count from 1 to 1024".
CLI::Validator count_in(int64_t min, int64_t max);

// A duration (90s, 15m, 2h, 1h30m, a bare number of seconds) longer than zero: a deadline, a
// run limit, an interval.
CLI::Validator positive_duration();

// A timeout: a duration; 0 means no limit (say so in the flag's help).
CLI::Validator timeout_duration();

// A TCP port, 1 to 65535 (0 too when `allow_zero`: "pick one").
CLI::Validator port_number(bool allow_zero = false);

} // namespace tpuctl::cli
