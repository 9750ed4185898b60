#include "util/error.hpp"

namespace tpuctl {

void Error::absorb(const Error& other) {
  for (auto& m : other.all_messages()) {
    more.push_back(m);
  }
}

std::vector<std::string> Error::all_messages() const {
  std::vector<std::string> out;
  out.reserve(1 + more.size());
  out.push_back(message);
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

Error make_error(ErrorKind kind, std::string message) {
  return Error{kind, std::move(message)};
}

void ErrorList::add(Error e) {
  m_errors.push_back(std::move(e));
}

Error ErrorList::combined() const {
  Error out = m_errors.front();
  for (size_t i = 1; i < m_errors.size(); ++i) {
    out.absorb(m_errors[i]);
  }
  return out;
}

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::failure:
    return "failure";
  case ErrorKind::usage:
    return "usage";
  case ErrorKind::capacity:
    return "capacity";
  case ErrorKind::not_found:
    return "not_found";
  case ErrorKind::auth:
    return "auth";
  case ErrorKind::timeout:
    return "timeout";
  case ErrorKind::interrupted:
    return "interrupted";
  case ErrorKind::partial:
    return "partial";
  }
  return "failure";
}

} // namespace tpuctl
