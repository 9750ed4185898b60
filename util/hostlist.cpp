#include "util/hostlist.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "util/strings.hpp"

namespace tpuctl::util {

namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

Error bad(std::string_view what, std::string_view value, std::string_view rule) {
  return usage_error(std::string(what) + " '" + printable(value) + "' " + std::string(rule));
}

// Expands one bracket group body "01-03,7" into strings.
Expected<std::vector<std::string>> expand_group(std::string_view pattern, std::string_view body) {
  std::vector<std::string> out;
  for (const auto& item : split(body, ',')) {
    auto dash = item.find('-');
    std::string lo = item.substr(0, dash);
    std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    auto digits = [](const std::string& s) {
      return !s.empty() && s.size() <= 9 &&
             std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!digits(lo) || !digits(hi)) {
      return bad("host range", pattern,
                 "is not valid: '[" + std::string(body) +
                     "]' must hold numbers or ranges such as [1-4] or [01-16,20]");
    }
    long a = std::stol(lo), b = std::stol(hi);
    if (a > b) {
      return bad("host range", pattern, "is not valid: '" + item + "' needs start <= end");
    }
    // Counted over the whole group: "[1-60000,1-60000,...]" passed an item-by-item check and
    // built gigabytes of names before the caller's limit saw them.
    if (out.size() + static_cast<size_t>(b - a + 1) > k_max_expanded_hosts) {
      return bad("host range", pattern,
                 "expands to more than " + std::to_string(k_max_expanded_hosts) + " hosts");
    }
    size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : 0;
    for (long v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < width) {
        s.insert(0, width - s.size(), '0');
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

} // namespace

Expected<std::vector<std::string>> expand_hostlist(std::string_view pattern) {
  std::vector<std::string> acc{""};
  size_t i = 0;
  while (i < pattern.size()) {
    char c = pattern[i];
    if (c == ']') {
      return bad("host range", pattern, "is not valid: ']' without '['");
    }
    if (c != '[') {
      size_t j = pattern.find_first_of("[]", i);
      if (j == std::string_view::npos) {
        j = pattern.size();
      }
      for (auto& a : acc) {
        a += pattern.substr(i, j - i);
      }
      i = j;
      continue;
    }
    size_t close = pattern.find(']', i);
    if (close == std::string_view::npos) {
      return bad("host range", pattern, "is not valid: '[' without ']'");
    }
    TPUCTL_TRY_ASSIGN(auto items, expand_group(pattern, pattern.substr(i + 1, close - i - 1)));
    if (acc.size() * items.size() > k_max_expanded_hosts) {
      return bad("host range", pattern,
                 "expands to more than " + std::to_string(k_max_expanded_hosts) + " hosts");
    }
    std::vector<std::string> next;
    next.reserve(acc.size() * items.size());
    for (const auto& a : acc) {
      for (const auto& it : items) {
        next.push_back(a + it);
      }
    }
    acc = std::move(next);
    i = close + 1;
  }
  return acc;
}

Status validate_hostname(std::string_view host) {
  if (host.empty()) {
    return usage_error("host name is empty (use a name such as node01 or an address)");
  }
  if (host.find(':') != std::string_view::npos) { // IPv6 literal: at least two colons
    bool ok = std::count(host.begin(), host.end(), ':') >= 2 &&
              std::all_of(host.begin(), host.end(), [](char c) {
                return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
              });
    if (!ok) {
      return bad("host", host, "is not a valid IPv6 address");
    }
    return tpuctl::ok();
  }
  if (host.size() > 253) {
    return bad("host", host.substr(0, 40), "is longer than 253 characters");
  }
  if (host.front() == '-' || host.front() == '.') {
    return bad("host", host, "must not start with '-' or '.'");
  }
  for (char c : host) {
    if (!is_name_char(c)) {
      return bad("host", host,
                 "contains '" + printable(std::string_view(&c, 1)) +
                     "': host names may only use letters, digits, '.', '-' and '_'");
    }
  }
  return tpuctl::ok();
}

Status validate_username(std::string_view user) {
  if (user.empty() || user.size() > 32 || user.front() == '-' ||
      !std::all_of(user.begin(), user.end(), is_name_char)) {
    return bad("user", user,
               "is not a valid login name (letters, digits, '.', '-', '_'; not starting with "
               "'-'; at most 32 characters)");
  }
  return tpuctl::ok();
}

Expected<std::vector<HostSpec>> expand_host_specs(const std::vector<std::string>& specs) {
  ErrorList problems;
  std::vector<HostSpec> out;
  std::set<std::string> seen;
  for (const auto& raw : specs) {
    std::string_view s = raw;
    HostSpec base;
    auto at = s.rfind('@');
    if (at != std::string_view::npos) {
      base.user = std::string(s.substr(0, at));
      if (auto v = validate_username(base.user); !v) {
        problems.add(v.error());
        continue;
      }
      s.remove_prefix(at + 1);
    }
    std::string_view host_part = s;
    std::string_view port_part;
    bool ipv6 = false;
    bool bare_ipv6 = false; // "fe80::" ends in a colon that is no port separator
    if (!s.empty() && s.front() == '[' && s.find(':') != std::string_view::npos &&
        s.find(':') < s.find(']')) {
      auto close = s.find(']');
      if (close == std::string_view::npos) {
        problems.add(bad("host spec", raw, "is not valid: '[' without ']'"));
        continue;
      }
      host_part = s.substr(1, close - 1);
      ipv6 = true;
      std::string_view rest = s.substr(close + 1);
      if (!rest.empty()) {
        if (rest.front() != ':') {
          problems.add(bad("host spec", raw, "is not valid: expected ':PORT' after ']'"));
          continue;
        }
        port_part = rest.substr(1);
      }
    } else if (s.find(':') != s.rfind(':')) {
      // Two colons or more without brackets: an IPv6 address, with no port (ssh's reading).
      // "fe80::1" is the host fe80::1, never the host "fe80:" on port 1.
      ipv6 = true;
      bare_ipv6 = true;
    } else if (auto colon = s.rfind(':'); colon != std::string_view::npos) {
      host_part = s.substr(0, colon);
      port_part = s.substr(colon + 1);
    }
    if (!port_part.empty() || (!bare_ipv6 && !s.empty() && s.back() == ':')) {
      auto port = parse_int(port_part, "port in '" + raw + "'", 1, 65535);
      if (!port) {
        problems.add(port.error());
        continue;
      }
      base.port = static_cast<int>(*port);
    }
    std::vector<std::string> hosts;
    if (ipv6) {
      hosts.emplace_back(host_part);
    } else {
      auto expanded = expand_hostlist(host_part);
      if (!expanded) {
        problems.add(expanded.error());
        continue;
      }
      hosts = std::move(*expanded);
    }
    for (auto& h : hosts) {
      if (auto v = validate_hostname(h); !v) {
        problems.add(v.error());
        break;
      }
      HostSpec spec = base;
      spec.host = std::move(h);
      std::string key = to_string(spec);
      if (!seen.insert(spec.host + ":" + std::to_string(spec.port)).second) {
        problems.add(bad("host", key, "is listed twice"));
        continue;
      }
      out.push_back(std::move(spec));
    }
    if (out.size() > k_max_expanded_hosts) {
      problems.add(usage_error("host specs expand to more than " +
                               std::to_string(k_max_expanded_hosts) + " hosts"));
      break;
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return out;
}

std::string to_string(const HostSpec& spec) {
  std::string out;
  if (!spec.user.empty()) {
    out += spec.user + "@";
  }
  bool ipv6 = spec.host.find(':') != std::string::npos;
  if (ipv6 && spec.port) {
    out += "[" + spec.host + "]";
  } else {
    out += spec.host;
  }
  if (spec.port) {
    out += ":" + std::to_string(spec.port);
  }
  return out;
}

std::string fold_hostlist(const std::vector<std::string>& hosts) {
  // Split each name into prefix + trailing number + (no suffix); group by prefix and width.
  struct Group {
    std::string prefix;
    size_t width;
    std::vector<long> numbers;
  };
  std::vector<Group> groups;
  std::vector<std::string> order; // group keys or literal names, in first-appearance order
  std::map<std::string, size_t> index;
  for (const auto& h : hosts) {
    size_t end = h.size();
    size_t start = end;
    while (start > 0 && std::isdigit(static_cast<unsigned char>(h[start - 1]))) {
      --start;
    }
    if (start == end || end - start > 9) {
      order.push_back("=" + h);
      continue;
    }
    std::string digits = h.substr(start);
    size_t width = digits.size() > 1 && digits[0] == '0' ? digits.size() : 0;
    std::string key = h.substr(0, start) + "\x1f" + std::to_string(width);
    auto it = index.find(key);
    if (it == index.end()) {
      index[key] = groups.size();
      groups.push_back({h.substr(0, start), width, {}});
      order.push_back("#" + key);
      it = index.find(key);
    }
    groups[it->second].numbers.push_back(std::stol(digits));
  }
  auto pad = [](long v, size_t width) {
    std::string s = std::to_string(v);
    if (s.size() < width) {
      s.insert(0, width - s.size(), '0');
    }
    return s;
  };
  std::vector<std::string> parts;
  for (const auto& o : order) {
    if (o[0] == '=') {
      parts.push_back(o.substr(1));
      continue;
    }
    const Group& g = groups[index[o.substr(1)]];
    std::vector<long> nums = g.numbers;
    std::sort(nums.begin(), nums.end());
    nums.erase(std::unique(nums.begin(), nums.end()), nums.end());
    if (nums.size() == 1) {
      parts.push_back(g.prefix + pad(nums[0], g.width));
      continue;
    }
    std::vector<std::string> ranges;
    for (size_t i = 0; i < nums.size();) {
      size_t j = i;
      while (j + 1 < nums.size() && nums[j + 1] == nums[j] + 1) {
        ++j;
      }
      ranges.push_back(i == j ? pad(nums[i], g.width)
                              : pad(nums[i], g.width) + "-" + pad(nums[j], g.width));
      i = j + 1;
    }
    parts.push_back(g.prefix + "[" + join(ranges, ",") + "]");
  }
  return join(parts, ",");
}

} // namespace tpuctl::util
