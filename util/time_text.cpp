#include "util/time_text.hpp"

#include <cctype>
#include <chrono>
#include <cstdio>

namespace tpuctl::util {

namespace {

bool digits(std::string_view s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) {
    return false;
  }
  out = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) {
      return false;
    }
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

} // namespace

Expected<int64_t> parse_timestamp(std::string_view text, std::string_view what) {
  auto bad = [&] {
    return make_error(ErrorKind::usage,
                      std::string(what) + " '" + std::string(text) +
                          "' is not an RFC 3339 time: write e.g. 2026-11-22T10:00:00Z or "
                          "2026-11-22T11:00:00+01:00");
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!digits(text, 0, 4, y) || text.size() < 20 || text[4] != '-' || !digits(text, 5, 2, mo) ||
      text[7] != '-' || !digits(text, 8, 2, d) || (text[10] != 'T' && text[10] != 't') ||
      !digits(text, 11, 2, h) || text[13] != ':' || !digits(text, 14, 2, mi) || text[16] != ':' ||
      !digits(text, 17, 2, s)) {
    return bad();
  }
  size_t pos = 19;
  int64_t frac_ms = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int scale = 100;
    size_t start = pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      frac_ms += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) {
      return bad();
    }
  }
  int offset_min = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int oh = 0, om = 0;
    if (!digits(text, pos + 1, 2, oh) || pos + 3 >= text.size() || text[pos + 3] != ':' ||
        !digits(text, pos + 4, 2, om)) {
      return bad();
    }
    offset_min = (text[pos] == '+' ? 1 : -1) * (oh * 60 + om);
    pos += 6;
  } else {
    return bad();
  }
  if (pos != text.size() || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 60) {
    return bad();
  }
  using namespace std::chrono;
  year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) {
    return bad();
  }
  int64_t days = sys_days(ymd).time_since_epoch().count();
  int64_t secs = days * 86400 + h * 3600 + mi * 60 + s - offset_min * 60;
  return secs * 1000 + frac_ms;
}

std::string format_timestamp(int64_t unix_ms) {
  if (unix_ms == 0) {
    return "";
  }
  using namespace std::chrono;
  int64_t secs = unix_ms / 1000;
  int64_t days = secs / 86400;
  int64_t rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  year_month_day ymd{sys_days{std::chrono::days{days}}};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(rem / 3600), static_cast<int>(rem % 3600 / 60),
                static_cast<int>(rem % 60));
  return buf;
}

std::string format_timestamp_ms(int64_t unix_ms) {
  std::string text = format_timestamp(unix_ms);
  if (text.empty()) {
    return text;
  }
  int64_t ms = unix_ms % 1000;
  if (ms < 0) {
    ms += 1000;
  }
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03d", static_cast<int>(ms));
  text.insert(text.size() - 1, frac);
  return text;
}

int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace tpuctl::util
