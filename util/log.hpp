// Logging set-up. Logs are diagnostics only: they go to stderr (or --log-file), never stdout.
#pragma once

#include <string>

#include "util/expected.hpp"

namespace tpuctl::util {

enum class Verbosity { debug, info, warning, error, none };

// Parses "debug|info|warning|error|none".
Expected<Verbosity> parse_verbosity(const std::string& text);

// Routes spdlog's default logger to stderr at `level`, or to `log_file` (appending) when it is
// not empty. Returns an error naming the file when it cannot be opened.
Status init_logging(Verbosity level, const std::string& log_file);

} // namespace tpuctl::util
