// The checks every command's values get on entry: a count, a duration, a timeout, a port. They
// are attached to flags as CLI11 validators (`->check(count_in(1, 1024))`) but stay inactive
// while CLI11 reads the command line; check_entry_values then runs every one of them on every
// value given, so each bad value is its own `tpuctl: error: --FLAG: ...` line (naming the value
// and the range), all of them, before anything is read or stored, the same way in every command.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "util/expected.hpp"

namespace tpuctl::cli {

// A whole number from `min` to `max`: "--node-count: '0' is not a count from 1 to 1024".
CLI::Validator count_in(int64_t min, int64_t max);

// A count as count_in, or `word` (any case): "--limit: '0' is not a count from 1 to ..., or
// unlimited".
CLI::Validator count_or(int64_t min, int64_t max, std::string word);

// A duration (90s, 15m, 2h, 1h30m, a bare number of seconds) longer than zero: a deadline, a
// run limit, an interval.
CLI::Validator positive_duration();

// A timeout: a duration; 0 means no limit, or what `zero` says (say so in the flag's help).
CLI::Validator timeout_duration(std::string zero = "no limit");

// A TCP port, 1 to 65535 (0 too when `allow_zero`: "pick one").
CLI::Validator port_number(bool allow_zero = false);

// What the validator above attached to `opt` says of `value` ("'abc' is not a count from 1 to
// 4096"); "" when it has none or accepts it. For CLI11's own conversion errors on such flags.
std::string entry_message(const CLI::Option& opt, std::string value);

// Runs the validators above on every value given to the command `root` parsed (and to the
// groups above it). Errors: usage, one message per refused value ("--hosts: 'abc' is not a
// count from 1 to 4096 (see 'tpuctl pool local-up --help')").
Status check_entry_values(CLI::App& root);

} // namespace tpuctl::cli
