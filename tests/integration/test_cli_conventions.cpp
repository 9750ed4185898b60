// The conventions every tpuctl command follows, checked through the real binary: exit status,
// error lines, did-you-mean, stdout for results only, global flags anywhere, golden --help.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "tests/support/helpers.hpp"
#include "util/strings.hpp"

using tpuctl::test::check_golden;
using tpuctl::test::run_tpuctl;

TEST_SUITE_BEGIN("integration");

TEST_CASE("cli: --help of tpuctl and of every command group matches its golden file") {
  auto root = run_tpuctl({"--help"});
  CHECK(root.exit_code == 0);
  CHECK(root.err.empty());
  CHECK(check_golden("help/tpuctl.txt", root.out) == "");
  for (const auto& row : tpuctl::cli::command_table()) {
    if (row.hidden) {
      continue;
    }
    CAPTURE(row.name);
    auto r = run_tpuctl({row.name, "--help"});
    CHECK(r.exit_code == 0);
    CHECK(check_golden(std::string("help/") + row.name + ".txt", r.out) == "");
  }
}

TEST_CASE("cli: version reports version, commit, build type and compiler in json and yaml") {
  auto r = run_tpuctl({"version", "--format", "json"});
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["version"].is_string());
  CHECK(j["git_commit"].is_string());
  CHECK(!j["build_type"].get<std::string>().empty());
  CHECK(j["compiler"].get<std::string>().find("GNU") != std::string::npos);

  auto y = run_tpuctl({"--format=yaml", "version"});
  REQUIRE(y.exit_code == 0);
  CHECK(y.out.find("build_type: ") != std::string::npos);
  CHECK(y.out.find("compiler: ") != std::string::npos);
}

TEST_CASE("cli: an unknown command is exit 2 with one error line and a suggestion") {
  auto r = run_tpuctl({"topolgy", "list"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("tpuctl: error: unknown command 'topolgy'", 0) == 0);
  CHECK(r.err.find("did you mean 'topology'?") != std::string::npos);
}

TEST_CASE("cli: an unknown flag is exit 2 and suggests the nearest flag") {
  auto r = run_tpuctl({"version", "--formt=json"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("unknown flag '--formt'") != std::string::npos);
  CHECK(r.err.find("did you mean '--format'?") != std::string::npos);
}

TEST_CASE("cli: every invalid global flag is reported, each on its own error line") {
  auto r = run_tpuctl({"version", "--format", "xml", "--verbosity", "loud"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "tpuctl: error: --format: 'xml' is not an output format (use table, json, "
                 "yaml, value(FIELD,...), table(FIELD,...), csv(FIELD,...) or none; dotenv for "
                 "tpuctl env, jsonl for qr list --watch)\n"
                 "tpuctl: error: --verbosity: 'loud' is not a level (use debug, info, warning, "
                 "error or none)\n");
}

TEST_CASE("cli: every group without its command prints its help and succeeds, as tpuctl does") {
  for (const auto& row : tpuctl::cli::command_table()) {
    CAPTURE(row.name);
    auto help = run_tpuctl({row.name, "--help"});
    auto bare = run_tpuctl({row.name});
    if (std::string(row.name) == "version" || std::string(row.name) == "controller") {
      continue; // commands of their own, not groups
    }
    if (bare.out.find("Subcommands:") == std::string::npos &&
        help.out.find("Subcommands:") == std::string::npos) {
      continue; // a leaf (ssh, scp, env): its missing argument is an error (below)
    }
    CHECK(bare.exit_code == 0);
    CHECK(bare.err.empty());
    CHECK(bare.out == help.out);
  }
  auto leaf = run_tpuctl({"env"});
  CHECK(leaf.exit_code == 2);
  CHECK(leaf.err == "tpuctl: error: missing TARGET ([USER@]TARGET: a queued resource (all its "
                    "nodes) or one node) (see 'tpuctl env --help')\n");
}

TEST_CASE("cli: --log-file receives the logs and a bad path is a clear error") {
  tpuctl::test::TempDir tmp;
  std::string log = (tmp.path() / "tpuctl.log").string();
  auto r = run_tpuctl({"version", "--verbosity=debug", "--log-file", log});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());

  auto bad = run_tpuctl({"version", "--log-file", "/nonexistent-dir/x/y.log"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--log-file: cannot open '/nonexistent-dir/x/y.log'") != std::string::npos);
}

TEST_CASE("cli: tpuctl with no arguments prints the help and succeeds") {
  auto r = run_tpuctl({});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("Usage: tpuctl") != std::string::npos);
}

TEST_SUITE_END();

TEST_CASE("cli: every list command takes --filter and --format value(...) (no jq needed)") {
  tpuctl::test::TempDir home;
  std::map<std::string, std::string> env{{"HOME", home.path().string()},
                                         {"XDG_STATE_HOME", (home.path() / "state").string()},
                                         {"XDG_CONFIG_HOME", (home.path() / "config").string()}};
  REQUIRE(run_tpuctl({"pool", "create", "team", "--generation", "v5e"}, env).exit_code == 0);
  REQUIRE(run_tpuctl({"pool", "add-hosts", "node[01-04]", "--label", "rack=r1"}, env).exit_code ==
          0);
  REQUIRE(run_tpuctl({"pool", "add-hosts", "node[05-08]", "--label", "rack=r2"}, env).exit_code ==
          0);
  // Each list command, with a field its rows have.
  const std::vector<std::pair<std::vector<std::string>, std::string>> lists = {
      {{"topology", "list"}, "type"}, {{"pool", "list"}, "name"},   {{"pool", "hosts"}, "name"},
      {{"qr", "list"}, "id"},         {{"tpu-vm", "list"}, "name"}, {{"cluster", "list"}, "name"},
      {{"workload", "list"}, "name"}};
  for (const auto& [words, field] : lists) {
    auto args = words;
    CAPTURE(tpuctl::util::join(args, " "));
    args.insert(args.end(), {"--format", "value(" + field + ")", "--filter", field + ":*"});
    auto ok = run_tpuctl(args, env);
    CHECK_MESSAGE(ok.exit_code == 0, ok.err);
    auto bad = words;
    bad.insert(bad.end(), {"--filter", "no_such_field=1"});
    auto refused = run_tpuctl(bad, env);
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find("no field 'no_such_field'") != std::string::npos);
  }
  auto r2 = run_tpuctl({"pool", "hosts", "--filter", "labels.rack=r2 AND name>node06", "--format",
                        "value(name,labels.rack)"},
                       env);
  CHECK(r2.out == "node07\tr2\nnode08\tr2\n");
  auto v5p = run_tpuctl({"topology", "list", "--filter", "generation=v5p chips<=16", "--format",
                         "value(type,hosts)"});
  CHECK(v5p.out == "v5p-8\t1\nv5p-16\t2\nv5p-32\t4\n");
}
