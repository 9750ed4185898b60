// README.md runs. Every ```sh block of the README is executed, in order, the way a new user
// types it into one terminal after another in a checkout: each block by bash (-e -o pipefail:
// every command must succeed; a block that tests `$?` itself, as the CI block does, may), in one
// directory that holds the checkout's files (each top-level entry linked), with a HOME of its own
// (so the state store and config are the defaults under it), tpuctl first on PATH, and the
// frameworks' environment the README's set-up makes. Where the README shows output (`#> ` lines
// under a command), each shown line must be printed (on stdout or stderr, as a user sees it): in
// `#> [NODE/WORKER@HOST] text` the host is an example (any host matches) and "(and the same from
// workers A-B)" is checked for each; "…" stands for any text. Every fenced block is ```sh: output
// shown any other way would be text nobody checks. A line chaining commands with && or || is
// refused (bash -e does not stop at a failure before them).
//
// The text is changed by these rules only (names, addresses, ports; the test states them):
//   1. Login names: `ci@`, `ops@`, `"user": "ci"` and `ssh.user deploy` become the user running
//      the test (the only one the loopback sshd servers admit).
//   2. The lab's hosts: node01-node08 and bastion are loopback sshd servers this test starts (a
//      home each), reached by name through an ssh_config the test writes and names with
//      TPUCTL_SSH_CONFIG (HostName, Port, IdentityFile ~/.ssh/lab_ed25519, and the known_hosts
//      with their keys), as a user's ~/.ssh/config does; the bastion's port 22 becomes its port.
//   3. Addresses: `pool local-up` gets `--address-base` of a free loopback block and
//      scripts/demo.sh its TPUCTL_DEMO_NET, so the test runs beside other tests; etcd1-3:2379
//      become a real three-member etcd cluster's endpoints. The demo runs the tpuctl under test
//      (TPUCTL_DEMO_BIN) instead of building one: a build would pull the binary from under the
//      tests running beside it, and building is what the suite's own build did (rule 7).
//   4. Directories outside the test's (`/data/`, `/mnt/shared/`) move under it.
//   5. Inputs: GITHUB_RUN_ID and CI_JOB_ID are set; the files the commands read from the current
//      directory (train.py, run.sh, serve.sh, setup.sh, run_tests.sh, model/, model.bin) and
//      ~/maxtext are made first, each a small program or file.
//   6. A command whose comment says "until Ctrl-C" gets SIGINT 3 s after it starts and must end
//      with 0 or 130 (the README's statuses for a tunnel or a watch stopped so); one whose
//      comment starts "exit N" must exit N.
//   7. Not run, because they build tpuctl and run the test suite this test belongs to (CI runs
//      them: .ci/run): lines running scripts/test.sh, cmake, ctest, bench/*.sh and
//      TPUCTL_FUZZ_RUNS=...; the scripts they name must exist and be executable.
// The test fails, never skips, when something it needs (sshd, etcd, the frameworks) is missing.
// Whatever it started is stopped by pid at the end, also when a block failed; a process left
// running by the README's commands fails the test.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <doctest/doctest.h>

#include "remote/local_sshd.hpp"
#include "tests/support/etcd_fixture.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/jax_env.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "tests/support/machine.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
namespace fs = std::filesystem;

namespace {

struct Block {
  int fence = 0; // the README line of the opening ```
  std::string lang;
  std::vector<std::string> lines;
};

std::vector<Block> readme_blocks(const std::string& text) {
  std::vector<Block> out;
  std::optional<Block> open;
  int n = 0;
  for (const auto& line : util::split(text, '\n')) {
    ++n;
    if (util::starts_with(line, "```")) {
      if (open) {
        out.push_back(std::move(*open));
        open.reset();
      } else {
        open = Block{n, line.substr(3), {}};
      }
    } else if (open) {
      open->lines.push_back(line);
    }
  }
  return out;
}

// A README line the rules leave unrun (rule 7): the program it names, else "".
std::string unrun_program(const std::string& line) {
  static const std::regex k_unrun(
      R"(^(TPUCTL_FUZZ_RUNS=\S+\s+)?(scripts/test\.sh|bench/\S+\.sh|cmake|ctest)(\s|$))");
  std::smatch m;
  return std::regex_search(line, m, k_unrun) ? m[2].str() : std::string();
}

// Rules 1-4 and 6 applied to one line.
struct Rules {
  std::string user, local_base, demo_net, etcd_endpoints, dir, binary;
  int lab_port = 0;

  std::string apply(std::string line) const {
    line = std::regex_replace(line, std::regex(R"(\b(ci|ops)@)"), user + "@");
    line = std::regex_replace(line, std::regex(R"("user": "ci")"), "\"user\": \"" + user + "\"");
    line = std::regex_replace(line, std::regex(R"(ssh\.user deploy\b)"), "ssh.user " + user);
    line = std::regex_replace(line, std::regex(R"(\bbastion:22\b)"),
                              "bastion:" + std::to_string(lab_port));
    line = std::regex_replace(line, std::regex(R"(pool local-up\b)"),
                              "pool local-up --address-base " + local_base);
    line = std::regex_replace(line, std::regex(R"(^scripts/demo\.sh\b)"),
                              "TPUCTL_DEMO_NET=" + demo_net + " TPUCTL_DEMO_BIN=" + binary +
                                  " scripts/demo.sh");
    line = std::regex_replace(line, std::regex(R"(\betcd1:2379,etcd2:2379,etcd3:2379\b)"),
                              etcd_endpoints);
    line = std::regex_replace(line, std::regex(R"((^|\s)/data/)"), "$1" + dir + "/data/");
    line = std::regex_replace(line, std::regex(R"((^|\s)/mnt/shared/)"), "$1" + dir + "/shared/");
    static const std::regex k_exit(R"(\s#\s+exit ([0-9]+)\b)");
    std::smatch m;
    if (line.find("until Ctrl-C") != std::string::npos && util::starts_with(line, "tpuctl ")) {
      line = "__until_ctrl_c " + line;
    } else if (util::starts_with(line, "tpuctl ") && std::regex_search(line, m, k_exit)) {
      line = "__expect_exit " + m[1].str() + " " + line; // the status its comment gives
    }
    return line;
  }
};

// One shown output line, `#> text` under a command: "[NODE/WORKER@HOST] text" (the host an
// example, "(and the same from workers A-B)" checked for each) or any other line; "…" in it
// stands for any text.
struct Shown {
  int line = 0;
  std::string node, text;
  std::vector<int> workers; // empty: not a worker's line
};

std::optional<Shown> shown_output(const std::string& line, int readme_line) {
  static const std::regex k_worker(
      R"(^#> \[([A-Za-z0-9._-]+)/([0-9]+)@[^\]]+\] (.*?)(\s{2,}\(and the same from workers ([0-9]+)-([0-9]+)\))?\s*$)");
  if (!util::starts_with(line, "#> ")) {
    return std::nullopt;
  }
  std::smatch m;
  if (!std::regex_match(line, m, k_worker)) {
    return Shown{readme_line, "", std::string(util::trim(line.substr(3))), {}};
  }
  Shown s{readme_line, m[1].str(), m[3].str(), {std::stoi(m[2].str())}};
  if (m[4].matched) {
    for (int w = std::stoi(m[5].str()); w <= std::stoi(m[6].str()); ++w) {
      s.workers.push_back(w);
    }
  }
  return s;
}

// `text` matches `pattern` whole ("…" any text), or, with `anywhere`, somewhere in it.
bool matches(const std::string& text, const std::string& pattern, bool anywhere) {
  static const std::string k_any = "…";
  std::vector<std::string> parts;
  for (size_t from = 0;;) {
    size_t at = pattern.find(k_any, from);
    parts.push_back(pattern.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) {
      break;
    }
    from = at + k_any.size();
  }
  size_t pos = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool first = i == 0, last = i + 1 == parts.size();
    if (first && !anywhere) {
      if (text.compare(0, parts[i].size(), parts[i]) != 0) {
        return false;
      }
      pos = parts[i].size();
      continue;
    }
    if (last && !anywhere) {
      return text.size() >= pos + parts[i].size() &&
             text.compare(text.size() - parts[i].size(), parts[i].size(), parts[i]) == 0;
    }
    size_t at = text.find(parts[i], pos);
    if (at == std::string::npos) {
      return false;
    }
    pos = at + parts[i].size();
  }
  return true;
}

bool printed(const std::string& out, const Shown& s, int worker) {
  for (const auto& line : util::split(out, '\n')) {
    if (worker < 0) {
      if (matches(line, s.text, true)) {
        return true;
      }
      continue;
    }
    const std::string prefix = "[" + s.node + "/" + std::to_string(worker) + "@";
    const size_t close = line.find("] ");
    if (util::starts_with(line, prefix) && close != std::string::npos &&
        matches(line.substr(close + 2), s.text, false)) {
      return true;
    }
  }
  return false;
}

void write(const fs::path& p, const std::string& text, bool executable = false) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  if (executable) {
    fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  }
}

// Rule 5: the inputs the README's commands read.
void make_inputs(const fs::path& work, const fs::path& home) {
  write(work / "train.py", "import os\nprint('training on worker', os.environ['TPU_WORKER_ID'])\n");
  write(work / "run.sh", "#!/bin/sh\necho \"run on worker $TPU_WORKER_ID of $WORLD_SIZE\"\n", true);
  write(work / "serve.sh", "#!/bin/sh\necho serving\n", true);
  write(work / "setup.sh", "#!/bin/sh\necho set up\n", true);
  write(work / "run_tests.sh", "#!/bin/sh\necho \"tests passed on worker $TPU_WORKER_ID\"\n",
        true);
  write(work / "model" / "weights.bin", std::string(4096, 'w'));
  write(work / "model" / "config.json", "{\"layers\": 2}\n");
  write(work / "model.bin", std::string(1 << 16, 'm'));
  write(home / "maxtext" / "train.py", "print('maxtext')\n");
}

// The lab (rule 2): node01-node08 and a bastion, loopback sshd servers with homes of their own.
struct Lab {
  remote::LocalSshdPool pool;
  std::string config; // the ssh_config naming them

  Lab(const fs::path& dir, const fs::path& home, const std::string& marker) {
    const std::string base = test::free_address_base("127.191.", 0, 250, 9);
    const std::string net = base.substr(0, base.rfind('.') + 1);
    remote::LocalSshdOptions o;
    o.root = dir / "lab";
    o.own_home = true;
    o.session_env = {{"SHLVL", "1"}, {"TPUCTL_README_LAB", marker}};
    for (int i = 1; i <= 8; ++i) {
      o.hosts.push_back({"node0" + std::to_string(i), net + std::to_string(1 + i), 2222});
    }
    o.hosts.push_back({"bastion", net + "10", 2222});
    auto made = remote::create_local_sshd_pool(o);
    REQUIRE_MESSAGE(made, (made ? "" : made.error().message));
    pool = std::move(*made);
    auto started = remote::start_local_sshd_pool(pool);
    REQUIRE_MESSAGE(started, (started ? "" : started.error().message));
    fs::create_directories(home / ".ssh");
    fs::copy_file(pool.client_key, home / ".ssh" / "lab_ed25519");
    fs::permissions(home / ".ssh" / "lab_ed25519", fs::perms::owner_read | fs::perms::owner_write);
    std::string text;
    for (const auto& h : pool.hosts) {
      text += "Host " + h.name + "\n  HostName " + h.address + "\n  Port " +
              std::to_string(h.port) + "\n";
    }
    text += "Host *\n  IdentityFile " + (home / ".ssh" / "lab_ed25519").string() +
            "\n  UserKnownHostsFile " + pool.known_hosts.string() + "\n";
    config = (dir / "ssh_config").string();
    write(config, text);
  }
  ~Lab() { (void)remote::stop_local_sshd_pool(pool); }
};

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("README: every shell block runs, in order, on a local pool, and prints what it shows") {
  const fs::path src = test::source_dir();
  const auto blocks = readme_blocks(test::read_file(src / "README.md"));
  REQUIRE(blocks.size() > 20);
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  const fs::path work = dir / "work", home = dir / "home";
  fs::create_directories(work);
  fs::create_directories(home);
  for (const auto& entry : fs::directory_iterator(src)) {
    const std::string name = entry.path().filename().string();
    if (name != ".git" && !util::starts_with(name, "build")) {
      fs::create_directory_symlink(entry.path(), work / name);
    }
  }
  make_inputs(work, home);

  test::EtcdCluster etcd(3);
  std::string endpoints;
  for (const auto& e : etcd.endpoints()) {
    endpoints += (endpoints.empty() ? "" : ",") + e.substr(e.find("//") + 2);
  }
  Lab lab(dir, home, dir.string());
  Rules rules;
  rules.user = lab.pool.user;
  rules.local_base = test::free_address_base("127.190.", 0, 250, 16);
  const std::string demo_base = test::free_address_base("127.192.", 0, 250, 8);
  rules.demo_net = demo_base.substr(0, demo_base.rfind('.'));
  rules.etcd_endpoints = endpoints;
  rules.dir = dir.string();
  rules.lab_port = 2222;
  rules.binary = test::tpuctl_binary();
  fs::create_directories(dir / "data");
  fs::create_directories(dir / "shared");

  util::ProcessOptions o;
  o.cwd = work.string();
  o.timeout = std::chrono::minutes(8); // per block; the slowest (JAX) takes about a minute
  o.env_set = {{"HOME", home.string()},
               {"PATH", fs::path(test::tpuctl_binary()).parent_path().string() + ":" +
                            (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin")},
               {"TPUCTL_SSH_CONFIG", lab.config},
               {"GITHUB_RUN_ID", "4242"},
               {"CI_JOB_ID", "job-4242"},
               {"LANG", "C.UTF-8"}};
  o.env_unset = {"TPUCTL_STATE", "TPUCTL_POOL", "XDG_STATE_HOME", "XDG_CONFIG_HOME",
                 "CLOUDSDK_COMPUTE_ZONE", "TPUCTL_PYTHON_ENV", "TERM"};
  // Whatever happens to the blocks, the local pool the README brings up is brought down and
  // what its commands started is stopped (by pid), the lab's servers first.
  struct Cleanup {
    const util::ProcessOptions& env;
    Lab& lab;
    fs::path dir;
    ~Cleanup() {
      util::ProcessOptions down = env;
      down.timeout = std::chrono::minutes(2);
      (void)util::run_process({test::tpuctl_binary(), "pool", "local-down", "--pool", "local"},
                              down);
      (void)remote::stop_local_sshd_pool(lab.pool);
      (void)test::kill_leftovers(dir.string());
    }
  } cleanup{o, lab, dir};
  const std::string header = "set -eE -o pipefail\n"
                             "__until_ctrl_c() {\n"
                             "  set -m  # its own process group, SIGINT not ignored: a foreground job\n"
                             "  \"$@\" & local pid=$! rc=0\n"
                             "  set +m\n"
                             "  sleep 3; kill -INT -- -\"$pid\" 2>/dev/null || true  # Ctrl-C\n"
                             "  wait \"$pid\" || rc=$?\n"
                             "  if [[ $rc != 0 && $rc != 130 ]]; then\n"
                             "    echo \"exit $rc after Ctrl-C: $*\" >&2; return 1\n"
                             "  fi\n"
                             "}\n"
                             "__expect_exit() {\n"
                             "  local want=$1 rc=0; shift\n"
                             "  \"$@\" || rc=$?\n"
                             "  if [[ $rc != \"$want\" ]]; then\n"
                             "    echo \"exit $rc where the README says $want: $*\" >&2; return 1\n"
                             "  fi\n"
                             "}\n";
  const int header_lines = static_cast<int>(util::split(header, '\n').size()) - 1;

  int ran = 0;
  std::set<std::string> unrun;
  for (const auto& b : blocks) {
    // Output is shown as `#> ` lines under its command, where it is compared: a block of any
    // other kind would be text nobody checks.
    REQUIRE_MESSAGE(b.lang == "sh", "README.md:" << b.fence << ": a ```" << b.lang
                                                 << " block: show commands in ```sh blocks and "
                                                    "their output as #> lines under them");
    std::string script = header;
    // LINENO of the script's line k (from 1) is README line fence + (k - header_lines - 1) + 1.
    script += "trap 'echo \"README.md:$((" + std::to_string(b.fence - header_lines - 1) +
              " + LINENO)): exit $?: $BASH_COMMAND\" >&2' ERR\n";
    std::vector<Shown> shown;
    bool heredoc = false;
    for (size_t i = 0; i < b.lines.size(); ++i) {
      const std::string& line = b.lines[i];
      const int readme_line = b.fence + 1 + static_cast<int>(i);
      if (auto s = shown_output(line, readme_line)) {
        shown.push_back(*s);
      }
      if (heredoc) {
        heredoc = line != "EOF";
        script += rules.apply(line) + "\n";
        continue;
      }
      heredoc = line.find("<<'EOF'") != std::string::npos;
      if (const std::string program = unrun_program(line); !program.empty()) {
        unrun.insert(program);
        script += ": not run by this test: it builds tpuctl or runs its tests\n";
        continue;
      }
      // bash -e does not stop at a failure before && or ||: a README line that chains commands
      // would pass here with its first command failing. `|| exit $?` passes the failure on.
      std::string code = line.substr(0, line.find(" #"));
      code = std::regex_replace(code, std::regex(R"(\|\| exit \$\?)"), "");
      CHECK_MESSAGE(code.find("&&") == std::string::npos, "README.md:" << readme_line
                        << ": `a && b` hides a failure of `a`: one command per line");
      CHECK_MESSAGE(code.find("||") == std::string::npos, "README.md:" << readme_line
                        << ": `a || b` hides a failure of `a`: one command per line");
      script += rules.apply(line) + "\n";
    }
    const fs::path file = dir / ("block-" + std::to_string(b.fence) + ".sh");
    write(file, script);
    MESSAGE("README.md:" << b.fence << ": running the block");
    // The seeds' tutorial holds about 4 GiB in each of its 4 processes: one such program on
    // the machine at a time, across tests and copies of the suite (jax_env.hpp).
    std::optional<test::MemoryHeavy> one_at_a_time;
    if (script.find("parallel_tutorial.py") != std::string::npos) {
      one_at_a_time.emplace();
    }
    auto r = util::run_process({"bash", file.string()}, o);
    REQUIRE(r);
    INFO("README.md:" << b.fence << " (" << file.string() << ")\nstdout:\n"
                      << r->out.substr(r->out.size() > 6000 ? r->out.size() - 6000 : 0)
                      << "\nstderr:\n"
                      << r->err.substr(r->err.size() > 6000 ? r->err.size() - 6000 : 0));
    REQUIRE(r->exit_code == 0);
    // What a user sees: both streams (a worker's stderr is prefixed as its stdout is).
    const std::string seen = r->out + "\n" + r->err;
    for (const auto& s : shown) {
      if (s.workers.empty()) {
        CHECK_MESSAGE(printed(seen, s, -1), "README.md:" << s.line << ": no line matches '"
                                                        << s.text << "'");
      }
      for (int w : s.workers) {
        CHECK_MESSAGE(printed(seen, s, w), "README.md:" << s.line << ": worker " << w
                                                        << " did not print '" << s.text << "'");
      }
    }
    ++ran;
  }
  CHECK(ran >= 20);
  // Rule 7: what is not run names scripts that are there.
  for (const auto& program : unrun) {
    if (program == "cmake" || program == "ctest") {
      CHECK_MESSAGE(!util::find_program(program).empty(), program << " is not installed");
    } else {
      CHECK_MESSAGE(::access((src / program).c_str(), X_OK) == 0,
                    "README names " << program << ", which is not an executable in the checkout");
    }
  }
  CHECK(unrun.count("scripts/test.sh") == 1);

  // Everything the README's commands started has ended (local-down stopped the local pool); the
  // lab's servers are the test's and stop with it.
  (void)remote::stop_local_sshd_pool(lab.pool);
  const std::string left = test::kill_leftovers(dir.string());
  CHECK_MESSAGE(left.empty(), "processes left running by the README's commands:" << left);
}

TEST_SUITE_END();
