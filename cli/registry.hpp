// Binds CLI11 (sub)commands to the functions that run them. Parsing and running are separate
// phases: setup functions only declare flags into an options struct captured by the runner, and
// the runner of the command the user named is called after the whole command line parsed.
#pragma once

#include <functional>
#include <map>

#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

// A command's body: returns the exit status to use on success (usually 0; a broadcast may
// return a host's status), or an Error that the edge prints and maps to an exit code.
using Runner = std::function<Expected<int>(Context&)>;

class Registry {
public:
  // Adds the leaf command `name` under `parent`, run by `run`.
  CLI::App* add(CLI::App& parent, const std::string& name, const std::string& summary, Runner run);
  // Makes an existing app (e.g. a group without leaves, like `version`) runnable.
  void bind(CLI::App& app, Runner run);
  // The runner of the deepest parsed command under `root`, or nullptr.
  const Runner* find(const CLI::App& root) const;

private:
  std::map<const CLI::App*, Runner> m_runners;
};

// The deepest subcommand of `root` that the parser selected (root itself if none).
const CLI::App& deepest_parsed(const CLI::App& root);

// "tpuctl topology describe": the full command path of `app`.
std::string command_path(const CLI::App& app);

} // namespace tpuctl::cli
