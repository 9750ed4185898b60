// ssh's forward specs (`[BIND:]PORT:HOST:HOSTPORT`), read as OpenSSH's parse_forward reads the
// TCP forms: fields split on ':' except inside brackets (IPv6 addresses), three fields without a
// bind address, four with one, `*` or an empty first field meaning every interface. Ports are
// numbers (no service names); unix-socket forwards are not offered.
#include <cctype>

#include "remote/forwarding.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote {

namespace {

const char* option_of(ForwardKind kind) {
  return kind == ForwardKind::local ? "-L" : "-R";
}

std::string shown(ForwardKind kind, std::string_view text) {
  return std::string(option_of(kind)) + " '" + util::printable(std::string(text)) + "'";
}

Error bad_spec(ForwardKind kind, std::string_view text, const std::string& why) {
  return usage_error(shown(kind, text) + " is not a forward: " + why + "; use " + option_of(kind) +
                     " [BIND_ADDRESS:]PORT:HOST:HOSTPORT (e.g. " + option_of(kind) +
                     " 9001:localhost:9001)");
}

// Splits on ':' outside brackets; a bracketed field loses its brackets. False when a bracket is
// unbalanced or a bracketed part is followed by anything but ':'.
bool split_fields(std::string_view text, std::vector<std::string>& fields) {
  std::string field;
  bool bracketed = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '[' && field.empty() && !bracketed) {
      const size_t close = text.find(']', i + 1);
      if (close == std::string_view::npos || (close + 1 < text.size() && text[close + 1] != ':')) {
        return false;
      }
      field = std::string(text.substr(i + 1, close - i - 1));
      bracketed = true;
      i = close;
      continue;
    }
    if (c == '[' || c == ']') {
      return false;
    }
    if (c == ':') {
      fields.push_back(std::move(field));
      field.clear();
      bracketed = false;
      continue;
    }
    field += c;
  }
  fields.push_back(std::move(field));
  return true;
}

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 5) {
    return false;
  }
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

// A host or address field: no spaces, control characters, brackets or '/' (unix sockets).
bool plain_name(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f || c == '/' || c == '[' || c == ']') {
      return false;
    }
  }
  return true;
}

} // namespace

std::string describe(const ForwardSpec& spec) {
  return std::string(option_of(spec.kind)) + " " + spec.text;
}

Expected<ForwardSpec> parse_forward_spec(ForwardKind kind, std::string_view text) {
  std::vector<std::string> fields;
  if (text.empty()) {
    return bad_spec(kind, text, "it is empty");
  }
  if (!split_fields(text, fields)) {
    return bad_spec(kind, text, "its brackets do not enclose one address");
  }
  if (fields.size() != 3 && fields.size() != 4) {
    return bad_spec(kind, text,
                    "it has " + std::to_string(fields.size()) +
                        (fields.size() == 1 ? " field" : " fields") +
                        " where 3 or 4 are separated by ':' (an IPv6 address goes in brackets)");
  }
  ForwardSpec spec;
  spec.kind = kind;
  spec.text = std::string(text);
  size_t at = 0;
  if (fields.size() == 4) {
    const std::string& bind = fields[at++];
    if (bind.empty() || bind == "*") {
      spec.any_address = true;
    } else if (!plain_name(bind)) {
      return bad_spec(kind, text, "BIND_ADDRESS '" + util::printable(bind) + "' is not an address");
    } else {
      spec.bind_address = bind;
    }
  }
  const std::string& port = fields[at++];
  spec.host = fields[at++];
  const std::string& host_port = fields[at];
  const int min_port = kind == ForwardKind::remote ? 0 : 1;
  auto port_value = [&](const std::string& s, int min, const char* what) -> Expected<uint16_t> {
    if (!all_digits(s) || std::stoi(s) < min || std::stoi(s) > 65535) {
      return usage_error(shown(kind, text) + ": " + what + " '" + util::printable(s) +
                         "' is not a port number from " + std::to_string(min) + " to 65535" +
                         (min == 0 ? " (0: the worker picks one)" : ""));
    }
    return static_cast<uint16_t>(std::stoi(s));
  };
  TPUCTL_TRY_ASSIGN(spec.port, port_value(port, min_port, "PORT"));
  if (spec.host.empty() || !plain_name(spec.host)) {
    return bad_spec(kind, text,
                    spec.host.empty() ? std::string("HOST is empty")
                                      : "HOST '" + util::printable(spec.host) + "' is not a name");
  }
  TPUCTL_TRY_ASSIGN(spec.host_port, port_value(host_port, 1, "HOSTPORT"));
  return spec;
}

} // namespace tpuctl::remote
