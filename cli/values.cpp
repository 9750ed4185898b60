#include "cli/values.hpp"

#include "cli/registry.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

// The names check_entry_values looks the validators up by.
constexpr const char* k_names[] = {"count", "positive duration", "timeout", "port",
                                   "count or word"};

// `check` as a validator named `name`, inactive while CLI11 parses (check_entry_values runs it).
CLI::Validator entry_check(std::function<std::string(std::string&)> check, const char* name) {
  CLI::Validator v(std::move(check), "", name);
  v.active(false);
  return v;
}

} // namespace

CLI::Validator count_in(int64_t min, int64_t max) {
  return entry_check(
      [min, max](std::string& text) -> std::string {
        if (util::parse_int(text, "value", min, max)) {
          return "";
        }
        return "'" + util::printable(text) + "' is not a count from " + std::to_string(min) +
               " to " + std::to_string(max);
      },
      k_names[0]);
}

CLI::Validator count_or(int64_t min, int64_t max, std::string word) {
  return entry_check(
      [min, max, word](std::string& text) -> std::string {
        if (util::to_lower(text) == word || util::parse_int(text, "value", min, max)) {
          return "";
        }
        return "'" + util::printable(text) + "' is not a count from " + std::to_string(min) +
               " to " + std::to_string(max) + ", or " + word;
      },
      k_names[4]);
}

CLI::Validator positive_duration() {
  return entry_check(
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
      k_names[1]);
}

CLI::Validator timeout_duration(std::string zero) {
  return entry_check(
      [zero](std::string& text) -> std::string {
        auto d = util::parse_duration(text, "value");
        return d ? ""
                 : "'" + util::printable(text) +
                       "' is not a duration (use e.g. 90s, 15m, 2h, 1h30m; 0 for " + zero + ")";
      },
      k_names[2]);
}

CLI::Validator port_number(bool allow_zero) {
  return entry_check(
      [allow_zero](std::string& text) -> std::string {
        auto n = util::parse_int(text, "value", allow_zero ? 0 : 1, 65535);
        return n ? ""
                 : "'" + util::printable(text) + "' is not a port (" + (allow_zero ? "0" : "1") +
                       " to 65535)";
      },
      k_names[3]);
}

std::string entry_message(const CLI::Option& opt, std::string value) {
  // CLI11 has no const get_validator; the validator is only copied here, never changed.
  auto& option = const_cast<CLI::Option&>(opt);
  for (const char* name : k_names) {
    try {
      CLI::Validator check = *option.get_validator(name);
      check.active(true);
      return check(value);
    } catch (const CLI::OptionNotFound&) {
    }
  }
  return "";
}

Status check_entry_values(CLI::App& root) {
  const std::string help = " (see '" + command_path(deepest_parsed(root)) + " --help')";
  ErrorList problems;
  for (CLI::App* app = &root; app != nullptr;) {
    for (CLI::Option* opt : app->get_options([](const CLI::Option*) { return true; })) {
      if (opt->count() == 0) {
        continue;
      }
      for (const auto& value : opt->results()) {
        if (std::string why = entry_message(*opt, value); !why.empty()) {
          problems.add(ErrorKind::usage, opt->get_name() + ": " + why + help);
        }
      }
    }
    CLI::App* next = nullptr;
    for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
      if (sub->parsed()) {
        next = sub;
        break;
      }
    }
    app = next;
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return tpuctl::ok();
}

} // namespace tpuctl::cli
