#include "provision/pool/request_ssh.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "provision/pool/ownership.hpp"

namespace tpuctl::provision {

Json to_json(const remote::SshSettings& s) {
  if (s.empty()) {
    return nullptr;
  }
  Json j = Json::object();
  if (!s.strict.empty()) {
    j["strict_host_key_checking"] = s.strict;
  }
  if (!s.config_file.empty()) {
    j["ssh_config"] = s.config_file;
  }
  if (!s.passphrase_file.empty()) {
    j["identity_passphrase_file"] = s.passphrase_file;
  }
  if (s.connect_timeout_ms > 0) {
    j["connect_timeout_ms"] = s.connect_timeout_ms;
  }
  return j;
}

remote::SshSettings ssh_settings_from_json(const Json& doc) {
  remote::SshSettings s;
  if (!doc.is_object()) {
    return s;
  }
  auto text = [&](const char* key) {
    auto it = doc.find(key);
    return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  s.strict = text("strict_host_key_checking");
  s.config_file = text("ssh_config");
  s.passphrase_file = text("identity_passphrase_file");
  if (auto it = doc.find("connect_timeout_ms"); it != doc.end() && it->is_number_integer()) {
    s.connect_timeout_ms = std::max<int64_t>(0, it->get<int64_t>());
  }
  return s;
}

Expected<remote::SshOptions> request_ssh(const remote::SshOptions& own,
                                         const remote::SshSettings& recorded,
                                         const std::string& owner, const std::string& actor) {
  if (recorded.empty() || owner.empty() || !same_owner(owner, actor)) {
    return own;
  }
  remote::SshSettings usable = recorded;
  for (std::string* path : {&usable.config_file, &usable.passphrase_file}) {
    if (!path->empty() && ::access(path->c_str(), R_OK) != 0) {
      spdlog::info("'{}', recorded with the request, cannot be read here: using this process's "
                   "own setting instead",
                   *path);
      path->clear();
    }
  }
  return remote::with_settings(own, usable);
}

} // namespace tpuctl::provision
