#include <random>
#include <sstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "util/json_string.hpp"

using tpuctl::util::JsonStringWriter;

TEST_SUITE_BEGIN("util");

namespace {

// What nlohmann::json writes for the whole string (the jsonl records' reference).
std::string reference(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// `text` fed in the pieces `cuts` marks.
std::string streamed(const std::string& text, const std::vector<size_t>& cuts) {
  std::ostringstream os;
  JsonStringWriter w(os);
  size_t at = 0;
  for (size_t cut : cuts) {
    w.feed(std::string_view(text).substr(at, cut - at));
    at = cut;
  }
  w.feed(std::string_view(text).substr(at));
  w.finish();
  return os.str();
}

} // namespace

TEST_CASE("util::JsonStringWriter escapes as nlohmann::json does, whole or cut anywhere") {
  const std::vector<std::string> cases = {
      "",
      "plain text\n",
      "quote \" backslash \\ tab \t bell \x07 escape \x1b del \x7f",
      "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",    // é, €, an emoji
      "lone \x80 continuation, bad lead \xc0\xaf \xff",     // each byte invalid
      "broken \xe2\x82 sequence \xe2\x82\x41 and \xf0\x9f", // cut short, at the very end too
      "surrogate \xed\xa0\x80 overlong \xe0\x80\x80 too big \xf4\x90\x80\x80",
  };
  for (const auto& text : cases) {
    CAPTURE(text);
    const std::string want = reference(text);
    CHECK(streamed(text, {}) == want);
    for (size_t cut = 0; cut <= text.size(); ++cut) { // every single cut
      CHECK(streamed(text, {cut}) == want);
    }
    std::vector<size_t> every; // a byte at a time
    for (size_t i = 1; i < text.size(); ++i) {
      every.push_back(i);
    }
    CHECK(streamed(text, every) == want);
  }
}

TEST_CASE("util::JsonStringWriter matches nlohmann::json on random bytes in random pieces") {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::string text(rng() % 200, '\0');
    for (auto& c : text) {
      // Mostly UTF-8-looking bytes, so valid sequences and near misses both occur.
      static const unsigned char pool[] = {'a',  '\n', '"',  0x01, 0x7f, 0x80, 0x9f, 0xa0, 0xbf,
                                           0xc2, 0xdf, 0xe0, 0xe2, 0xed, 0xef, 0xf0, 0xf4, 0xff};
      c = static_cast<char>(pool[rng() % sizeof(pool)]);
    }
    std::vector<size_t> cuts;
    for (size_t at = 0; at < text.size();) {
      at += 1 + rng() % 5;
      if (at < text.size()) {
        cuts.push_back(at);
      }
    }
    CAPTURE(round);
    CHECK(streamed(text, cuts) == reference(text));
  }
}
