// Parsing of jump host lists (ProxyJump). A hop is `[user@]host[:port]`; IPv6 literals go in
// brackets when a port follows. Every hop is validated as add-hosts validates hosts (a name can
// never carry shell syntax), and the whole list is refused on the first bad hop with one line.
#include "remote/jump_spec.hpp"

#include "util/hostlist.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote {

namespace {

constexpr const char* k_form = "use [user@]host[:port], several separated by commas, or none";

Expected<JumpHop> parse_hop(std::string_view text) {
  JumpHop hop;
  if (text.empty()) {
    return usage_error("an empty hop");
  }
  if (auto at = text.rfind('@'); at != std::string_view::npos) {
    hop.user = std::string(text.substr(0, at));
    text = text.substr(at + 1);
    if (auto s = util::validate_username(hop.user); !s) {
      return s.error();
    }
  }
  std::string_view host = text;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) {
      return usage_error("'[' without a closing ']'");
    }
    host = text.substr(1, close - 1);
    auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return usage_error("'" + std::string(rest) + "' after ']' (expected :port)");
      }
      port = rest.substr(1);
      if (port.empty()) {
        return usage_error("no port after ':'");
      }
    }
  } else if (auto colon = text.find(':'); colon != std::string_view::npos) {
    if (text.find(':', colon + 1) == std::string_view::npos) {
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
      if (port.empty()) {
        return usage_error("no port after ':'");
      }
    } // else a bare IPv6 address without a port
  }
  if (host.empty()) {
    return usage_error("no host");
  }
  if (auto s = util::validate_hostname(host); !s) {
    return s.error();
  }
  hop.host = std::string(host);
  if (!port.empty()) {
    auto n = util::parse_int(port, "port", 1, 65535);
    if (!n) {
      return usage_error("the port '" + std::string(port) + "' is not a number from 1 to 65535");
    }
    hop.port = static_cast<uint16_t>(*n);
  }
  return hop;
}

} // namespace

Expected<std::vector<JumpHop>> parse_jump_spec(std::string_view spec, std::string_view what) {
  std::vector<JumpHop> hops;
  const std::string shown = util::printable(std::string(spec));
  if (util::to_lower(std::string(spec)) == "none") {
    return hops;
  }
  if (spec.empty()) {
    return usage_error(std::string(what) + ": an empty jump host list (" + k_form + ")");
  }
  size_t start = 0;
  while (true) {
    size_t comma = spec.find(',', start);
    std::string_view part = spec.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto hop = parse_hop(part);
    if (!hop) {
      return usage_error(std::string(what) + ": '" + shown +
                         "' is not a jump host list: " + hop.error().message + " (" + k_form + ")");
    }
    hops.push_back(std::move(*hop));
    if (comma == std::string_view::npos) {
      break;
    }
    start = comma + 1;
  }
  if (hops.size() > 8) {
    return usage_error(std::string(what) + ": '" + shown + "' has " + std::to_string(hops.size()) +
                       " hops; at most 8 are allowed");
  }
  return hops;
}

std::string to_string(const JumpHop& hop) {
  std::string out;
  if (!hop.user.empty()) {
    out += hop.user + "@";
  }
  const bool v6 = hop.host.find(':') != std::string::npos;
  if (hop.port != 0) {
    out += v6 ? "[" + hop.host + "]" : hop.host;
    out += ":" + std::to_string(hop.port);
  } else {
    out += hop.host;
  }
  return out;
}

std::string to_string(const std::vector<JumpHop>& hops) {
  if (hops.empty()) {
    return "none";
  }
  std::string out;
  for (const auto& h : hops) {
    out += (out.empty() ? "" : ",") + to_string(h);
  }
  return out;
}

std::optional<std::string> jump_from_proxy_command(std::string_view command) {
  // The exact shape libssh 0.10's ssh_config_parse_proxy_jump writes.
  std::vector<std::string> words;
  size_t i = 0;
  while (i < command.size()) {
    while (i < command.size() && command[i] == ' ') {
      ++i;
    }
    size_t j = i;
    while (j < command.size() && command[j] != ' ') {
      ++j;
    }
    if (j > i) {
      words.emplace_back(command.substr(i, j - i));
    }
    i = j;
  }
  if (words.size() < 4 || words[0] != "ssh") {
    return std::nullopt;
  }
  std::string user, port, next;
  size_t w = 1;
  auto take = [&](const char* flag, std::string& into) {
    if (w + 1 < words.size() && words[w] == flag) {
      into = words[w + 1];
      w += 2;
    }
  };
  take("-l", user);
  take("-p", port);
  take("-J", next);
  if (w + 3 != words.size() || words[w] != "-W" || words[w + 1] != "'[%h]:%p'") {
    return std::nullopt;
  }
  std::string host = words[w + 2];
  if (!port.empty() && host.find(':') != std::string::npos) {
    host = "[" + host + "]";
  }
  std::string first = (user.empty() ? "" : user + "@") + host + (port.empty() ? "" : ":" + port);
  return next.empty() ? first : first + "," + next;
}

} // namespace tpuctl::remote
