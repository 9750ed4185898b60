#include "cli/config.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "cli/list_filter.hpp"
#include "cli/output.hpp"
#include "provision/pool/pools.hpp"
#include "provision/slice/worker_env.hpp"
#include "state/location.hpp"
#include "util/private_files.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

Config& config_slot() {
  static Config config;
  return config;
}

std::vector<std::string> key_names() {
  std::vector<std::string> out;
  for (const auto& k : config_keys()) {
    out.push_back(k.name);
  }
  return out;
}

Status known_key(const std::string& key) {
  for (const auto& k : config_keys()) {
    if (k.name == key) {
      return tpuctl::ok();
    }
  }
  auto near = util::nearest(key, key_names(), 1);
  return usage_error("'" + util::printable(key) + "' is not a configuration key" +
                     (near.empty() ? "" : " (did you mean '" + near.front() + "'?)") +
                     "; keys: " + util::join(key_names(), ", "));
}

} // namespace

std::string canonical_config_key(const std::string& key) {
  // gcloud's `config set compute/zone Z`: a zone is a pool here.
  // xpk's `config set zone Z` too.
  if (key == "compute/zone" || key == "compute.zone" || key == "zone") {
    return "pool";
  }
  // gcloud's `config set project P` (core/project), xpk's `config set project-id P`.
  if (key == "core/project" || key == "core.project" || key == "project-id") {
    return "project";
  }
  return key;
}

std::string ignored_config_key(const std::string& key) {
  if (key == "client-id" || key == "core/account" || key == "cluster-state-gcs-bucket" ||
      key == "send-telemetry") {
    return "a Google Cloud or xpk setting; your own hosts have none";
  }
  if (key == "custom-binaries-path") {
    return "tpuctl needs no kubectl, gcloud or docker on this machine";
  }
  if (key == "cluster-name") {
    return "name the cluster with --cluster on each command";
  }
  return "";
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> k_keys = {
      {"pool", "--pool", "the host pool commands use"},
      {"project", "--project", "the project requests are charged to (quotas, usage)"},
      {"state", "--state", "the state store URL (sqlite:PATH or etcd://HOST:PORT[,...])"},
      {"format", "--format", "the output format: table, json, yaml or value(...)"},
      {"ssh.user", "--user", "login user for hosts added with 'pool add-hosts'"},
      {"ssh.identity_file", "--identity-file", "private key for hosts added with 'pool add-hosts'"},
      {"ssh.batch_size", "--batch-size", "hosts in flight at once"},
      {"ssh.strict_host_key_checking", "--strict-host-key-checking", "yes, accept-new or no"},
      {"python-env", "--python-env",
       "the Python environment on the workers whose bin/ leads PATH (default "
       "/opt/tpuctl/frameworks)"},
  };
  return k_keys;
}

std::string config_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg && xdg[0] == '/') {
    return std::string(xdg) + "/tpuctl/config.json";
  }
  const char* home = std::getenv("HOME");
  if (home && home[0] != '\0') {
    return std::string(home) + "/.config/tpuctl/config.json";
  }
  return "";
}

Status validate_config_value(const std::string& key, const std::string& value) {
  TPUCTL_TRY(known_key(key));
  auto bad = [&](const std::string& why) {
    return usage_error("config " + key + ": '" + util::printable(value) + "' " + why);
  };
  if (value.empty()) {
    return bad("is empty (use 'tpuctl config unset " + key + "' to remove a setting)");
  }
  if (key == "pool") {
    return provision::validate_pool_name(value);
  }
  if (key == "project") {
    return provision::validate_project_id(value);
  }
  if (key == "state") {
    auto loc = state::parse_state_url(value, state::PathEnvironment::from_process());
    return loc ? tpuctl::ok() : Status(loc.error());
  }
  if (key == "format") {
    // What --format takes, less the forms only one command prints (a default for every
    // command would make all the others fail).
    auto spec = parse_format(value);
    if (!spec) {
      return bad("is not an output format (table, json, yaml, value(F,...), table(F,...), "
                 "csv(F,...) or none)");
    }
    if (!spec->only_for.empty()) {
      return bad("is printed by '" + spec->only_for + "' only: give it there as --format " + value +
                 " (a default must suit every command: table, json, yaml, ...)");
    }
    return tpuctl::ok();
  }
  if (key == "ssh.batch_size") {
    if (util::to_lower(value) == "all") {
      return tpuctl::ok();
    }
    auto n = util::parse_int(value, "config ssh.batch_size", 1, 4096);
    return n ? tpuctl::ok() : Status(n.error());
  }
  if (key == "ssh.strict_host_key_checking") {
    return value == "yes" || value == "accept-new" || value == "no" || value == "ask"
               ? tpuctl::ok()
               : bad("is not a policy (yes, accept-new or no)");
  }
  if (key == "ssh.user") {
    const bool ok =
        value.find_first_of(" \t\n;'\"`$\\@:/") == std::string::npos && value.front() != '-';
    return ok ? tpuctl::ok() : bad("is not a login name");
  }
  if (key == "python-env") {
    return provision::validate_python_env(value, "config python-env");
  }
  return tpuctl::ok(); // ssh.identity_file: any path
}

Expected<Config> Config::load(const std::string& path) {
  Config c;
  c.m_path = path;
  std::ifstream in(path);
  if (!in) {
    return c;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse(path, text.str());
}

Expected<Config> Config::parse(const std::string& path, const std::string& text) {
  Config c;
  c.m_path = path;
  const std::string fix = " (fix the file, or delete it to start over)";
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return usage_error("config file " + path + " is not valid JSON: " + e.what() + fix);
  }
  if (!doc.is_object()) {
    return usage_error("config file " + path + " must hold a JSON object" + fix);
  }
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (!it.value().is_string()) {
      return usage_error("config file " + path + ": '" + it.key() + "' must be a string" + fix);
    }
    if (auto valid = validate_config_value(it.key(), it.value().get<std::string>()); !valid) {
      Error e = valid.error();
      e.message = "config file " + path + ": " + e.message + fix;
      return e;
    }
    c.m_values[it.key()] = it.value().get<std::string>();
  }
  return c;
}

std::optional<std::string> Config::get(const std::string& key) const {
  auto it = m_values.find(key);
  return it == m_values.end() ? std::nullopt : std::optional<std::string>(it->second);
}

Status Config::set(const std::string& key, const std::string& value) {
  TPUCTL_TRY(validate_config_value(key, value));
  m_values[key] = value;
  return tpuctl::ok();
}

Status Config::unset(const std::string& key) {
  TPUCTL_TRY(known_key(key));
  m_values.erase(key);
  return tpuctl::ok();
}

Status Config::save() const {
  if (m_path.empty()) {
    return make_error(ErrorKind::failure,
                      "no configuration directory: set HOME or XDG_CONFIG_HOME");
  }
  const std::filesystem::path path(m_path);
  TPUCTL_TRY(util::make_private_directories(path.parent_path().string()));
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [k, v] : m_values) {
    doc[k] = v;
  }
  const std::string tmp = m_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << doc.dump(2) << "\n";
    if (!out) {
      return make_error(ErrorKind::failure, "cannot write the config file " + tmp);
    }
  }
  ::chmod(tmp.c_str(), 0600);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    return make_error(ErrorKind::failure,
                      "cannot write the config file " + m_path + ": " + ec.message());
  }
  return tpuctl::ok();
}

Expected<std::string> charged_project(const GlobalOptions& globals) {
  if (!globals.project.empty()) {
    TPUCTL_TRY(provision::validate_project_id(globals.project));
    return globals.project;
  }
  if (const char* env = std::getenv("CLOUDSDK_CORE_PROJECT"); env && *env) {
    if (auto valid = provision::validate_project_id(env); !valid) {
      return usage_error("CLOUDSDK_CORE_PROJECT: " + valid.error().message);
    }
    return std::string(env);
  }
  return active_config().get("project").value_or(provision::k_default_project);
}

Expected<std::string> python_env_setting(const std::string& flag) {
  if (!flag.empty()) {
    TPUCTL_TRY(provision::validate_python_env(flag, "--python-env"));
    return flag;
  }
  if (const char* env = std::getenv("TPUCTL_PYTHON_ENV"); env && *env) {
    TPUCTL_TRY(provision::validate_python_env(env, "TPUCTL_PYTHON_ENV"));
    return std::string(env);
  }
  return active_config().get("python-env").value_or(std::string(provision::k_default_python_env));
}

const Config& active_config() {
  return config_slot();
}
void set_active_config(Config config) {
  config_slot() = std::move(config);
}

} // namespace tpuctl::cli
