#include "util/strings.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <random>

namespace tpuctl::util {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      out.emplace_back(text.substr(start));
      return out;
    }
    out.emplace_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) {
      out += sep;
    }
    out += parts[i];
  }
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

std::string last_line(std::string_view text) {
  std::string_view t = trim(text);
  const size_t nl = t.rfind('\n');
  return std::string(nl == std::string_view::npos ? t : t.substr(nl + 1));
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::string to_lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Expected<int64_t> parse_int(std::string_view text, std::string_view what, int64_t min,
                            int64_t max) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != text.data() + text.size()) {
    return usage_error(std::string(what) + ": '" + std::string(text) + "' is not a whole number");
  }
  if (ec == std::errc::result_out_of_range || value < min || value > max) {
    std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
    if (max == INT64_MAX) {
      range = "at least " + std::to_string(min);
    }
    return usage_error(std::string(what) + ": " + std::string(text) + " is out of range (must be " +
                       range + ")");
  }
  return value;
}

Expected<std::vector<int64_t>> parse_int_list(std::string_view text, std::string_view what,
                                              int64_t min, int64_t max) {
  std::vector<int64_t> out;
  for (const auto& part : split(text, ',')) {
    TPUCTL_TRY_ASSIGN(int64_t v, parse_int(trim(part), what, min, max));
    out.push_back(v);
  }
  return out;
}

Expected<std::chrono::milliseconds> parse_duration(std::string_view text, std::string_view what) {
  auto bad = [&] {
    return usage_error(std::string(what) + ": '" + std::string(text) +
                       "' is not a duration (use e.g. 90s, 15m, 2h, 1d or 1h30m)");
  };
  if (text.empty()) {
    return bad();
  }
  double total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) {
      ++j;
    }
    // The whole run of digits and dots must be one number: "1.5" yes, "1.2.3" or "." no.
    double number = 0;
    auto [end, ec] = std::from_chars(text.data() + i, text.data() + j, number);
    if (j == i || ec != std::errc() || end != text.data() + j) {
      return bad();
    }
    std::string unit;
    while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) {
      unit += text[j++];
    }
    double scale = 0;
    if (unit.empty() || unit == "s") {
      scale = 1000;
    } else if (unit == "ms") {
      scale = 1;
    } else if (unit == "m") {
      scale = 60'000;
    } else if (unit == "h") {
      scale = 3'600'000;
    } else if (unit == "d") {
      scale = 86'400'000;
    } else {
      return bad();
    }
    if (unit.empty() && (i != 0 || j != text.size())) {
      return bad(); // a bare number is only allowed alone: "90" means 90s
    }
    total_ms += number * scale;
    // Checked as a double, before converting: a converted value out of int64's range is UB.
    if (total_ms > static_cast<double>(k_max_duration.count())) {
      return usage_error(std::string(what) + ": '" + std::string(text) + "' is too long (at most " +
                         format_duration(k_max_duration) + ", " +
                         std::to_string(k_max_duration.count() / 86'400'000) + "d)");
    }
    i = j;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(total_ms));
}

std::string counted(size_t n, std::string_view singular, std::string_view plural) {
  std::string out = std::to_string(n) + " ";
  if (n == 1) {
    return out.append(singular);
  }
  return plural.empty() ? out.append(singular).append("s") : out.append(plural);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    prev[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates,
                                 size_t limit) {
  std::vector<std::pair<size_t, std::string>> scored;
  size_t budget = std::max<size_t>(2, word.size() / 3);
  const std::string lower = to_lower(word); // suggestions ignore case: QR -> qr
  for (const auto& c : candidates) {
    const std::string lc = to_lower(c);
    size_t d = edit_distance(lower, lc);
    bool prefix = lower.size() >= 2 && starts_with(lc, lower);
    if (d <= budget || prefix) {
      scored.emplace_back(prefix ? 0 : d, c);
    }
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < limit; ++i) {
    out.push_back(scored[i].second);
  }
  return out;
}

namespace {

// `text` with the bytes `escape` picks as \xNN, cut at `limit` bytes with "..." (0: no limit).
template <typename Pred>
std::string escaped(std::string_view text, size_t limit, Pred escape) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  size_t shown = 0;
  for (char ch : text) {
    if (limit != 0 && ++shown > limit) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(ch);
    if (escape(c)) {
      out += "\\x";
      out += k_hex[c >> 4];
      out += k_hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

} // namespace

std::string printable(std::string_view text) {
  return escaped(text, 80, [](unsigned char c) { return c < 0x20 || c >= 0x7f; });
}

std::string escape_controls(std::string_view text) {
  return escaped(text, 0, [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

Expected<std::chrono::milliseconds> parse_optional_duration(std::string_view text,
                                                            std::string_view what) {
  if (text.empty()) {
    return std::chrono::milliseconds(0);
  }
  return parse_duration(text, what);
}

std::string format_duration(std::chrono::milliseconds duration) {
  int64_t ms = duration.count();
  if (ms < 1000) {
    return std::to_string(ms) + "ms";
  }
  std::string out;
  const int64_t h = ms / 3'600'000;
  const int64_t m = (ms / 60'000) % 60;
  const int64_t s = (ms / 1000) % 60;
  const int64_t rest = ms % 1000;
  if (h > 0) {
    out += std::to_string(h) + "h";
  }
  if (m > 0) {
    out += std::to_string(m) + "m";
  }
  if (s > 0 || rest > 0) {
    out += std::to_string(s);
    if (rest > 0 && h == 0 && m == 0) {
      std::string frac = std::to_string(rest + 1000).substr(1);
      while (frac.back() == '0') {
        frac.pop_back();
      }
      out += "." + frac;
    }
    out += "s";
  }
  return out;
}

std::string random_hex_id() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string id;
  uint64_t v = gen();
  for (int i = 0; i < 16; ++i) {
    id += k_hex[v & 15];
    v >>= 4;
  }
  return id;
}

} // namespace tpuctl::util
