// The gcloud/xpk compatibility tables (cli/compat.hpp): their rows are well formed and name
// commands tpuctl has, ignored flags give one notice (silenced by --quiet), refused flags and
// commands give one error line with what to use instead, and the words after "--" are never
// taken for flags. In process, on offline commands (no state store is opened).
#include <set>

#include <doctest/doctest.h>

#include "cli/compat.hpp"
#include "tests/support/helpers.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using namespace tpuctl::cli;
using tpuctl::test::run_cli;

TEST_SUITE_BEGIN("unit");

namespace {

size_t lines_with(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (const auto& line : util::split(text, '\n')) {
    n += line.find(part) != std::string::npos;
  }
  return n;
}

} // namespace

TEST_CASE("compat: every row says why, a refusal says what instead, names are long flags") {
  std::set<std::pair<std::string, std::string>> seen; // (name, scope)
  for (const auto& f : compat_flags()) {
    for (const auto& name : util::split(f.names, ',')) {
      INFO(name);
      CHECK(util::starts_with(name, "--"));
      CHECK(seen.insert({name, std::string(f.scope)}).second);
    }
    CHECK(!f.scope.empty());
    if (f.action != CompatAction::zone && f.action != CompatAction::project) {
      CHECK(!f.why.empty());
    }
    CHECK((f.action == CompatAction::refuse) == !f.instead.empty());
  }
  for (const auto& c : compat_commands()) {
    INFO(c.path);
    CHECK(!c.why.empty());
    CHECK(!c.instead.empty());
  }
}

TEST_CASE("compat: every command a row names exists (or is one of the refused commands)") {
  std::set<std::string> paths;
  for (const auto& f : compat_flags()) {
    if (f.scope != "*") {
      for (const auto& p : util::split(f.scope, '|')) {
        paths.insert(p);
      }
    }
  }
  for (const auto& path : paths) {
    std::vector<std::string> args = util::split(path, ' ');
    args.push_back("--help");
    auto r = run_cli(args);
    CHECK_MESSAGE(r.exit_code == 0, path << ": " << r.err);
    CHECK_MESSAGE(r.out.find("Usage: tpuctl " + path + " ") != std::string::npos,
                  path << " is not a command: " << r.out.substr(0, r.out.find('\n', 100)));
  }
}

TEST_CASE("compat: an ignored flag is one notice line, silenced by --quiet; the command runs") {
  auto r = run_cli({"topology", "describe", "v5p-8", "--account=a@b.c", "--trace-token", "b",
                    "--format", "json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.out.find("\"type\": \"v5p-8\"") != std::string::npos);
  CHECK(lines_with(r.err, "tpuctl: notice: --account 'a@b.c' ignored:") == 1);
  CHECK(lines_with(r.err, "tpuctl: notice: --trace-token 'b' ignored:") == 1);
  auto quiet = run_cli({"topology", "describe", "v5p-8", "--account=a@b.c", "-q"});
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
}

TEST_CASE("compat: a refused flag or command is one error line saying what to use instead") {
  auto flag = run_cli({"topology", "describe", "v5p-8", "--flatten", "x"});
  CHECK(flag.exit_code == 2);
  CHECK(lines_with(flag.err, "tpuctl: error:") == 1);
  CHECK(flag.err.find("--flatten is not supported:") != std::string::npos);
  CHECK(flag.err.find("instead: --format json and jq") != std::string::npos);
  auto cmd = run_cli({"tpu-vm", "start", "my-node", "--zone=us-central2-b", "--async"});
  CHECK(cmd.exit_code == 2);
  CHECK(lines_with(cmd.err, "tpuctl: error:") == 1);
  CHECK(cmd.err.find("'tpuctl tpu-vm start' is not supported") != std::string::npos);
  auto group = run_cli({"storage", "attach", "s", "--type", "gcsfuse", "--cluster", "c"});
  CHECK(group.exit_code == 2);
  CHECK(lines_with(group.err, "tpuctl: error:") == 1);
}

TEST_CASE("compat: a flag outside its scope, or after '--', is not taken") {
  // --network belongs to create commands only: elsewhere it is the unknown flag it is.
  auto r = run_cli({"topology", "describe", "v5p-8", "--network", "default"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("unknown flag '--network'") != std::string::npos);
}

TEST_CASE("compat: enum values are case-insensitive and take '_' for '-'") {
  CHECK(enum_value("FLEX-START") == "flex-start");
  CHECK(enum_value("flex_start") == "flex-start");
  CHECK(enum_value("Spot") == "spot");
  CHECK(normalize_aliases({"tpuctl", "-tgps", "60", "-tgps=5", "-t"}) ==
        std::vector<std::string>{"tpuctl", "--termination-grace-period-seconds", "60",
                                 "--termination-grace-period-seconds=5", "-t"});
}

TEST_CASE("compat: --ssh-flag's value may start with '-', as gcloud takes it; after '--' nothing "
          "is joined") {
  using Args = std::vector<std::string>;
  CHECK(normalize_aliases({"tpuctl", "tpu-vm", "ssh", "n", "--ssh-flag", "-L 1:h:2", "--ssh-flag",
                           "-N", "--", "--ssh-flag", "x"}) ==
        Args{"tpuctl", "tpu-vm", "ssh", "n", "--ssh-flag=-L 1:h:2", "--ssh-flag=-N", "--",
             "--ssh-flag", "x"});
  CHECK(normalize_aliases({"tpuctl", "ssh", "q", "--ssh-flag"}) ==
        Args{"tpuctl", "ssh", "q", "--ssh-flag"});
}

TEST_CASE("compat: gcloud's output forms: csv(...), csv[no-heading](...), none, --limit") {
  auto csv = run_cli({"topologies", "list", "--filter", "accelerator_type=v5p-8", "--format",
                      "csv(accelerator_type,topology)"});
  REQUIRE_MESSAGE(csv.exit_code == 0, csv.err);
  CHECK(csv.out == "accelerator_type,topology\nv5p-8,2x2x1\n");
  auto bare = run_cli(
      {"topologies", "list", "--limit", "2", "--format", "csv[no-heading](accelerator_type)"});
  REQUIRE_MESSAGE(bare.exit_code == 0, bare.err);
  CHECK(std::count(bare.out.begin(), bare.out.end(), '\n') == 2);
  CHECK(bare.out.find("accelerator_type") == std::string::npos);
  auto none = run_cli({"topologies", "list", "--format", "none"});
  CHECK(none.exit_code == 0);
  CHECK(none.out.empty());
  CHECK(run_cli({"topologies", "list", "--limit", "unlimited"}).exit_code == 0);
  CHECK(run_cli({"topologies", "list", "--limit", "0"}).exit_code == 2);
}
