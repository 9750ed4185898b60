#include "cli/values.hpp"

#include "util/strings.hpp"

namespace tpuctl::cli {

CLI::Validator count_in(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        auto n = util::parse_int(text, "value", min, max);
        if (n) {
          return "";
        }
        return "'" + util::printable(text) + "' is not a count from " + std::to_string(min) +
               " to " + std::to_string(max);
      },
      "", "count");
}

CLI::Validator positive_duration() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto d = util::parse_duration(text, "value");
        if (!d) {
          return "'" + util::printable(text) +
                 "' is not a duration (use e.g. 90s, 15m, 2h, 1d or 1h30m)";
        }
        if (d->count() <= 0) {
          return "'" + util::printable(text) + "' is no time at all: give a duration longer than 0";
        }
        return "";
      },
      "", "positive duration");
}

CLI::Validator timeout_duration() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto d = util::parse_duration(text, "value");
        return d ? ""
                 : "'" + util::printable(text) +
                       "' is not a duration (use e.g. 90s, 15m, 2h, 1h30m; 0 for no limit)";
      },
      "", "timeout");
}

CLI::Validator port_number(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        auto n = util::parse_int(text, "value", allow_zero ? 0 : 1, 65535);
        return n ? ""
                 : "'" + util::printable(text) + "' is not a port (" + (allow_zero ? "0" : "1") +
                       " to 65535)";
      },
      "", "port");
}

} // namespace tpuctl::cli
