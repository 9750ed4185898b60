// Host folding: each name splits into head + last run of digits + tail. Names with the same head,
// tail and digit width (the width only counts for zero-padded numbers) form one family; a
// family's numbers, sorted, become comma-separated runs "a-b". Families are printed in the order
// their first member appeared, so the folded list reads like the input.
#include "remote/grouping.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <variant>

#include "remote/spool.hpp"

namespace tpuctl::remote {

namespace {

struct SplitName {
  std::string head;
  std::string digits;
  std::string tail;
};

std::optional<SplitName> split_last_number(const std::string& name) {
  size_t end = name.find_last_of("0123456789");
  if (end == std::string::npos) {
    return std::nullopt;
  }
  size_t begin = end;
  while (begin > 0 && name[begin - 1] >= '0' && name[begin - 1] <= '9') {
    --begin;
  }
  if (end - begin + 1 > 9) { // too long to be an index: keep as is
    return std::nullopt;
  }
  return SplitName{name.substr(0, begin), name.substr(begin, end - begin + 1),
                   name.substr(end + 1)};
}

struct Family {
  std::string head;
  std::string tail;
  size_t width = 0; // digits of zero-padded numbers; 0 for natural numbers
  std::set<long> numbers;
};

std::string render(const Family& f) {
  auto num = [&](long n) {
    std::string s = std::to_string(n);
    if (s.size() < f.width) {
      s.insert(0, f.width - s.size(), '0');
    }
    return s;
  };
  if (f.numbers.size() == 1) {
    return f.head + num(*f.numbers.begin()) + f.tail;
  }
  std::string ranges;
  auto it = f.numbers.begin();
  while (it != f.numbers.end()) {
    long first = *it, last = *it;
    auto next = std::next(it);
    while (next != f.numbers.end() && *next == last + 1) {
      last = *next;
      ++next;
    }
    if (!ranges.empty()) {
      ranges += ',';
    }
    ranges += num(first);
    if (last != first) {
      ranges += '-' + num(last);
    }
    it = next;
  }
  return f.head + "[" + ranges + "]" + f.tail;
}

} // namespace

std::string fold_hosts(const std::vector<std::string>& names) {
  // Each output item is either a family (by key) or a plain name.
  std::vector<std::variant<size_t, std::string>> order;
  std::vector<Family> families;
  std::map<std::tuple<std::string, std::string, size_t>, size_t> family_of;
  std::set<std::string> seen_plain;
  for (const auto& name : names) {
    auto split = split_last_number(name);
    if (!split) {
      if (seen_plain.insert(name).second) {
        order.emplace_back(name);
      }
      continue;
    }
    size_t width = (split->digits.size() > 1 && split->digits[0] == '0') ? split->digits.size() : 0;
    auto key = std::make_tuple(split->head, split->tail, width);
    auto found = family_of.find(key);
    if (found == family_of.end()) {
      found = family_of.emplace(key, families.size()).first;
      families.push_back(Family{split->head, split->tail, width, {}});
      order.emplace_back(found->second);
    }
    families[found->second].numbers.insert(std::stol(split->digits));
  }
  std::string out;
  for (const auto& item : order) {
    if (!out.empty()) {
      out += ',';
    }
    if (const auto* family = std::get_if<size_t>(&item)) {
      out += render(families[*family]);
    } else {
      out += std::get<std::string>(item);
    }
  }
  return out;
}

std::vector<OutputGroup> group_outputs(const std::vector<HostResult>& results, Stream stream) {
  std::vector<const HostResult*> sorted;
  for (const auto& r : results) {
    sorted.push_back(&r);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const HostResult* a, const HostResult* b) { return a->index < b->index; });
  std::vector<OutputGroup> groups;
  std::map<std::string_view, size_t> group_of;
  std::map<std::pair<std::string, uint64_t>, size_t> spooled_group_of;
  for (const HostResult* r : sorted) {
    const std::string& text = stream == Stream::out ? r->out : r->err;
    Spool* spool = (stream == Stream::out ? r->out_spool : r->err_spool).get();
    size_t group = 0;
    if (spool != nullptr && !spool->empty()) {
      auto [it, added] =
          spooled_group_of.emplace(std::make_pair(spool->digest(), spool->size()), groups.size());
      group = it->second;
      if (added) {
        groups.push_back(OutputGroup{"", spool, {}, {}});
      } else if (!groups[group].spool->has_content() && spool->has_content()) {
        groups[group].spool = spool; // the one copy kept (the others were freed as they came)
      }
    } else if (!text.empty()) {
      auto [it, added] = group_of.emplace(text, groups.size());
      group = it->second;
      if (added) {
        groups.push_back(OutputGroup{text, nullptr, {}, {}});
      }
    } else {
      continue;
    }
    groups[group].indices.push_back(r->index);
    groups[group].hosts.push_back(r->host);
  }
  return groups;
}

std::string short_reason(const HostResult& r) {
  switch (r.outcome) {
  case Outcome::ok:
    return "ok";
  case Outcome::exit_code:
    return "exit " + std::to_string(r.exit_code);
  case Outcome::signal:
    return "signal " + (r.signal_name.empty() ? "?" : r.signal_name);
  case Outcome::timeout:
    return "timed out";
  case Outcome::interrupted:
    return "interrupted";
  case Outcome::refused:
    return "connection refused";
  case Outcome::unreachable:
    return "unreachable";
  case Outcome::auth:
    return "authentication failed";
  case Outcome::host_key_unknown:
    return "host key unknown";
  case Outcome::host_key_changed:
    return "host key changed";
  case Outcome::error:
    return "error";
  }
  return "error";
}

} // namespace tpuctl::remote
