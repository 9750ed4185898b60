#include <doctest/doctest.h>

#include "util/process.hpp"
#include "util/shell_quote.hpp"

using tpuctl::util::shell_join;
using tpuctl::util::shell_quote;
using tpuctl::util::shell_quote_path;

namespace {

// What /bin/sh makes of `script` (its stdout).
std::string sh_output(const std::string& script,
                      const std::map<std::string, std::string>& env = {}) {
  tpuctl::util::ProcessOptions o;
  o.env_set = env;
  auto r = tpuctl::util::run_process({"sh", "-c", script}, o);
  REQUIRE(r);
  REQUIRE(r->exit_code == 0);
  return r->out;
}

const std::vector<std::string> k_hostile = {
    "",
    "plain",
    "two words",
    "semi;colon; rm -rf /nonexistent",
    "$(echo injected)",
    "`echo injected`",
    "${HOME}",
    "it's",
    "''",
    "'\\''",
    "\"double\"",
    "back\\slash",
    "new\nline",
    "-n",
    "--version",
    "*",
    "a|b&c>d<e",
    "tab\there",
    "trailing '",
    "ünïcödé ✓",
};

} // namespace

TEST_SUITE_BEGIN("util");

TEST_CASE("util::shell_quote keeps hostile strings as one literal word") {
  for (const auto& s : k_hostile) {
    CAPTURE(s);
    // printf's format is fixed, so a leading '-' or '%' in the value cannot act as an option.
    CHECK(sh_output("printf '%s' " + shell_quote(s)) == s);
    // Exactly one word: the count of arguments is 1.
    CHECK(sh_output("set -- " + shell_quote(s) + "; printf '%s' $#") == "1");
  }
  CHECK(shell_quote("it's") == "'it'\\''s'");
}

TEST_CASE("util::shell_join quotes each argument") {
  std::vector<std::string> argv(k_hostile.begin(), k_hostile.end());
  std::string script = "for a in " + shell_join(argv) + "; do printf '<%s>' \"$a\"; done";
  std::string expected;
  for (const auto& a : argv) {
    expected += "<" + a + ">";
  }
  CHECK(sh_output(script) == expected);
}

TEST_CASE("util::shell_quote_path keeps ~/ meaning the remote home and quotes the rest") {
  std::map<std::string, std::string> env = {{"HOME", "/home/with space"}};
  CHECK(sh_output("printf '%s' " + shell_quote_path("~/bin/$(x) 'y'"), env) ==
        "/home/with space/bin/$(x) 'y'");
  CHECK(sh_output("printf '%s' " + shell_quote_path("~"), env) == "/home/with space");
  CHECK(sh_output("printf '%s' " + shell_quote_path("/abs/~/x"), env) == "/abs/~/x");
  CHECK(sh_output("printf '%s' " + shell_quote_path("~user/x"), env) == "~user/x");
}
