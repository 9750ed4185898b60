#include <doctest/doctest.h>

#include "remote/line_splitter.hpp"

using tpuctl::remote::LineSplitter;

namespace {

struct Collected {
  std::vector<std::string> lines; // "text" or "text<partial>"
  LineSplitter::Emit emit() {
    return [this](std::string_view text, bool complete) {
      lines.push_back(std::string(text) + (complete ? "" : "<partial>"));
    };
  }
};

} // namespace

TEST_SUITE_BEGIN("remote");

TEST_CASE("remote::LineSplitter hands out whole lines however the bytes are split") {
  const std::string text = "alpha\nbeta\n\ngamma delta\nlast";
  for (size_t chunk = 1; chunk <= text.size(); ++chunk) {
    CAPTURE(chunk);
    Collected c;
    LineSplitter s;
    for (size_t off = 0; off < text.size(); off += chunk) {
      s.feed(std::string_view(text).substr(off, chunk), c.emit());
    }
    s.finish(c.emit());
    CHECK(c.lines == std::vector<std::string>{"alpha", "beta", "", "gamma delta", "last<partial>"});
    CHECK(s.buffered() == 0);
  }
}

TEST_CASE("remote::LineSplitter finish emits nothing after a final newline") {
  Collected c;
  LineSplitter s;
  s.feed("one\ntwo\n", c.emit());
  s.finish(c.emit());
  CHECK(c.lines == std::vector<std::string>{"one", "two"});
}

TEST_CASE("remote::LineSplitter keeps long lines whole and cuts only unterminated giants") {
  Collected c;
  LineSplitter s(1000);
  std::string long_line(900, 'x');
  s.feed(long_line.substr(0, 450), c.emit());
  s.feed(long_line.substr(450) + "\n", c.emit());
  REQUIRE(c.lines.size() == 1);
  CHECK(c.lines[0] == long_line);
  s.feed(std::string(2500, 'y'), c.emit()); // no newline at all
  s.finish(c.emit());
  CHECK(c.lines.size() == 4);
  CHECK(c.lines[1] == std::string(1000, 'y') + "<partial>");
  CHECK(c.lines[2] == std::string(1000, 'y') + "<partial>");
  CHECK(c.lines[3] == std::string(500, 'y') + "<partial>");
}
