#include "cli/usage_errors.hpp"

#include <algorithm>

#include "cli/registry.hpp"
#include "cli/values.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

// Every long flag usable at `app` (its own and, through fallthrough, its parents').
std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* a = &app; a; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const auto& l : opt->get_lnames()) {
        names.push_back("--" + l);
      }
    }
  }
  return names;
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  auto best = util::nearest(word, candidates, 1);
  return best.empty() ? "" : "; did you mean '" + best.front() + "'?";
}

std::string lower_first(std::string s) {
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z' && !(s.size() > 1 && s[1] >= 'A' && s[1] <= 'Z')) {
    s[0] = static_cast<char>(s[0] - 'A' + 'a');
  }
  return s;
}

// The option `name` ("--cluster", "-q", or a positional's "W") usable at `app`, or nullptr.
const CLI::Option* find_option(const CLI::App& app, const std::string& name) {
  for (const CLI::App* a = &app; a; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      if (opt->get_name() == name || opt->check_name(name)) {
        return opt;
      }
    }
  }
  return nullptr;
}

// "W (the workload, or --workload W)": what an option takes, from its help.
std::string takes(const CLI::App& app, const std::string& name) {
  const CLI::Option* opt = find_option(app, name);
  if (opt == nullptr) {
    return "";
  }
  std::string type = opt->get_type_name();
  std::string what = opt->get_description();
  // CLI11's own type words (TEXT, INT, ...) say nothing a user needs.
  static const std::vector<std::string> k_generic = {"TEXT",    "INT",    "UINT",   "FLOAT",
                                                     "BOOLEAN", "NUMBER", "[TEXT]", "[INT]"};
  if (type.empty() || type == name ||
      std::find(k_generic.begin(), k_generic.end(), type) != k_generic.end()) {
    return what.empty() ? "" : " (" + what + ")";
  }
  return " (" + type + (what.empty() ? "" : ": " + what) + ")";
}

// `text` between `before` and `after` ("" when either is missing; `after` empty: to the end).
std::string between(const std::string& text, const std::string& before, const std::string& after) {
  const auto start = text.find(before);
  if (start == std::string::npos) {
    return "";
  }
  const auto from = start + before.size();
  const auto end = after.empty() ? std::string::npos : text.find(after, from);
  if (!after.empty() && end == std::string::npos) {
    return "";
  }
  return text.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

} // namespace

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  // Inside a hidden group (agent) its commands, hidden as it is, are the ones to suggest.
  const bool in_hidden = app.get_parent() != nullptr && app.get_group().empty();
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_group().empty() && !in_hidden) {
      continue; // hidden
    }
    names.push_back(sub->get_name());
    for (const auto& a : sub->get_aliases()) {
      names.push_back(a);
    }
  }
  return names;
}

std::string describe_parse_error(const CLI::App& root, const CLI::ParseError& e) {
  const CLI::App& where = deepest_parsed(root);
  const std::string path = command_path(where);
  const std::string help_hint = " (see '" + path + " --help')";
  const std::string what = e.what();

  std::vector<std::string> extras = where.remaining();
  if (extras.empty()) {
    extras = root.remaining(true);
  }
  // A missing positional next to an unknown flag: most likely a value starting with '-' (a
  // name such as '-rf'), which is never taken as a value; name it rather than the positional.
  const bool required = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr &&
                        std::any_of(extras.begin(), extras.end(),
                                    [](const std::string& w) { return util::starts_with(w, "-"); });
  if ((dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr || required) && !extras.empty()) {
    // One mistake, one line: the first stray word (a misspelt command's arguments, or a
    // misspelt flag's value, are not mistakes of their own).
    auto word = extras.front();
    if (required) {
      word = *std::find_if(extras.begin(), extras.end(),
                           [](const std::string& w) { return util::starts_with(w, "-"); });
    }
    if (util::starts_with(word, "-")) {
      const std::string flag = word.substr(0, word.find('='));
      return "unknown flag '" + util::printable(flag) + "' for '" + path + "'" +
             suggestion(flag, flag_names(where)) + help_hint;
    }
    if (!subcommand_names(where).empty()) {
      return "unknown command '" + util::printable(word) + "' for '" + path + "'" +
             suggestion(word, subcommand_names(where)) + help_hint;
    }
    return "unexpected argument '" + util::printable(word) + "' for '" + path + "'" + help_hint;
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    // "Could not convert: --max-restarts = abc", "The value abc is not an allowed value for X".
    std::string name = between(what, "Could not convert: ", " = ");
    std::string value = between(what, " = ", "");
    if (name.empty()) {
      name = between(what, " is not an allowed value for ", "");
      value = between(what, "The value ", " is not an allowed value");
    }
    if (!name.empty()) {
      // A flag with an entry check says what it wants as it would of any other bad value.
      if (const CLI::Option* opt = find_option(where, name); opt != nullptr) {
        if (std::string why = entry_message(*opt, value); !why.empty()) {
          return opt->get_name() + ": " + why + help_hint;
        }
      }
      return "'" + util::printable(value) + "' is not a valid value for " + name +
             takes(where, name) + help_hint;
    }
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    // "--format: 1 required FORMAT missing", "Expected exactly 1 arguments to --x, got 2".
    std::string name = what.substr(0, what.find(':'));
    if (what.find(" required ") != std::string::npos &&
        what.find(" missing") != std::string::npos && util::starts_with(name, "-")) {
      return name + " needs a value" + takes(where, name) + help_hint;
    }
    if (what.find(": At Most ") != std::string::npos && util::starts_with(name, "-")) {
      // "--format: At Most 1 required but received 2": a flag given twice.
      return name + " was given " + between(what, " but received ", "") + " times: give it once" +
             help_hint;
    }
    if (name = between(what, " arguments to ", ", got"); !name.empty()) {
      return name + " was given the wrong number of values" + takes(where, name) + help_hint;
    }
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    // "W is required", "--cluster is required".
    if (const auto at = what.find(" is required"); at != std::string::npos) {
      const std::string name = what.substr(0, at);
      if (util::starts_with(name, "-")) {
        return name + " is required" + takes(where, name) + help_hint;
      }
      return "missing " + name + takes(where, name) + help_hint;
    }
  }
  if (dynamic_cast<const CLI::ExcludesError*>(&e) != nullptr) {
    const auto at = what.find(" excludes ");
    if (at != std::string::npos) {
      return what.substr(0, at) + " cannot be given with " + what.substr(at + 10) + help_hint;
    }
  }
  if (dynamic_cast<const CLI::RequiresError*>(&e) != nullptr) {
    const auto at = what.find(" requires ");
    if (at != std::string::npos) {
      return what.substr(0, at) + " needs " + what.substr(at + 10) + " too" + help_hint;
    }
  }
  return lower_first(what) + help_hint;
}

HelpTarget find_help_target(const CLI::App& root, const std::vector<std::string>& words) {
  const CLI::App* at = &root;
  for (const auto& word : words) {
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->check_name(word)) {
        next = sub;
        break;
      }
    }
    if (next == nullptr) {
      const std::string path = command_path(*at);
      return {nullptr, "unknown command '" + util::printable(word) + "' for '" + path + "'" +
                           suggestion(word, subcommand_names(*at)) + " (see '" + path +
                           " --help')"};
    }
    at = next;
  }
  return {at, ""};
}

std::optional<std::vector<std::string>> help_request(const CLI::App& root,
                                                     const std::vector<std::string>& words) {
  const CLI::App* at = &root;
  for (size_t k = 0; k < words.size(); ++k) {
    if (words[k] == "help") {
      std::vector<std::string> path(words.begin(), words.begin() + static_cast<long>(k));
      for (size_t i = k + 1; i < words.size() && !util::starts_with(words[i], "-"); ++i) {
        path.push_back(words[i]);
      }
      return path;
    }
    // Only a group's words may come before it: after a command's, "help" is a value.
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->check_name(words[k])) {
        next = sub;
      }
    }
    if (next == nullptr || next->get_subcommands([](const CLI::App*) { return true; }).empty()) {
      return std::nullopt;
    }
    at = next;
  }
  return std::nullopt;
}

} // namespace tpuctl::cli
