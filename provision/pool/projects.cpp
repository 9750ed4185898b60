#include "provision/pool/projects.hpp"

#include <algorithm>

#include "util/strings.hpp"

namespace tpuctl::provision {

Status validate_project_id(const std::string& value) {
  const bool chars_ok = std::all_of(value.begin(), value.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
  if (value.empty() || value.size() > 63 || !chars_ok ||
      !(value.front() >= 'a' && value.front() <= 'z') || value.back() == '-') {
    return Error(ErrorKind::usage,
                 "project '" + util::printable(value) +
                     "' is not a project id: use lowercase letters, digits and '-', starting "
                     "with a letter, not ending with '-', at most 63 characters");
  }
  return ok();
}

std::optional<int> quota_of(const ProjectQuotas& quotas, const std::string& project) {
  auto it = quotas.find(project);
  if (it == quotas.end()) {
    return std::nullopt;
  }
  return it->second;
}

} // namespace tpuctl::provision
