// Host specs as users type them (`pool add-hosts`, inventory files): expand_hostlist,
// expand_host_specs, validate_hostname/username, to_string and fold_hostlist. Input: one spec
// per line. Properties: expansion stays within k_max_expanded_hosts; every host and user that
// comes out is valid, with no host:port twice; to_string(spec) parses back to the same spec; and
// fold_hostlist's ranges expand back to the same set of names.
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.hpp"
#include "util/hostlist.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using namespace tpuctl::util;

namespace {

// Splits "a[1-3],b,c[01,05]" at the commas outside brackets.
std::vector<std::string> split_top_level(const std::string& folded) {
  std::vector<std::string> parts{""};
  int depth = 0;
  for (char c : folded) {
    if (c == '[') {
      ++depth;
    } else if (c == ']') {
      --depth;
    }
    if (c == ',' && depth == 0) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 512) {
    return 0;
  }
  const std::string text = fuzz::text_of(data, size);
  const std::vector<std::string> lines = split(text, '\n');

  if (auto names = expand_hostlist(lines[0])) {
    FUZZ_CHECK(!names->empty() && names->size() <= k_max_expanded_hosts, lines[0]);
  }

  auto specs = expand_host_specs(lines);
  if (!specs) {
    FUZZ_CHECK(!specs.error().message.empty(), text);
    return 0;
  }
  FUZZ_CHECK(specs->size() <= k_max_expanded_hosts, text);
  std::set<std::string> seen;
  std::set<std::string> plain_names; // names fold_hostlist may fold (no IPv6)
  for (const auto& s : *specs) {
    const std::string shown = to_string(s);
    FUZZ_CHECK(validate_hostname(s.host).has_value(), shown);
    FUZZ_CHECK(s.user.empty() || validate_username(s.user).has_value(), shown);
    FUZZ_CHECK(s.port >= 0 && s.port <= 65535, shown);
    FUZZ_CHECK(seen.insert(s.host + ":" + std::to_string(s.port)).second, shown);
    auto again = expand_host_specs({shown});
    FUZZ_CHECK(again && again->size() == 1, "'" + shown + "' does not parse back");
    FUZZ_CHECK((*again)[0].host == s.host && (*again)[0].user == s.user &&
                   (*again)[0].port == s.port,
               "'" + shown + "' parses back as '" + to_string((*again)[0]) + "'");
    if (s.host.find(':') == std::string::npos) {
      plain_names.insert(s.host);
    }
  }
  if (plain_names.empty()) {
    return 0;
  }
  const std::string folded =
      fold_hostlist(std::vector<std::string>(plain_names.begin(), plain_names.end()));
  std::set<std::string> unfolded;
  for (const auto& part : split_top_level(folded)) {
    auto names = expand_hostlist(part);
    FUZZ_CHECK(names.has_value(), "folded '" + folded + "': part '" + part + "' does not expand");
    unfolded.insert(names->begin(), names->end());
  }
  FUZZ_CHECK(unfolded == plain_names, "folded '" + folded + "' expands to other names");
  return 0;
}
