#include "provision/slice/secrets.hpp"

#include <cstdlib>
#include <set>

#include "provision/slice/worker_env.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

Expected<Secrets> secrets_from_environment(const std::vector<std::string>& names) {
  ErrorList errors;
  Secrets out;
  for (const auto& name : names) {
    if (auto valid = validate_env_name(name); !valid) {
      errors.add(valid.error());
      continue;
    }
    if (name == "PATH" || util::starts_with(name, "TPU_") || util::starts_with(name, "TPUCTL_") ||
        util::starts_with(name, "MEGASCALE_")) {
      errors.add(Error(ErrorKind::usage, "--env-secret " + name +
                                             ": tpuctl sets that variable on the workers; name "
                                             "the secret otherwise"));
      continue;
    }
    if (out.count(name)) {
      errors.add(Error(ErrorKind::usage, "--env-secret " + name + " is given twice"));
      continue;
    }
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) {
      errors.add(Error(ErrorKind::usage,
                       "--env-secret " + name + ": " + name +
                           " is not set in this environment (export it first: the value is "
                           "taken from there, never from the command line)"));
      continue;
    }
    const std::string v(value);
    if (v.find('\n') != std::string::npos) {
      errors.add(Error(ErrorKind::usage, "--env-secret " + name +
                                             ": its value holds a newline; a secret is one line"));
      continue;
    }
    out[name] = v;
  }
  if (!errors.empty()) {
    return errors.combined();
  }
  return out;
}

Status check_secrets_apart(const Secrets& secrets,
                           const std::vector<std::pair<std::string, std::string>>& env) {
  for (const auto& [name, value] : env) {
    if (secrets.count(name)) {
      return Error(ErrorKind::usage, "'" + name +
                                         "' is given both as --env and as --env-secret: give "
                                         "it once");
    }
  }
  return ok();
}

std::string secret_read_prefix(const Secrets& secrets) {
  if (secrets.empty()) {
    return "";
  }
  std::string out;
  std::string names;
  for (const auto& [name, value] : secrets) {
    if (!is_env_name(name)) {
      continue; // never let a name become shell syntax (secrets_from_environment refuses it)
    }
    out += "IFS= read -r " + name + "; ";
    names += " " + name;
  }
  return out + "export" + names + "; ";
}

std::string secret_input(const Secrets& secrets) {
  std::string out;
  for (const auto& [name, value] : secrets) {
    if (is_env_name(name)) {
      out += value + "\n";
    }
  }
  return out;
}

nlohmann::json secret_names(const Secrets& secrets) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, value] : secrets) {
    out.push_back(name);
  }
  return out;
}

nlohmann::json to_json(const Secrets& secrets) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : secrets) {
    out[name] = value;
  }
  return out;
}

Secrets secrets_from_json(const nlohmann::json& doc) {
  Secrets out;
  if (doc.is_object()) {
    for (const auto& [name, value] : doc.items()) {
      if (value.is_string() && is_env_name(name)) {
        out[name] = value.get<std::string>();
      }
    }
  }
  return out;
}

} // namespace tpuctl::provision
