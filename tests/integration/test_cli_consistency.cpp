// One consistent CLI, through the real binary and without any host: every mistake is one
// `tpuctl: error:` line with a suggestion, in every group; every list's columns are fields that
// --filter, --sort-by and value(...) take, with single-token headers; one json schema (times,
// counts, errors); values are checked before anything is stored.
#include <csignal>
#include <fstream>
#include <set>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/reference_text.hpp"
#include "tests/support/background.hpp"
#include "tests/support/helpers.hpp"
#include "util/strings.hpp"

using nlohmann::json;
using tpuctl::test::run_tpuctl;
using tpuctl::util::split;

namespace {

// A scratch store: pool `team` of 8 unreachable v5e hosts, all drained, so requests wait.
struct Offline {
  tpuctl::test::TempDir dir;
  std::map<std::string, std::string> env;
  Offline() {
    env["HOME"] = dir.path().string();
    env["XDG_STATE_HOME"] = (dir.path() / "state").string();
    env["XDG_CONFIG_HOME"] = (dir.path() / "config").string();
    for (auto args : std::vector<std::vector<std::string>>{
             {"pool", "create", "team", "--generation", "v5e"},
             {"pool", "add-hosts", "node[01-08]", "--label", "rack=r1"},
             {"pool", "drain", "node[01-08]", "--reason", "test"}}) {
      auto r = run(args);
      REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    }
  }
  tpuctl::util::ProcessResult run(const std::vector<std::string>& args) const {
    return run_tpuctl(args, env);
  }
  json run_json(std::vector<std::string> args) const {
    args.insert(args.end(), {"--format", "json"});
    auto r = run(args);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out);
  }
};

// The lines of `text` (no empty last one).
std::vector<std::string> lines(const std::string& text) {
  auto out = split(text, '\n');
  if (!out.empty() && out.back().empty()) {
    out.pop_back();
  }
  return out;
}

// A usage mistake: exit 2, nothing on stdout, exactly one error line; returns it.
std::string one_error(const tpuctl::util::ProcessResult& r) {
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  auto l = lines(r.err);
  CHECK_MESSAGE(l.size() == 1, r.err);
  if (l.empty()) {
    return "";
  }
  CHECK(tpuctl::util::starts_with(l[0], "tpuctl: error: "));
  return l[0];
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string upper(std::string s) {
  for (auto& c : s) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return s;
}

// Every key anywhere in `j` (nested objects and arrays too).
void keys_of(const json& j, std::set<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.insert(it.key());
      keys_of(it.value(), out);
    }
  } else if (j.is_array()) {
    for (const auto& e : j) {
      keys_of(e, out);
    }
  }
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("consistency: a misspelt command or flag in every group is one line with a suggestion") {
  for (const auto& row : tpuctl::cli::command_table()) {
    if (row.hidden) {
      continue;
    }
    auto help = run_tpuctl({row.name, "--help"});
    // The group's first command, misspelt by doubling its last letter.
    const auto at = help.out.find("Subcommands:\n");
    if (at == std::string::npos) {
      continue; // a leaf command
    }
    std::string first(tpuctl::util::trim(lines(help.out.substr(at + 13)).at(0)));
    first = first.substr(0, first.find(' '));
    CAPTURE(row.name);
    CAPTURE(first);
    auto r = run_tpuctl({row.name, first + first.back(), "some-argument", "--flag"});
    const std::string line = one_error(r);
    CHECK(contains(line, "unknown command '" + first + first.back() + "'"));
    CHECK(contains(line, "did you mean '" + first + "'?"));
  }
  // A misspelt flag and its value, in any group: one line, the nearest flag.
  for (const auto& [args, nearest] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"qr", "list", "--fromat", "json"}, "--format"},
           {{"pool", "hosts", "--fitler", "state=free"}, "--filter"},
           {{"workload", "logs", "w", "--folow"}, "--follow"},
           {{"kernel", "simulate", "--arary", "8x8"}, "--array"},
           {{"topology", "describe", "v4-8", "--fromat=json"}, "--format"}}) {
    CAPTURE(tpuctl::util::join(args, " "));
    const std::string line = one_error(run_tpuctl(args));
    CHECK(contains(line, "did you mean '" + nearest + "'?"));
  }
  // Case is ignored and every generation's names are known.
  CHECK(contains(one_error(run_tpuctl({"QR", "list"})), "did you mean 'qr'?"));
  CHECK(run_tpuctl({"topology", "describe", "V5P-128"}).exit_code == 0);
  CHECK(contains(one_error(run_tpuctl({"topology", "describe", "v7x-128"})),
                 "did you mean 'tpu7x-128'?"));
  CHECK(contains(one_error(run_tpuctl({"topology", "describe", "trillium-256"})),
                 "did you mean 'v6e-256'?"));
}

TEST_CASE("consistency: no library text: bad numbers, missing values, missing arguments") {
  const std::string bad_count = one_error(run_tpuctl({"pool", "local-up", "--hosts", "abc"}));
  CHECK(contains(bad_count, "--hosts: 'abc' is not a count from 1 to 4096"));
  // An int flag without a validator of its own: CLI11's conversion, in tpuctl's words.
  const std::string bad_number =
      one_error(run_tpuctl({"kernel", "run", "--m", "abc", "--n", "8", "--k", "8"}));
  CHECK(contains(bad_number, "'abc' is not a valid value for --m (M: rows of A and C"));
  const std::string no_value = one_error(run_tpuctl({"qr", "list", "--format"}));
  CHECK(contains(no_value, "--format needs a value"));
  const std::string missing = one_error(run_tpuctl({"pool", "import"}));
  CHECK(contains(missing, "missing FILE"));
  const std::string required = one_error(run_tpuctl({"workload", "create", "--workload", "w"}));
  CHECK(contains(required, "--cluster is required"));
  for (const auto& l : {bad_count, bad_number, no_value, missing, required}) {
    CHECK_FALSE(contains(l, "Could not convert"));
    CHECK_FALSE(contains(l, "required FORMAT missing"));
    CHECK(contains(l, "--help')"));
  }
}

TEST_CASE("consistency: a flag given twice, a bad row limit or batch size, a port out of range, "
          "a misspelt agent command: one line each, in tpuctl's words") {
  const std::string twice =
      one_error(run_tpuctl({"topology", "list", "--format=json", "--format", "yaml"}));
  CHECK(contains(twice, "--format was given 2 times: give it once"));
  CHECK(contains(one_error(run_tpuctl({"topology", "list", "--limit", "0"})),
                 "--limit: '0' is not a count from 1 to 1000000000, or unlimited (see "));
  CHECK(run_tpuctl({"topology", "list", "--limit", "UNLIMITED"}).exit_code == 0);
  CHECK(contains(one_error(run_tpuctl({"pool", "ssh", "--batch-size", "-1", "--", "true"})),
                 "--batch-size: '-1' is not a count from 1 to 4096, or all (see "));
  const std::string port = one_error(run_tpuctl({"pool", "add-hosts", "h1", "--port", "0"}));
  CHECK(contains(port, "--port: '0' is not a port (1 to 65535)"));
  CHECK_FALSE(contains(port, "Value 0"));
  CHECK(contains(one_error(run_tpuctl({"agent", "prob"})), "did you mean 'probe'?"));
}

TEST_CASE("consistency: tpuctl help [COMMAND], tpuctl --version") {
  CHECK(run_tpuctl({"help"}).out == run_tpuctl({"--help"}).out);
  auto qr_create = run_tpuctl({"help", "qr", "create"});
  CHECK(qr_create.exit_code == 0);
  CHECK(qr_create.out == run_tpuctl({"queued-resources", "create", "--help"}).out);
  CHECK(contains(one_error(run_tpuctl({"help", "qr", "creat"})), "did you mean 'create'?"));
  // help after a group's words too (gcloud's `help` anywhere in the command), not after a
  // command's: there it is a value.
  CHECK(run_tpuctl({"qr", "help", "create"}).out == qr_create.out);
  CHECK(run_tpuctl({"help", "qr", "create", "--format", "json"}).out == qr_create.out);
  CHECK(run_tpuctl({"pool", "help"}).out == run_tpuctl({"pool", "--help"}).out);
  CHECK(contains(one_error(run_tpuctl({"qr", "help", "creat"})), "did you mean 'create'?"));
  CHECK(run_tpuctl({"qr", "describe", "help"}).exit_code == 4); // no request named help
  // A gcloud command with only `gcloud` replaced.
  CHECK(run_tpuctl({"alpha", "compute", "tpus", "queued-resources", "create", "--help"}).out ==
        qr_create.out);
  CHECK(run_tpuctl({"compute", "tpus", "tpu-vm", "list", "--help"}).out ==
        run_tpuctl({"tpu-vm", "list", "--help"}).out);
  auto version = run_tpuctl({"--version"});
  CHECK(version.exit_code == 0);
  CHECK(version.out == run_tpuctl({"version"}).out);
}

TEST_CASE("consistency: every list's columns are single-token fields that --filter, --sort-by "
          "and value() take") {
  Offline s;
  REQUIRE(s.run({"qr", "create", "q1", "--accelerator-type", "v5litepod-4", "--async", "-q"})
              .exit_code == 0);
  REQUIRE(s.run({"qr", "create", "q2", "--accelerator-type", "v5litepod-16", "--async", "-q",
                 "--labels", "team=ml"})
              .exit_code == 0);
  REQUIRE(s.run({"config", "set", "ssh.user", "deploy"}).exit_code == 0);
  const std::vector<std::vector<std::string>> lists = {
      {"qr", "list"},         {"tpu-vm", "list"},
      {"pool", "list"},       {"pool", "hosts"},
      {"cluster", "list"},    {"workload", "list"},
      {"topology", "list"},   {"accelerator-types", "list"},
      {"topologies", "list"}, {"locations", "list"},
      {"config", "list"}};
  for (const auto& words : lists) {
    CAPTURE(tpuctl::util::join(words, " "));
    auto table = s.run(words);
    REQUIRE_MESSAGE(table.exit_code == 0, table.err);
    const std::string header = lines(table.out).at(0);
    // Single tokens: splitting on any space gives the columns two spaces separate.
    auto tokens = split(header, ' ');
    tokens.erase(std::remove(tokens.begin(), tokens.end(), ""), tokens.end());
    for (const auto& h : tokens) {
      CAPTURE(h);
      CHECK(h == upper(h));
      std::string field = tpuctl::util::to_lower(h);
      auto value =
          s.run({words[0], words[1], "--format", "value(" + field + ")", "--sort-by", "~" + field});
      CHECK_MESSAGE(value.exit_code == 0, value.err);
      auto filtered = s.run({words[0], words[1], "--filter", field + ":*", "--limit", "1"});
      CHECK_MESSAGE(filtered.exit_code == 0, filtered.err);
    }
  }
  // qr list: the reason and node count are fields like any other.
  auto waiting =
      s.run({"qr", "list", "--filter", "reason:drained AND node_count=1", "--format", "value(id)"});
  CHECK_MESSAGE(waiting.exit_code == 0, waiting.err);
  CHECK(waiting.out == "q1\nq2\n");
  CHECK(s.run({"qr", "list", "--sort-by", "~id", "--limit", "1", "--format", "value(id)"}).out ==
        "q2\n");
  CHECK(s.run({"qr", "list", "--format", "csv[no-heading](id,accelerator_type)", "--filter",
               "labels.team=ml"})
            .out == "q2,v5litepod-16\n");
  auto projected = s.run({"qr", "list", "--format", "table(id,state)"});
  CHECK(lines(projected.out).at(0) == "ID  STATE");
  // An empty list still knows its fields.
  CHECK(s.run({"workload", "list", "--filter", "workers.state=RUNNING"}).exit_code == 0);
  CHECK(contains(one_error(s.run({"workload", "list", "--filter", "nope=1"})), "no field 'nope'"));
}

TEST_CASE("consistency: one json schema: times, counts, errors; value() checks fields on every "
          "output") {
  Offline s;
  REQUIRE(s.run({"qr", "create", "q1", "--accelerator-type", "v5litepod-16", "--async", "-q",
                 "--valid-until-duration", "1h"})
              .exit_code == 0);
  const json qr = s.run_json({"qr", "describe", "q1"});
  CHECK(qr["node_count"] == 1);
  REQUIRE(qr["nodes"].is_array());
  CHECK(qr["nodes"][0]["name"] == "q1");
  CHECK(qr["nodes"][0]["slice"] == 0);
  CHECK(qr["nodes"][0]["workers"].empty()); // not placed yet
  CHECK(qr["error"].is_null());
  CHECK(qr["active_since"].is_null());
  // RFC 3339 with milliseconds.
  const std::string created = qr["created_at"];
  CHECK(created.size() == std::string("2026-11-22T10:00:00.123Z").size());
  CHECK(created.back() == 'Z');
  CHECK(created[19] == '.');
  CHECK(s.run_json({"qr", "list"}).at(0) == qr);
  // No stored unix-millisecond timestamps anywhere; *_ms fields are durations only.
  std::set<std::string> keys;
  keys_of(qr, keys);
  keys_of(s.run_json({"pool", "describe"}), keys);
  for (const auto& k : keys) {
    if (k.size() > 3 && k.compare(k.size() - 3, 3, "_ms") == 0) {
      CHECK_MESSAGE(contains(k, "duration"), k);
    }
    CHECK(k != "node_ids");
    CHECK(k != "node_id");
    CHECK(k != "position");
  }
  // value(FIELD) of a field an object does not have is exit 2, as on lists.
  CHECK(contains(one_error(s.run({"qr", "describe", "q1", "--format", "value(nope)"})),
                 "no field 'nope'"));
  CHECK(contains(one_error(s.run({"pool", "describe", "--format", "value(nope)"})),
                 "no field 'nope'"));
  CHECK(s.run({"qr", "describe", "q1", "--format", "value(state.state)"}).out ==
        "WAITING_FOR_RESOURCES\n");
  // A default format must suit every command: a one-command format is refused.
  CHECK(contains(one_error(s.run({"config", "set", "format", "jsonl"})),
                 "'tpuctl queued-resources list' only"));
  CHECK(contains(one_error(s.run({"topology", "list", "--format", "dotenv"})), "tpuctl env"));
  CHECK(s.run({"config", "set", "format", "csv(id)"}).exit_code == 0);
  CHECK(s.run({"qr", "list"}).out == "id\nq1\n");
}

TEST_CASE("consistency: counts, durations, deadlines, sizes and request ids are checked before "
          "anything is stored") {
  Offline s;
  const std::vector<std::string> create{"qr",          "create", "x", "--accelerator-type",
                                        "v5litepod-4", "--async"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = create;
    args.insert(args.end(), extra.begin(), extra.end());
    return s.run(args);
  };
  CHECK(contains(one_error(with({"--node-count", "0"})), "--node-count: '0' is not a count"));
  // Every bad value at once, a line each.
  auto two = with({"--node-count", "0", "--max-run-duration", "0s"});
  CHECK(two.exit_code == 2);
  CHECK(lines(two.err).size() == 2);
  CHECK(contains(two.err, "--node-count: '0'"));
  CHECK(contains(two.err, "--max-run-duration: '0s'"));
  CHECK(contains(one_error(with({"--node-count", "-2"})), "--node-count"));
  CHECK(contains(one_error(with({"--valid-until-duration", "0s"})), "longer than 0"));
  CHECK(contains(one_error(with({"--max-run-duration", "0"})), "longer than 0"));
  CHECK(contains(one_error(with({"--valid-until-time", "2020-01-01T00:00:00Z"})), "has passed"));
  CHECK(contains(one_error(with({"--timeout", "soon"})), "--timeout: 'soon' is not a duration"));
  CHECK(contains(one_error(s.run({"cluster", "create", "--cluster", "c", "--tpu-type",
                                  "v5litepod-4", "--num-slices", "0"})),
                 "--num-slices: '0'"));
  CHECK(contains(one_error(s.run({"workload", "create", "--cluster", "c", "--workload", "w",
                                  "--command", "true", "--max-restarts", "-1"})),
                 "--max-restarts: '-1'"));
  std::string labels;
  for (int i = 0; i < 65; ++i) {
    labels += (i ? "," : "") + std::string("k") + std::to_string(i) + "=v";
  }
  CHECK(contains(one_error(with({"--labels", labels})), "at most 64"));
  const auto big = s.dir.path() / "big.sh";
  std::ofstream(big) << std::string(600 * 1024, '#');
  CHECK(contains(one_error(with({"--metadata-from-file", "startup-script=" + big.string()})),
                 "at most 524288"));
  CHECK(s.run_json({"qr", "list"}).empty()); // none of these stored anything
  // A host takes as many labels as a queued resource, from a flag or an inventory.
  std::vector<std::string> add{"pool", "add-hosts", "extra01"};
  for (int i = 0; i < 65; ++i) {
    add.insert(add.end(), {"--label", "k" + std::to_string(i) + "=v"});
  }
  CHECK(contains(one_error(s.run(add)), "65 labels: a host takes at most 64"));
  json inventory{{"hosts", json::array({{{"host", "extra02"}, {"labels", json::object()}}})}};
  for (int i = 0; i < 65; ++i) {
    inventory["hosts"][0]["labels"]["k" + std::to_string(i)] = "v";
  }
  const auto file = s.dir.path() / "inventory.json";
  std::ofstream(file) << inventory.dump();
  auto imported = s.run({"pool", "import", file.string()});
  CHECK(imported.exit_code == 2);
  CHECK_MESSAGE(contains(imported.err, "hosts[0].labels: 65 labels: a host takes at most 64"),
                imported.err);
  CHECK(s.run_json({"pool", "hosts"}).size() == 8);

  // A request id repeats the same request, or is refused.
  REQUIRE(with({"--request-id", "ci-1", "-q"}).exit_code == 0);
  CHECK(with({"--request-id", "ci-1", "-q"}).exit_code == 0);
  const std::string reused = one_error(s.run({"qr", "create", "x", "--accelerator-type",
                                              "v5litepod-16", "--async", "--request-id", "ci-1"}));
  CHECK(contains(reused, "request id 'ci-1'"));
  CHECK(contains(reused, "v5litepod-4"));
  CHECK(s.run_json({"qr", "list"}).size() == 1);

  // wait --for delete on a request that is gone succeeds; for a state it is not found.
  CHECK(s.run({"qr", "wait", "gone", "--for", "delete"}).exit_code == 0);
  CHECK(s.run({"qr", "wait", "gone", "--for", "state=ACTIVE"}).exit_code == 4);
  CHECK(contains(run_tpuctl({"qr", "wait", "--help"}).out, "0: no limit"));

  // A request whose valid-until passed cannot be reset (it would expire at once).
  REQUIRE(s.run({"qr", "create", "late", "--accelerator-type", "v5litepod-4", "--async", "-q",
                 "--valid-until-duration", "1s"})
              .exit_code == 0);
  auto failed = s.run({"qr", "wait", "late", "--for", "state=FAILED", "--timeout", "30s"});
  REQUIRE_MESSAGE(failed.exit_code == 0, failed.err);
  // The bare state, in any case, is the same condition; a word that is none is exit 2.
  CHECK(s.run({"qr", "wait", "late", "--for", "failed", "--timeout", "5s"}).exit_code == 0);
  CHECK(contains(one_error(s.run({"qr", "wait", "late", "--for", "sideways"})),
                 "is not a state (ACTIVE, SUSPENDED, FAILED"));
  CHECK(contains(one_error(s.run({"qr", "reset", "late"})), "valid-until time"));

  // A remote command longer than a worker's shell takes is refused before connecting.
  const std::string word(100 * 1024, 'x');
  auto long_cmd = s.run({"pool", "ssh", "--hosts", "node01", "--", "echo", word, word});
  CHECK(contains(one_error(long_cmd), "at most 131071"));
}

TEST_CASE("consistency: a tpu-vm NODE names one node: a queued resource of several nodes is "
          "refused by describe and delete alike") {
  Offline s;
  REQUIRE(s.run({"qr", "create", "ms", "--accelerator-type", "v5litepod-4", "--node-count", "2",
                 "--async", "-q"})
              .exit_code == 0);
  for (const auto& verb : {"describe", "delete"}) {
    CAPTURE(verb);
    CHECK(contains(one_error(s.run({"tpu-vm", verb, "ms"})),
                   "'ms' is a queued resource of 2 nodes (ms-0, ms-1), not a node"));
  }
  CHECK(s.run({"tpu-vm", "describe", "ms-1"}).exit_code == 4); // a node, not placed yet
  CHECK(s.run_json({"qr", "list"}).size() == 1);
}

TEST_CASE("consistency: SIGTERM ends a waiting command with 143 (SIGINT: 130)") {
  Offline s;
  REQUIRE(s.run({"qr", "create", "w", "--accelerator-type", "v5litepod-4", "--async", "-q"})
              .exit_code == 0);
  for (const auto& [sig, status] : {std::pair{SIGTERM, 143}, std::pair{SIGINT, 130}}) {
    CAPTURE(sig);
    std::vector<std::string> argv{tpuctl::test::tpuctl_binary(), "qr", "wait", "w"};
    tpuctl::test::Background wait(argv, s.env, {"TPUCTL_STATE", "TPUCTL_POOL"}, s.dir.path(),
                                  "wait" + std::to_string(sig));
    // Signal it once its handlers are installed (SigCgt lists SIGINT and SIGTERM).
    for (int i = 0; i < 600; ++i) {
      std::ifstream proc_status("/proc/" + std::to_string(wait.pid()) + "/status");
      std::string line;
      unsigned long long caught = 0;
      while (std::getline(proc_status, line)) {
        if (tpuctl::util::starts_with(line, "SigCgt:")) {
          caught = std::stoull(line.substr(7), nullptr, 16);
        }
      }
      if ((caught & (1ULL << (SIGTERM - 1))) != 0) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(wait.pid(), sig);
    auto code = wait.wait(std::chrono::seconds(60));
    REQUIRE(code);
    CHECK(*code == status);
    CHECK(contains(wait.err(), "interrupted while waiting for 'w'"));
  }
}

TEST_SUITE_END();

TEST_CASE("consistency: --help and man pages carry the exit statuses and the fields README "
          "documents") {
  const std::string readme =
      tpuctl::test::read_file(std::filesystem::path(tpuctl::test::source_dir()) / "README.md");
  const auto at = readme.find("### Output fields");
  REQUIRE(at != std::string::npos);
  const std::string documented = readme.substr(at, readme.find("\n### ", at + 1) - at);
  for (const auto& r : tpuctl::cli::record_fields()) {
    // Every name in the list the binary prints is in README's section too.
    std::string word;
    for (const char c : std::string(r.fields) + " ") {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
        word += c;
        continue;
      }
      if (!word.empty()) {
        CHECK_MESSAGE(contains(documented, word), r.kind << ": " << word);
      }
      word.clear();
    }
  }
  auto help = run_tpuctl({"--help"});
  for (const auto& row : tpuctl::cli::exit_status_rows()) {
    CHECK(contains(help.out, "  " + std::to_string(row.code) + " "));
    CHECK(contains(readme, "| " + std::to_string(row.code) + " |"));
  }
  CHECK_FALSE(contains(help.out, "README"));
  CHECK(contains(run_tpuctl({"qr", "list", "--help"}).out,
                 "Fields of each queued resource:\n  id, pool, uid, state"));
  CHECK(contains(run_tpuctl({"ssh", "--help"}).out, "node, slice, worker (null for pool ssh)"));
}
