// Host specs as users type them: `[user@]host[:port]` with pdsh-style ranges in the host part
// (`node[01-16]`, `10.0.0.[1-4]`, `rack[1-2]-n[1,3,5-6]`, cartesian across groups). Every name
// is validated, so a host name can never carry shell syntax or pose as a flag.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::util {

struct HostSpec {
  std::string user; // empty: the default user
  std::string host; // a validated host name, IPv4 or IPv6 address (without brackets)
  int port = 0;     // 0: the default port
};

// At most this many hosts come out of one call (guards `node[1-99999999]`).
inline constexpr size_t k_max_expanded_hosts = 65536;

// Expands one range pattern: "node[01-03]" -> node01, node02, node03. Zero padding follows the
// width of the range start. Errors (usage): unbalanced brackets, empty or reversed ranges
// ("a range needs start <= end"), non-numeric bounds, too many hosts.
Expected<std::vector<std::string>> expand_hostlist(std::string_view pattern);

// Checks a host name: letters, digits, '.', '-', '_' (or an IPv6 literal), at most 253
// characters, not starting with '-' or '.'. The error names the host and the rule.
Status validate_hostname(std::string_view host);

// Checks a login name: letters, digits, '.', '-', '_', not starting with '-', at most 32.
Status validate_username(std::string_view user);

// Parses and expands `[user@]host[:port]` specs (IPv6 as `[::1]` or `[::1]:22`, or bare `::1`
// without a port: a spec with two colons or more is an IPv6 address). Every problem
// of every spec is reported in one Error (kind usage). Duplicates are an error too.
Expected<std::vector<HostSpec>> expand_host_specs(const std::vector<std::string>& specs);

// "user@host:port" (brackets around IPv6), omitting defaults.
std::string to_string(const HostSpec& spec);

// Folds names back into range notation where they share a prefix and suffix, as clush does:
// {node01, node02, node03, x} -> "node[01-03],x". Order of first appearance is kept.
std::string fold_hostlist(const std::vector<std::string>& hosts);

} // namespace tpuctl::util
