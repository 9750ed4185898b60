#include "util/shell_quote.hpp"

namespace tpuctl::util {

std::string shell_quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '\'';
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string shell_quote_path(std::string_view path) {
  if (path == "~") {
    return "\"$HOME\"";
  }
  if (path.substr(0, 2) == "~/") {
    return "\"$HOME\"/" + shell_quote(path.substr(2));
  }
  return shell_quote(path);
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& arg : argv) {
    if (!out.empty()) {
      out += ' ';
    }
    out += shell_quote(arg);
  }
  return out;
}

} // namespace tpuctl::util
