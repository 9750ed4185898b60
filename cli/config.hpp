// tpuctl's configuration file: defaults a user sets once with `tpuctl config set` (pool, state
// URL, output format, SSH user, identity file, batch size, host-key policy), stored as a JSON
// object of strings in $XDG_CONFIG_HOME/tpuctl/config.json (else ~/.config/tpuctl/config.json),
// 0600 in a 0700 directory. Precedence, for every setting: a flag beats its environment variable
// (TPUCTL_STATE, TPUCTL_POOL), which beats the config file, which beats the built-in default.
// Every value is checked on `set` by the same parser its flag uses.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/context.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

struct ConfigKey {
  std::string name; // "pool", "ssh.batch_size"
  std::string flag; // the flag it is the default of: "--pool", "--batch-size"
  std::string help;
};

// Every key `config set` accepts, in display order.
// The key tpuctl has for `key`: gcloud's compute/zone is pool; any other key is itself.
std::string canonical_config_key(const std::string& key);
// Why gcloud's or xpk's `key` means nothing here (project-id, core/project, ...), or "" when it
// is not one of those: `config set` accepts it with one notice and stores nothing.
std::string ignored_config_key(const std::string& key);

const std::vector<ConfigKey>& config_keys();

// $XDG_CONFIG_HOME/tpuctl/config.json when XDG_CONFIG_HOME is absolute, else
// $HOME/.config/tpuctl/config.json. Empty when neither is known.
std::string config_path();

class Config {
public:
  // Reads `path`; a missing file is an empty config. Errors: usage naming the file and what is
  // wrong with it (not JSON, not an object of strings, an unknown key, a bad value), saying how
  // to fix it.
  static Expected<Config> load(const std::string& path);
  // The config whose file `path` holds `text`: what load does once it has read the file.
  // Errors: as load's.
  static Expected<Config> parse(const std::string& path, const std::string& text);

  std::optional<std::string> get(const std::string& key) const;
  const std::map<std::string, std::string>& values() const { return m_values; }
  // Checks `key` and `value` (usage errors naming them) and sets it.
  Status set(const std::string& key, const std::string& value);
  // Errors: usage for an unknown key.
  Status unset(const std::string& key);
  // Writes the file atomically, 0600 (the directory 0700). Errors: failure naming the path.
  Status save() const;
  const std::string& path() const { return m_path; }

private:
  std::string m_path;
  std::map<std::string, std::string> m_values;
};

// Checks one value with its flag's parser. Errors: usage naming the key and the value.
Status validate_config_value(const std::string& key, const std::string& value);

// The project a request made now is charged to: --project (or --billing-project), else
// CLOUDSDK_CORE_PROJECT, else `config set project` (gcloud's core/project, xpk's project-id),
// else "default". Errors: usage when the value is not a project id, naming it.
Expected<std::string> charged_project(const GlobalOptions& globals);

// The Python environment on the workers (a directory whose bin/ leads their PATH): `flag`
// (--python-env) when given, else TPUCTL_PYTHON_ENV, else config python-env, else
// /opt/tpuctl/frameworks (what scripts/deps.sh --frameworks makes). Errors: usage naming the
// source and the value when it is not an absolute (or ~/) path.
Expected<std::string> python_env_setting(const std::string& flag);

// The configuration of this run (loaded by cli::run before the command line is built), so
// setup functions can take their defaults from it. Empty when not loaded.
const Config& active_config();
void set_active_config(Config config);

} // namespace tpuctl::cli
