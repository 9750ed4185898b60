#include "provision/slice/worker_select.hpp"

#include <optional>
#include <set>
#include <string>

#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

std::optional<int> number(std::string_view s) {
  if (s.empty() || s.size() > 6) {
    return std::nullopt;
  }
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    v = v * 10 + (c - '0');
  }
  return v;
}

} // namespace

Expected<std::vector<int>> parse_worker_selection(std::string_view text, int workers) {
  return parse_index_selection(text, workers, "worker");
}

Expected<std::vector<int>> parse_index_selection(std::string_view text, int workers,
                                                 std::string_view what_view) {
  const std::string what(what_view);
  const std::string shown = "--" + what + " '" + util::printable(std::string(text)) + "'";
  // "there are workers 0-3", "there is only node 0".
  const std::string existing = workers == 1
                                   ? "there is only " + what + " 0"
                                   : "there are " + what + "s 0-" + std::to_string(workers - 1);
  if (util::to_lower(text) == "all") {
    std::vector<int> all;
    for (int w = 0; w < workers; ++w) {
      all.push_back(w);
    }
    return all;
  }
  if (text.empty()) {
    return usage_error("--" + what + " is empty: give all, N, a list like 0,2 or a range like 1-3");
  }
  std::set<int> picked;
  for (const auto& item : util::split(std::string(text), ',')) {
    if (item.empty()) {
      continue; // gcloud skips empty items ("1," is 1)
    }
    auto dash = item.find('-');
    if (dash == std::string::npos) {
      auto w = number(item);
      if (!w) {
        return usage_error(shown + ": '" + util::printable(item) + "' is not a " + what +
                           " id (use all, N, a list like 0,2 or a range like 1-3)");
      }
      if (*w >= workers) {
        return usage_error(shown + ": " + what + " " + item + " does not exist; " + existing);
      }
      picked.insert(*w);
      continue;
    }
    auto a = number(std::string_view(item).substr(0, dash));
    auto b = number(std::string_view(item).substr(dash + 1));
    if (!a || !b) {
      return usage_error(shown + ": '" + util::printable(item) +
                         "' is not a range (write START-END with numbers, e.g. 1-3)");
    }
    if (*a >= *b) {
      return usage_error(shown + ": range '" + item +
                         "' must start below its end (write a single " + what + " as N)");
    }
    if (*b >= workers) {
      return usage_error(shown + ": range '" + item + "' goes past the last " + what + "; " +
                         existing);
    }
    for (int w = *a; w <= *b; ++w) {
      picked.insert(w);
    }
  }
  if (picked.empty()) {
    return usage_error(shown + " names no " + what +
                       ": give all, N, a list like 0,2 or a range like 1-3");
  }
  return std::vector<int>(picked.begin(), picked.end());
}

} // namespace tpuctl::provision
