#include "remote/ssh_config_certs.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "remote/known_hosts.hpp"

namespace tpuctl::remote {

namespace {

std::string lower(std::string s) {
  for (char& c : s) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

std::string expand_home(const std::string& path) {
  if (path.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    return std::string(home ? home : "") + path.substr(1);
  }
  return path;
}

// A Host line's patterns (space separated) matched as OpenSSH does: some positive pattern
// matches and no negated one does.
bool host_line_matches(const std::vector<std::string>& patterns, const std::string& host) {
  bool found = false;
  for (const auto& p : patterns) {
    if (p.size() > 1 && p[0] == '!') {
      if (host_patterns_match(p.substr(1), host)) {
        return false;
      }
    } else if (host_patterns_match(p, host)) {
      found = true;
    }
  }
  return found;
}

} // namespace

std::vector<std::string> certificate_files(std::string_view config, const std::string& host) {
  std::vector<std::string> out;
  std::istringstream in{std::string(config)};
  bool active = true;
  for (std::string line; std::getline(in, line);) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) {
      line.resize(hash);
    }
    for (char& c : line) {
      if (c == '=' || c == '\t' || c == '\r') {
        c = ' ';
      }
    }
    std::istringstream words(line);
    std::string keyword;
    if (!(words >> keyword)) {
      continue;
    }
    keyword = lower(keyword);
    std::vector<std::string> args;
    for (std::string w; words >> w;) {
      if (w.size() >= 2 && w.front() == '"' && w.back() == '"') {
        w = w.substr(1, w.size() - 2);
      }
      args.push_back(w);
    }
    if (keyword == "host") {
      active = host_line_matches(args, host);
    } else if (keyword == "match") {
      active = false;
    } else if (keyword == "certificatefile" && active && !args.empty() && args[0] != "none") {
      out.push_back(expand_home(args[0]));
    }
  }
  return out;
}

std::vector<std::string> certificate_files_of(const std::string& path, const std::string& host) {
  const std::string file = path.empty() ? expand_home("~/.ssh/config") : expand_home(path);
  std::ifstream in(file);
  if (!in) {
    return {};
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return certificate_files(ss.str(), host);
}

} // namespace tpuctl::remote
