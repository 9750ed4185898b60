// Help for every mistake on the command line, one line each: what CLI11 reports while parsing
// (an unknown command or flag anywhere in the tree, a missing or badly typed value, a missing
// argument) becomes one `tpuctl: error:` line in tpuctl's words, naming the offending word, the
// nearest command or flag (case ignored) and where help is. `tpuctl help [COMMAND...]` resolves
// its words the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tpuctl::cli {

// The one line (without "tpuctl: error: ") describing parse error `e` of `root`. Never fails.
std::string describe_parse_error(const CLI::App& root, const CLI::ParseError& e);

// `tpuctl help [WORDS...]`: the command WORDS name (root when none). Returns the app, or the one
// error line for a word that names no command (with the nearest one). Never fails.
struct HelpTarget {
  const CLI::App* app = nullptr;
  std::string error;
};
HelpTarget find_help_target(const CLI::App& root, const std::vector<std::string>& words);

// The command words of a help request among `words` (the words after `tpuctl`): `help
// [COMMAND...]` first, or after a group's words (`qr help [create]`, as gcloud's and git's
// `help`), up to the first flag. nullopt when `words` asks for no help (`qr describe help`
// describes a request named help).
std::optional<std::vector<std::string>> help_request(const CLI::App& root,
                                                     const std::vector<std::string>& words);

// Every visible name (and alias) of the subcommands of `app` (inside a hidden group: all).
std::vector<std::string> subcommand_names(const CLI::App& app);

} // namespace tpuctl::cli
