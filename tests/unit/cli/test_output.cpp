#include <doctest/doctest.h>

#include "cli/output.hpp"

using namespace tpuctl::cli;

TEST_SUITE_BEGIN("cli");

TEST_CASE("cli::to_yaml writes block mappings, flow arrays of scalars and quotes risky strings") {
  Json v = {
      {"type", "v5p-128"},
      {"chips", 64},
      {"wrap", {true, true, true}},
      {"topology", "4x4x4"},
      {"empty", ""},
      {"looks_numeric", "8476"},
      {"bool_word", "yes"},
      {"colon", "a: b"},
      {"nested", {{"x", 1}}},
      {"devices", {{0, 1}, {2, 3}}},
      {"hosts", Json::array({Json{{"name", "h0"}, {"id", 0}}, Json{{"name", "h1"}, {"id", 1}}})}};
  std::string expected = "type: v5p-128\n"
                         "chips: 64\n"
                         "wrap: [true, true, true]\n"
                         "topology: 4x4x4\n"
                         "empty: \"\"\n"
                         "looks_numeric: \"8476\"\n"
                         "bool_word: \"yes\"\n"
                         "colon: \"a: b\"\n"
                         "nested:\n"
                         "  x: 1\n"
                         "devices: [[0, 1], [2, 3]]\n"
                         "hosts:\n"
                         "- name: h0\n"
                         "  id: 0\n"
                         "- name: h1\n"
                         "  id: 1\n";
  CHECK(to_yaml(v) == expected);
}

TEST_CASE("cli::to_yaml of a top-level list of objects") {
  Json v = Json::array({Json{{"a", 1}}, Json{{"a", 2}, {"b", Json::array()}}});
  CHECK(to_yaml(v) == "- a: 1\n- a: 2\n  b: []\n");
}

TEST_CASE("cli::render_table aligns columns and trims trailing blanks") {
  std::string t =
      render_table({"NAME", "CHIPS", "TOPOLOGY"}, {{"v4-8", "4", "2x2x1"}, {"v5p-128", "64", ""}});
  CHECK(t == "NAME     CHIPS  TOPOLOGY\n"
             "v4-8     4      2x2x1\n"
             "v5p-128  64\n");
}

TEST_CASE("cli::cell_text") {
  CHECK(cell_text(Json("x")) == "x");
  CHECK(cell_text(Json(true)) == "true");
  CHECK(cell_text(Json(nullptr)) == "");
  CHECK(cell_text(Json::array({1, 2, 3})) == "1,2,3");
}

TEST_SUITE_END();
