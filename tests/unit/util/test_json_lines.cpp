#include <doctest/doctest.h>

#include "util/json_lines.hpp"

using namespace tpuctl::util;

TEST_SUITE_BEGIN("util");

TEST_CASE("util::json_pointer_lines maps every value to its line") {
  std::string text = "{\n"
                     "  \"pool\": \"p\",\n"
                     "  \"hosts\": [\n"
                     "    {\"host\": \"a\", \"port\": 22},\n"
                     "    {\n"
                     "      \"host\": \"b\",\n"
                     "      \"labels\": {\"rack/row\": \"1\\\"x\"}\n"
                     "    }\n"
                     "  ]\n"
                     "}\n";
  auto lines = json_pointer_lines(text);
  CHECK(lines.at("") == 1);
  CHECK(lines.at("/pool") == 2);
  CHECK(lines.at("/hosts") == 3);
  CHECK(lines.at("/hosts/0") == 4);
  CHECK(lines.at("/hosts/0/port") == 4);
  CHECK(lines.at("/hosts/1") == 5);
  CHECK(lines.at("/hosts/1/host") == 6);
  CHECK(lines.at("/hosts/1/labels/rack~1row") == 7);
  CHECK(line_of(lines, "/hosts/1/missing_field") == 5);
  CHECK(line_of(lines, "/nothing/here") == 1);
}

TEST_CASE("util::json_pointer_lines keeps what it found before malformed text") {
  auto lines = json_pointer_lines("{\n \"a\": 1,\n \"b\": [1,\n");
  CHECK(lines.at("/a") == 2);
  CHECK(lines.at("/b/0") == 3);
}

TEST_CASE("util::json_pointer_lines stops recording past 256 levels of nesting "
          "(fuzz/regressions/inventory/deep-nesting)") {
  // 20,000 nested arrays, valid JSON that nlohmann parses, used to overflow the stack (one
  // recursion per level) and to copy a growing pointer per level.
  const int depth = 20000;
  const std::string text =
      "{\"hosts\": [],\n \"x\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
  auto lines = json_pointer_lines(text);
  CHECK(lines.size() == 2 + 256); // "", /hosts, then /x and 255 levels below it
  CHECK(line_of(lines, "/hosts") == 1);
  std::string deep = "/x";
  for (int i = 0; i < 1000; ++i) {
    deep += "/0";
  }
  CHECK(line_of(lines, deep) == 2); // its closest recorded ancestor's line
}

TEST_SUITE_END();
