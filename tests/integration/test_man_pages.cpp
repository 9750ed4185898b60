// The man pages in man/ against the binary: they are what `tpuctl __man` generates now (so a
// command without a page, or a page whose synopsis or flags disagree with --help, fails here),
// and `man --warnings` renders every one of them cleanly at 80 columns.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using tpuctl::test::run_tpuctl;
using tpuctl::test::TempDir;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

namespace {

std::set<std::string> page_names(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".1") {
      out.insert(e.path().filename().string());
    }
  }
  return out;
}

// The long flags a --help text lists ("--name").
std::set<std::string> help_flags(const std::string& help) {
  std::set<std::string> out;
  for (const auto& line : tpuctl::util::split(help, '\n')) {
    auto t = std::string(tpuctl::util::trim(line));
    for (size_t at = t.find("--"); at != std::string::npos && at < 40; at = t.find("--", at + 2)) {
      size_t end = at + 2;
      while (end < t.size() &&
             (std::isalnum(static_cast<unsigned char>(t[end])) || t[end] == '-')) {
        ++end;
      }
      if (end > at + 2 && (at == 0 || t[at - 1] == ',' || t[at - 1] == ' ')) {
        out.insert(t.substr(at, end - at));
      }
      if (at != 0) {
        break;
      }
    }
  }
  out.erase("--help");
  return out;
}

// How a man page spells `text`: '-' is \-.
std::string roff_of(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c == '-' ? std::string("\\-") : std::string(1, c);
  }
  return out;
}

} // namespace

TEST_CASE("man pages: man/ is what the binary generates (regenerate: tpuctl __man man)") {
  TempDir tmp;
  auto gen = run_tpuctl({"__man", tmp.path().string()});
  REQUIRE_MESSAGE(gen.exit_code == 0, gen.err);
  const fs::path committed = fs::path(tpuctl::test::source_dir()) / "man";
  CHECK(page_names(committed) == page_names(tmp.path()));
  for (const auto& name : page_names(tmp.path())) {
    CAPTURE(name);
    CHECK_MESSAGE(
        tpuctl::test::read_file(committed / name) == tpuctl::test::read_file(tmp.path() / name),
        (std::string("man/") + name + " is stale: run 'build/cli/tpuctl __man man' and commit"));
  }
}

TEST_CASE("man pages: every visible command group has a page with every flag of its --help") {
  auto groups = run_tpuctl({"__complete", "--", ""});
  REQUIRE(groups.exit_code == 0);
  const fs::path dir = fs::path(tpuctl::test::source_dir()) / "man";
  for (const auto& line : tpuctl::util::split(groups.out, '\n')) {
    const std::string group = line.substr(0, line.find('\t'));
    if (group.empty() || group == "qr") {
      continue; // the alias shares queued-resources' page
    }
    CAPTURE(group);
    const fs::path page = dir / ("tpuctl-" + group + ".1");
    REQUIRE_MESSAGE(fs::exists(page), (std::string("no man page for 'tpuctl ") + group + "'"));
    const std::string text = tpuctl::test::read_file(page);
    auto leaves = run_tpuctl({"__complete", "--", group, ""});
    std::vector<std::vector<std::string>> commands;
    for (const auto& l : tpuctl::util::split(leaves.out, '\n')) {
      const std::string leaf = l.substr(0, l.find('\t'));
      // Not flags, nor the ":files" a path argument (scp's) answers with.
      if (!leaf.empty() && !tpuctl::util::starts_with(leaf, "-") &&
          !tpuctl::util::starts_with(leaf, ":")) {
        commands.push_back({group, leaf});
      }
    }
    if (commands.empty()) {
      commands.push_back({group});
    }
    for (auto args : commands) {
      CAPTURE(tpuctl::util::join(args, " "));
      CHECK(text.find(".B tpuctl " + roff_of(tpuctl::util::join(args, " "))) != std::string::npos);
      args.push_back("--help");
      auto help = run_tpuctl(args);
      for (const auto& flag : help_flags(help.out)) {
        CHECK_MESSAGE(text.find(roff_of(flag)) != std::string::npos,
                      (flag + " is missing from " + page.filename().string()));
      }
    }
  }
}

TEST_CASE("man pages: each renders without warnings (MANWIDTH=80 man --warnings -l)") {
  const fs::path dir = fs::path(tpuctl::test::source_dir()) / "man";
  REQUIRE_MESSAGE(!tpuctl::util::find_program("man").empty(),
                  "man is not installed: run scripts/deps.sh");
  for (const auto& name : page_names(dir)) {
    CAPTURE(name);
    tpuctl::util::ProcessOptions o;
    o.env_set = {{"MANWIDTH", "80"}, {"MAN_KEEP_FORMATTING", ""}};
    auto r = tpuctl::util::run_process({"man", "--warnings", "-l", (dir / name).string()}, o);
    REQUIRE(r);
    CHECK(r->exit_code == 0);
    CHECK_MESSAGE(r->err.empty(), r->err);
    CHECK((name != "tpuctl.1" || r->out.find("EXIT STATUS") != std::string::npos));
  }
}
