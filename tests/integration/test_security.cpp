// The claims of SECURITY.md through the real binary on local pools of real sshd servers (address
// block 127.0.170.x - 127.0.177.x, owned by this file), a real SQLite store and a scratch HOME:
// hostile names refused where they enter (exit 2, one line naming the value, the store
// unchanged), hostile values delivered byte-exact to every worker with nothing else run, 0700
// directories and 0600 files locally and on workers, no private key in any log at the highest
// verbosity, and a changed host key refused under every --strict-host-key-checking policy.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <sys/stat.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "tests/support/helpers.hpp"
#include "tests/support/qr_env.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using tpuctl::test::QrEnv;
using tpuctl::test::read_file;

namespace {

// Every row of every table of the scratch SQLite store as text: the same before and after a
// command exactly when that command stored nothing.
std::string store_dump(const QrEnv& env) {
  const fs::path db = env.dir.path() / "state" / "tpuctl" / "state.db";
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  auto rows = [&](const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* stmt = nullptr;
    const int prepared = sqlite3_prepare_v2(handle, sql.c_str(), -1, &stmt, nullptr);
    REQUIRE_MESSAGE(prepared == SQLITE_OK, (sql + ": " + sqlite3_errmsg(handle)));
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
        const auto* text = sqlite3_column_text(stmt, c);
        row += (text ? reinterpret_cast<const char*>(text) : "NULL") + std::string("|");
      }
      out.push_back(row);
    }
    sqlite3_finalize(stmt);
    return out;
  };
  std::string dump;
  for (const auto& table : rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")) {
    const std::string name = table.substr(0, table.size() - 1);
    dump += "== " + name + "\n";
    auto all = rows("SELECT * FROM \"" + name + "\"");
    std::sort(all.begin(), all.end());
    for (const auto& row : all) {
      dump += row + "\n";
    }
  }
  sqlite3_close(handle);
  CHECK(dump.find("== records") != std::string::npos); // the dump really read the store
  return dump;
}

// The names of the issue: shell syntax (its commands would create `canary`), quotes, a newline,
// unicode, a leading '-' and nothing at all.
std::vector<std::string> hostile_names(const fs::path& canary) {
  const std::string c = canary.string();
  return {"a;touch " + c,
          "$(touch " + c + ")",
          "`touch " + c + "`",
          "a'b",
          "a\"b",
          "a\nb",
          "\xc3\xa4",                 // ä
          "\xd0\xbf\xd1\x83\xd0\xbb", // пул
          "-rf",
          ""};
}

// A value that breaks out of every naive quoting (each escape would create `canary`), with a
// newline, a tab, unicode, a leading '-' and shell expansions that must stay text.
std::string hostile_value(const fs::path& canary) {
  const std::string c = canary.string();
  return "-rf $(touch " + c + ") `touch " + c + "`; touch " + c + " '; touch " + c +
         "; ' \"; touch " + c +
         "; \" a'b\"c \\ $HOME ${PATH} \xc3\xa4 \xd0\xbf\xd1\x83\xd0\xbb\n"
         "second line\ttab '\\'' end";
}

// The first line of hostile_value: what a label or metadata value may hold (no control
// characters, no ',' which separates k=v pairs).
std::string hostile_line(const fs::path& canary) {
  std::string v = hostile_value(canary);
  return v.substr(0, v.find('\n'));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& line : tpuctl::util::split(text, '\n')) {
    if (!line.empty()) {
      out.push_back(line);
    }
  }
  return out;
}

// "path mode" for every directory that is not 0700 and every file that is not 0600 under
// `root`; `executable` files may be 0700.
std::vector<std::string>
permission_offenders(const fs::path& root, const std::function<bool(const fs::path&)>& executable) {
  std::vector<std::string> out;
  auto check = [&](const fs::path& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    const unsigned mode = st.st_mode & 07777u;
    bool ok =
        S_ISDIR(st.st_mode) ? mode == 0700u : mode == 0600u || (mode == 0700u && executable(p));
    if (!ok) {
      char text[8];
      std::snprintf(text, sizeof text, "%04o", mode);
      out.push_back(p.string() + " " + text);
    }
  };
  check(root);
  if (fs::is_directory(root)) {
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      check(e.path());
    }
  }
  return out;
}

std::vector<std::string> tpuctl_tree_offenders(const QrEnv& env) {
  // The agent binary a slice's workers run and a local pool's login wrapper (its servers'
  // ForceCommand) are the only executables tpuctl writes, owner-only as everything else.
  auto agent = [](const fs::path& p) {
    return (p.filename() == "tpuctl" && p.parent_path().parent_path().filename() == "agent") ||
           (p.filename() == "login" && p.parent_path().parent_path().filename() == "local-pools");
  };
  std::vector<std::string> out;
  for (const char* top : {"state", "config"}) {
    auto some = permission_offenders(env.dir.path() / top, agent);
    out.insert(out.end(), some.begin(), some.end());
  }
  return out;
}

// Replaces the known_hosts entry of `address` with another key; returns the new file content.
std::string change_host_key(const QrEnv& env, const std::string& address) {
  const fs::path key = env.dir.path() / "other_host_key";
  auto made = tpuctl::util::run_process(
      {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key.string()});
  REQUIRE(made);
  REQUIRE_MESSAGE(made->exit_code == 0, made->err);
  std::istringstream pub(read_file(key.string() + ".pub"));
  std::string type, blob;
  pub >> type >> blob;
  const fs::path known = env.pool_dir() / "known_hosts";
  const std::string pattern = "[" + address + "]:2222 ";
  std::string text;
  bool replaced = false;
  for (const auto& line : lines_of(read_file(known))) {
    if (tpuctl::util::starts_with(line, pattern)) {
      text += pattern + type + " " + blob + "\n";
      replaced = true;
    } else {
      text += line + "\n";
    }
  }
  REQUIRE(replaced);
  std::ofstream(known, std::ios::trunc) << text;
  return text;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("security: a hostile pool, host, user, label, queued resource, node, metadata, "
          "environment, cluster or workload name is refused with exit 2 naming it; nothing is "
          "stored or run") {
  QrEnv env(4, "127.0.170.2");
  const fs::path canary = env.dir.path() / "PWNED";
  // Each command with the hostile name in place of NAME.
  const std::vector<std::pair<std::string, std::vector<std::string>>> positions = {
      {"pool name", {"pool", "create", "NAME", "--generation", "v5e"}},
      {"host", {"pool", "add-hosts", "NAME"}},
      {"user", {"pool", "add-hosts", "NAME@10.9.9.9"}},
      {"host label key", {"pool", "add-hosts", "10.9.9.9", "--label", "NAME=v"}},
      {"queued resource id", {"qr", "create", "NAME", "--accelerator-type", "v5litepod-4"}},
      {"node id", {"qr", "create", "q1", "--node-id", "NAME", "--accelerator-type", "v5litepod-4"}},
      {"node prefix",
       {"qr", "create", "q1", "--node-count", "2", "--node-prefix", "NAME", "--accelerator-type",
        "v5litepod-4"}},
      {"queued resource label key",
       {"qr", "create", "q1", "--accelerator-type", "v5litepod-4", "--labels", "NAME=v"}},
      {"metadata key",
       {"qr", "create", "q1", "--accelerator-type", "v5litepod-4", "--metadata", "NAME=v"}},
      {"environment name",
       {"workload", "create", "--cluster", "demo", "--workload", "w", "--env", "NAME=v",
        "--command", "true"}},
      {"cluster name", {"cluster", "create", "--cluster", "NAME", "--tpu-type", "v5litepod-4"}},
      {"workload name",
       {"workload", "create", "--cluster", "demo", "--workload", "NAME", "--command", "true"}},
  };
  const std::string before = store_dump(env);
  for (const auto& [position, command] : positions) {
    for (const auto& name : hostile_names(canary)) {
      CAPTURE(position);
      CAPTURE(name);
      std::vector<std::string> args;
      for (const auto& word : command) {
        const auto at = word.find("NAME");
        args.push_back(at == std::string::npos ? word
                                               : word.substr(0, at) + name + word.substr(at + 4));
      }
      auto r = env.run(args);
      CHECK(r.exit_code == 2);
      const auto lines = lines_of(r.err);
      REQUIRE(lines.size() == 1);
      CHECK(tpuctl::util::starts_with(lines[0], "tpuctl: error: "));
      if (name.empty()) {
        const bool named = lines[0].find("''") != std::string::npos ||
                           lines[0].find("empty") != std::string::npos ||
                           lines[0].find("'=v'") != std::string::npos;
        CHECK_MESSAGE(named, lines[0]);
      } else {
        CHECK(lines[0].find(tpuctl::util::printable(name)) != std::string::npos);
      }
      CHECK(store_dump(env) == before);
    }
  }
  CHECK(env.run_json({"qr", "list"}).empty());
  CHECK(env.run_json({"pool", "list"}).size() == 1);
  CHECK_FALSE(fs::exists(canary));
}

TEST_CASE("security: hostile environment values, commands, labels, metadata and a startup "
          "script arrive byte-exact on every worker; only the user's command runs") {
  QrEnv env(8, "127.0.171.2");
  const fs::path canary = env.dir.path() / "PWNED";
  const fs::path out = env.dir.path() / "out";
  fs::create_directories(out);
  const std::string value = hostile_value(canary);
  const std::string line = hostile_line(canary);
  const std::string script = "cat > '" + (out / "startup.").string() +
                             "'\"$TPU_WORKER_ID\" <<'TPUCTL_END'\n" + value + "\nTPUCTL_END\n";
  std::ofstream(env.dir.path() / "startup.sh") << script;

  auto created = env.run({"qr", "create", "s1", "--accelerator-type", "v5litepod-16", "--labels",
                          "team=" + line, "--metadata", "note=" + line, "--metadata-from-file",
                          "startup-script=" + (env.dir.path() / "startup.sh").string()});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  auto qr = env.describe("s1");
  CHECK(qr["labels"]["team"] == line);
  CHECK(qr["metadata"]["note"] == line);
  CHECK(qr["metadata"]["startup-script"] == script);
  REQUIRE(qr["nodes"][0]["workers"].size() == 4);
  auto on_every_worker = [&](const std::string& prefix, const std::string& expected) {
    for (int w = 0; w < 4; ++w) {
      CAPTURE(prefix);
      CAPTURE(w);
      CHECK(read_file(out / (prefix + std::to_string(w))) == expected);
    }
  };
  on_every_worker("startup.", value + "\n");

  SUBCASE("tpuctl ssh: --env and --command, and a command given after '--'") {
    auto with_env =
        env.run({"ssh", "s1", "--worker=all", "--env", "V=" + value, "--command",
                 "printf %s \"$V\" > '" + (out / "env.").string() + "'\"$TPU_WORKER_ID\""});
    REQUIRE_MESSAGE(with_env.exit_code == 0, with_env.err);
    on_every_worker("env.", value);
    auto argv =
        env.run({"ssh", "s1", "--worker=all", "--", "sh", "-c",
                 "printf %s \"$1\" > \"$2.$TPU_WORKER_ID\"", "sh", value, (out / "argv").string()});
    REQUIRE_MESSAGE(argv.exit_code == 0, argv.err);
    on_every_worker("argv.", value);
    // A command that starts with '-' is a command (not found), never an option of the shell.
    auto dash = env.run({"ssh", "s1", "--command=-rf"});
    CHECK(dash.exit_code == 127);
    const std::string said = dash.out + dash.err;
    CHECK_MESSAGE(said.find("-rf: ") != std::string::npos, said);
    CHECK_MESSAGE(said.find("not found") != std::string::npos, said);
    // Right after '--' it is an ssh option, as gcloud passes those words to ssh: refused in one
    // line before anything runs (only -L, -R, -N and -4 are taken).
    auto option = env.run({"ssh", "s1", "--", "-rf"});
    CHECK(option.exit_code == 2);
    CHECK_MESSAGE(option.err.find("ssh option '-r' is not supported") != std::string::npos,
                  option.err);
  }

  SUBCASE("tpuctl workload: --env and --command") {
    auto cluster =
        env.run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-16"});
    REQUIRE_MESSAGE(cluster.exit_code == 0, cluster.err);
    auto wl = env.run({"workload", "create", "--cluster", "demo", "--workload", "hostile", "--env",
                       "V=" + value, "--command",
                       "printf %s \"$V\" > '" + (out / "wl.").string() + "'\"$TPU_WORKER_ID\""});
    REQUIRE_MESSAGE(wl.exit_code == 0, wl.err);
    auto waited = env.run({"workload", "wait", "hostile", "--timeout", "60s"});
    REQUIRE_MESSAGE(waited.exit_code == 0, waited.err);
    on_every_worker("wl.", value);

    auto dash = env.run(
        {"workload", "create", "--cluster", "demo", "--workload", "dash", "--command", "-rf"});
    REQUIRE_MESSAGE(dash.exit_code == 0, dash.err);
    CHECK(env.run({"workload", "wait", "dash", "--timeout", "60s"}).exit_code == 1);
    auto logs = env.run({"workload", "logs", "dash", "--worker", "0"});
    CHECK_MESSAGE(logs.out.find("-rf: not found") != std::string::npos, logs.out);
    CHECK(env.run_json({"workload", "describe", "dash"})["workers"][0]["exit_code"] == 127);
  }
  CHECK_FALSE(fs::exists(canary));
}

TEST_CASE("security: every directory tpuctl creates, locally and on workers, is 0700 and every "
          "file 0600 (the agent 0700), through a create/delete cycle") {
  QrEnv env(8, "127.0.172.2");
  auto set = env.run({"config", "set", "ssh.batch_size", "16"});
  REQUIRE_MESSAGE(set.exit_code == 0, set.err);
  // A background driver (logs/driver.log) provisions this one.
  auto qr = env.run({"qr", "create", "p1", "--accelerator-type", "v5litepod-4", "--async"});
  REQUIRE_MESSAGE(qr.exit_code == 0, qr.err);
  auto active = env.run({"qr", "wait", "p1", "--timeout", "60s"});
  REQUIRE_MESSAGE(active.exit_code == 0, active.err);
  auto cluster = env.run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-16"});
  REQUIRE_MESSAGE(cluster.exit_code == 0, cluster.err);
  // A workload monitor (logs/workload-w.log) and a workload directory on every worker.
  auto wl = env.run(
      {"workload", "create", "--cluster", "demo", "--workload", "w", "--command", "echo hello"});
  REQUIRE_MESSAGE(wl.exit_code == 0, wl.err);
  REQUIRE(env.run({"workload", "wait", "w", "--timeout", "60s"}).exit_code == 0);
  const fs::path cli_log = env.dir.path() / "cli.log";
  auto logged = env.run({"--verbosity", "debug", "--log-file", cli_log.string(), "ssh", "p1",
                         "--worker=all", "--command", "true"});
  REQUIRE_MESSAGE(logged.exit_code == 0, logged.err);

  // What the cycle made: the store, the config, both logs, the pool's keys and a
  // workload directory with its files on a worker.
  const fs::path state = env.dir.path() / "state" / "tpuctl";
  for (const auto& p : {state / "state.db", env.dir.path() / "config" / "tpuctl" / "config.json",
                        state / "logs" / "driver.log", state / "logs" / "workload-w.log",
                        env.pool_dir() / "client_ed25519", cli_log}) {
    CHECK_MESSAGE(fs::exists(p), p.string());
  }
  size_t workload_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(env.pool_dir() / "hosts")) {
    workload_files += e.path().filename() == "status.json" ? 1 : 0;
  }
  CHECK(workload_files == 4);
  CHECK_MESSAGE(tpuctl_tree_offenders(env).empty(),
                tpuctl::util::join(tpuctl_tree_offenders(env), "; "));
  const auto log_offenders = permission_offenders(cli_log, [](const fs::path&) { return false; });
  CHECK_MESSAGE(log_offenders.empty(), tpuctl::util::join(log_offenders, "; "));

  REQUIRE(env.run({"workload", "delete", "w"}).exit_code == 0);
  REQUIRE(env.run({"cluster", "delete", "demo"}).exit_code == 0);
  REQUIRE(env.run({"qr", "delete", "p1", "--force"}).exit_code == 0);
  CHECK_MESSAGE(tpuctl_tree_offenders(env).empty(),
                tpuctl::util::join(tpuctl_tree_offenders(env), "; "));
}

TEST_CASE("security: no line of the pool's private key appears on stderr, in --log-file or in "
          "the state's logs at debug verbosity (ssh, scp, qr create, workload create)") {
  QrEnv env(8, "127.0.173.2");
  std::vector<std::string> key_lines;
  for (const auto& line : lines_of(read_file(env.pool_dir() / "client_ed25519"))) {
    if (!tpuctl::util::starts_with(line, "-----")) {
      key_lines.push_back(line);
    }
  }
  REQUIRE(key_lines.size() >= 3);
  const fs::path log_file = env.dir.path() / "debug.log";
  const fs::path payload = env.dir.path() / "payload.txt";
  std::ofstream(payload) << "data\n";
  std::string printed; // every stdout and stderr
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--verbosity", "debug"});
    auto to_stderr = env.run(args);
    REQUIRE_MESSAGE(to_stderr.exit_code == 0, to_stderr.err);
    printed += to_stderr.out + to_stderr.err;
  };
  run({"qr", "create", "k1", "--accelerator-type", "v5litepod-16"});
  run({"qr", "create", "k2", "--accelerator-type", "v5litepod-4", "--async"}); // a driver
  run({"ssh", "k1", "--worker=all", "--command", "echo hi"});
  run({"--log-file", log_file.string(), "ssh", "k1", "--worker=all", "--command", "echo hi"});
  run({"scp", payload.string(), "k1:" + (env.dir.path() / "copied.txt").string(), "--worker=all"});
  run({"--log-file", log_file.string(), "scp", payload.string(),
       "k1:" + (env.dir.path() / "copied2.txt").string(), "--worker=all"});
  REQUIRE(env.run({"qr", "wait", "k2", "--timeout", "60s"}).exit_code == 0);
  run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-4"});
  run({"workload", "create", "--cluster", "demo", "--workload", "w", "--command", "echo hi"});
  REQUIRE(env.run({"workload", "wait", "w", "--timeout", "60s"}).exit_code == 0);

  std::map<std::string, std::string> logs{{"stdout and stderr", printed},
                                          {log_file.string(), read_file(log_file)}};
  for (const auto& e : fs::directory_iterator(env.dir.path() / "state" / "tpuctl" / "logs")) {
    logs[e.path().string()] = read_file(e.path());
  }
  // The logs are really there, at debug level: this test reads what a leak would be in.
  CHECK(printed.find("tpuctl: debug: libssh:") != std::string::npos);
  CHECK(logs[log_file.string()].find(" debug ") != std::string::npos);
  CHECK(logs.count((env.dir.path() / "state" / "tpuctl" / "logs" / "driver.log").string()) == 1);
  CHECK(logs.count((env.dir.path() / "state" / "tpuctl" / "logs" / "workload-w.log").string()) ==
        1);
  for (const auto& [where, text] : logs) {
    CAPTURE(where);
    CHECK(text.find("PRIVATE KEY") == std::string::npos);
    for (const auto& line : key_lines) {
      CHECK(text.find(line) == std::string::npos);
    }
  }
}

TEST_CASE("security: a changed host key is refused by tpuctl ssh under every "
          "--strict-host-key-checking policy (exit 5); the command does not run there") {
  QrEnv env(4, "127.0.174.2");
  auto created = env.run({"qr", "create", "hk", "--accelerator-type", "v5litepod-16"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  const auto hosts = tpuctl::test::worker_hosts(env.describe("hk"));
  REQUIRE(hosts.size() == 4);
  const std::string known = change_host_key(env, hosts[1]);
  const fs::path ran = env.dir.path() / "ran.";
  for (const std::string policy : {"yes", "accept-new", "no"}) {
    CAPTURE(policy);
    for (int w = 0; w < 4; ++w) {
      fs::remove(ran.string() + std::to_string(w));
    }
    auto r = env.run({"ssh", "hk", "--worker=all", "--strict-host-key-checking", policy,
                      "--command", "touch '" + ran.string() + "'\"$TPU_WORKER_ID\""});
    CHECK(r.exit_code == 5);
    CHECK(r.err.find("host key for [" + hosts[1] + "]:2222 changed") != std::string::npos);
    for (const char* unchanged : {"0", "2", "3"}) { // the other workers ran it
      CHECK(fs::exists(ran.string() + unchanged));
    }
    CHECK_FALSE(fs::exists(ran.string() + "1"));
    auto pool_ssh = env.run({"pool", "ssh", "--hosts", hosts[1], "--strict-host-key-checking",
                             policy, "--command", "touch '" + ran.string() + "1'"});
    CHECK(pool_ssh.exit_code == 5);
    CHECK_FALSE(fs::exists(ran.string() + "1"));
    CHECK(read_file(env.pool_dir() / "known_hosts") == known); // never replaced
  }
}
