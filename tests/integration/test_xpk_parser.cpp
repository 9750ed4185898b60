// xpk's own parser decides what an xpk command line is. tests/xpk/xpk_invocations.py loads the
// argparse tree of the pinned xpk (scripts/deps.sh --frameworks installs it in /opt/tpuctl/xpk,
// with its documentation) and gives, for every flag of `cluster create|delete|describe|list`
// and `workload create|delete|list`, an invocation xpk's parser accepts: the subcommand's
// required flags plus that flag with a value of the right arity. tpuctl runs each one with the
// name unchanged against an empty state, next to the same invocation without the flag: it must
// give the same answer (the flag was taken: everything tpuctl checks before the store was
// passed, and it then stopped where the flagless line stops), or refuse in one line that names
// the flag. A newer xpk that adds a flag makes this test name it. The command lines of xpk's
// documentation that its parser accepts get the same: each parses, or is refused in one line.
// The test fails, never skips, when the xpk environment is missing.
#include <filesystem>
#include <map>
#include <sstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string xpk_dir() {
  const char* env = std::getenv("TPUCTL_XPK_DIR");
  return env && *env ? env : "/opt/tpuctl/xpk";
}

// The error lines ("tpuctl: error: ...") of a run.
std::vector<std::string> errors_of(const std::string& err) {
  std::vector<std::string> out;
  for (const auto& line : util::split(err, '\n')) {
    if (line.rfind("tpuctl: error: ", 0) == 0) {
      out.push_back(line);
    }
  }
  return out;
}

struct Run {
  int exit_code = -1;
  std::vector<std::string> errors;
};

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("xpk's parser: every flag of xpk's cluster and workload commands, and every command "
          "line of its documentation, is taken by tpuctl or refused in one line naming it") {
  const std::string python = xpk_dir() + "/bin/python3";
  REQUIRE_MESSAGE(fs::exists(python), "no xpk environment at " << xpk_dir()
                                                               << ": run scripts/deps.sh "
                                                                  "--frameworks");
  test::TempDir tmp;
  const std::map<std::string, std::string> env{
      {"HOME", tmp.path().string()},
      {"XDG_STATE_HOME", (tmp.path() / "state").string()},
      {"XDG_CONFIG_HOME", (tmp.path() / "config").string()}};
  util::ProcessOptions o;
  o.timeout = std::chrono::minutes(5);
  auto listed = util::run_process({python, test::source_dir() + "/tests/xpk/xpk_invocations.py",
                                   "--cluster", "c", "--workload", "w", "--tpu-type",
                                   "v5litepod-16", "--docs", xpk_dir() + "/docs"},
                                  o);
  REQUIRE(listed);
  REQUIRE_MESSAGE(listed->exit_code == 0, listed->err);

  const fs::path cwd = tmp.path() / "cwd";
  fs::create_directories(cwd);
  std::map<std::string, Run> cache;
  auto run = [&](const std::vector<std::string>& argv) {
    std::string key;
    for (const auto& a : argv) {
      key += a + '\x1f';
    }
    if (auto it = cache.find(key); it != cache.end()) {
      return it->second;
    }
    // Run from an empty directory: xpk's --script-dir defaults to the current one.
    std::vector<std::string> full{test::tpuctl_binary()};
    full.insert(full.end(), argv.begin(), argv.end());
    util::ProcessOptions po;
    po.env_set = env;
    po.env_unset = {"TPUCTL_STATE", "TPUCTL_POOL"};
    po.cwd = cwd.string();
    po.timeout = std::chrono::minutes(2);
    auto r = util::run_process(full, po);
    REQUIRE(r);
    Run out{r->exit_code, errors_of(r->err)};
    cache[key] = out;
    return out;
  };

  std::istringstream lines(listed->out);
  std::string line;
  std::getline(lines, line);
  MESSAGE("xpk " << json::parse(line).value("xpk_version", "?"));
  int flags = 0, taken = 0, refused = 0, docs = 0, docs_parsed = 0;
  std::vector<std::string> unparsable;
  while (std::getline(lines, line)) {
    const json j = json::parse(line);
    const std::string flag = j.value("flag", "");
    CAPTURE(line);
    if (j["argv"].is_null()) {
      unparsable.push_back(j["command"].get<std::string>() + " " + flag);
      continue;
    }
    std::vector<std::string> argv = j["argv"].get<std::vector<std::string>>();
    const Run with = run(argv);
    // Never more than one error line, whatever the line.
    CHECK(with.errors.size() <= 1);
    auto parse_error = [&](const Run& r) {
      return !r.errors.empty() && (test::contains(r.errors[0], "unknown flag") ||
                                   test::contains(r.errors[0], "unexpected argument") ||
                                   test::contains(r.errors[0], "unknown command"));
    };
    if (!flag.empty() && j["without"].is_null()) {
      // A flag the command needs (xpk refuses the line without it): the line is the flagless
      // one, and it must parse.
      ++flags;
      CHECK_MESSAGE(!parse_error(with), with.errors[0]);
      taken += parse_error(with) ? 0 : 1;
    } else if (!flag.empty()) {
      ++flags;
      const std::vector<std::string> base = j["without"].get<std::vector<std::string>>();
      const Run without = run(base);
      const bool same = with.exit_code == without.exit_code && with.errors == without.errors;
      const bool named = with.errors.size() == 1 &&
                         with.errors[0].find(flag) != std::string::npos &&
                         with.exit_code == 2;
      CHECK_MESSAGE((same || named), "tpuctl " << j["command"].get<std::string>() << " with "
                                               << flag << ": exit " << with.exit_code << ": "
                                               << (with.errors.empty() ? "" : with.errors[0]));
      taken += same ? 1 : 0;
      refused += !same && named ? 1 : 0;
    } else {
      ++docs;
      // A documented line parses: the error, if any, is not one of the parser's own.
      CHECK_MESSAGE(!parse_error(with), "from " << j.value("doc", "") << ": " << with.errors[0]);
      docs_parsed += parse_error(with) ? 0 : 1;
    }
  }
  MESSAGE(flags << " flags: " << taken << " taken, " << refused << " refused naming the flag; "
                << docs << " documented lines, " << docs_parsed << " parsed");
  // Every flag got an invocation xpk itself accepts, and there are as many as xpk 1.16 has.
  CHECK(unparsable.empty());
  CHECK(flags >= 160);
  CHECK(docs >= 40);
  CHECK(taken + refused == flags);
}
