// Completion in real shells: Debian's bash with bash-completion, and zsh driven through zpty,
// typing partial commands with the scripts `tpuctl completion bash|zsh` print; the committed
// completions/ files are what the binary prints; fixed flag values are accepted by their flags.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <doctest/doctest.h>

#include "cli/completion.hpp"
#include "tests/support/helpers.hpp"
#include "topology/accelerator_type.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using tpuctl::test::run_tpuctl;
using tpuctl::test::TempDir;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

namespace {

// A scratch store with a pool and two queued resources (waiting: valid after an hour).
struct Store {
  TempDir dir;
  std::map<std::string, std::string> env;
  fs::path bin_dir;
  Store() {
    env["HOME"] = dir.path().string();
    env["XDG_STATE_HOME"] = (dir.path() / "state").string();
    env["XDG_CONFIG_HOME"] = (dir.path() / "config").string();
    bin_dir = fs::path(tpuctl::test::tpuctl_binary()).parent_path();
    env["PATH"] = bin_dir.string() + ":/usr/bin:/bin";
    for (auto args : std::vector<std::vector<std::string>>{
             {"pool", "create", "team", "--generation", "v5e"},
             {"pool", "add-hosts", "node[01-08]"},
             {"qr", "create", "alpha-1", "--accelerator-type", "v5litepod-16", "--async",
              "--valid-after-duration", "1h"},
             {"qr", "create", "beta-2", "--accelerator-type", "v5litepod-16", "--async",
              "--valid-after-duration", "1h"}}) {
      auto r = run_tpuctl(args, env);
      REQUIRE_MESSAGE(r.exit_code == 0, (tpuctl::util::join(args, " ") + ": " + r.err));
    }
  }
  fs::path script(const std::string& shell) const {
    auto r = run_tpuctl({"completion", shell}, env);
    REQUIRE(r.exit_code == 0);
    fs::path p = dir.path() / (shell == "zsh" ? "_tpuctl" : "tpuctl.bash");
    std::ofstream(p) << r.out;
    return p;
  }
};

// What bash's completion function offers for the command line `line` (cursor at the end).
std::vector<std::string> bash_complete(const Store& s, const std::string& line) {
  const std::string program = "source /usr/share/bash-completion/bash_completion\n"
                              "source " +
                              s.script("bash").string() +
                              "\n"
                              "COMP_LINE=\"$1\"; COMP_POINT=${#COMP_LINE}\n"
                              "read -r -a COMP_WORDS <<< \"$COMP_LINE\"\n"
                              "[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=('')\n"
                              "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n"
                              "_tpuctl\n"
                              "printf '%s\\n' \"${COMPREPLY[@]}\"\n";
  tpuctl::util::ProcessOptions o;
  o.env_set = s.env;
  auto r = tpuctl::util::run_process({"bash", "--norc", "-c", program, "bash", line}, o);
  REQUIRE(r);
  REQUIRE_MESSAGE(r->exit_code == 0, r->err);
  auto lines = tpuctl::util::split(std::string(tpuctl::util::trim(r->out)), '\n');
  return lines;
}

// Types `keys` into an interactive zsh (zpty) with the completion loaded; returns what the
// terminal showed once `expect` (a glob) appeared, or "" after 10 s.
std::string zsh_type(const Store& s, const std::string& keys, const std::string& expect) {
  const std::string program =
      "zmodload zsh/zpty\n"
      "zpty -b z 'zsh -f -i'\n"
      "zpty -w z 'PS1=\"> \"; unsetopt beep; fpath=(" +
      s.script("zsh").parent_path().string() +
      " $fpath); autoload -U compinit; compinit -u -D; zstyle \":completion:*\" list-prompt \"\"'\n"
      "zpty -w -n z \"$1\"\n"
      "out=''\n"
      "for i in {1..100}; do\n"
      "  while zpty -r -t z chunk; do out+=$chunk; done\n"
      "  [[ $out == $~2 ]] && break\n"
      "  sleep 0.1\n"
      "done\n"
      "zpty -d z\n"
      "print -r -- \"$out\"\n";
  tpuctl::util::ProcessOptions o;
  o.env_set = s.env;
  o.env_set["TERM"] = "dumb";
  o.timeout = std::chrono::seconds(60);
  auto r = tpuctl::util::run_process({"zsh", "-f", "-c", program, "zsh", keys, expect}, o);
  REQUIRE(r);
  return r->out;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

} // namespace

TEST_CASE("completion in bash (bash-completion): groups, live ids, flag values") {
  REQUIRE_MESSAGE(fs::exists("/usr/share/bash-completion/bash_completion"),
                  "bash-completion is not installed: run scripts/deps.sh");
  Store s;
  CHECK(bash_complete(s, "tpuctl qu") == std::vector<std::string>{"queued-resources"});
  auto ids = bash_complete(s, "tpuctl queued-resources describe ");
  CHECK(ids == std::vector<std::string>{"alpha-1", "beta-2"});
  CHECK(bash_complete(s, "tpuctl qr delete al") == std::vector<std::string>{"alpha-1"});
  auto formats = bash_complete(s, "tpuctl qr list --format=");
  CHECK(formats == std::vector<std::string>{"table", "json", "yaml", "none"});
  auto gens = bash_complete(s, "tpuctl pool create x --generation v");
  CHECK(has(gens, "v5e"));
  CHECK(has(gens, "v5p"));
  auto flags = bash_complete(s, "tpuctl workload create --fail-p");
  CHECK(flags == std::vector<std::string>{"--fail-policy"});
  CHECK(has(bash_complete(s, "tpuctl workload create --fail-policy "), "any"));
  CHECK(bash_complete(s, "tpuctl cluster create --on-preemption ") ==
        std::vector<std::string>{"suspend", "requeue"});
  CHECK(has(bash_complete(s, "tpuctl pool drain node0"), "node01"));
}

TEST_CASE("completion in bash: file names where a path goes, types, topologies, --worker and "
          "--node forms, --for conditions, config keys and values, no duplicates") {
  Store s;
  const fs::path dir = s.dir.path() / "files";
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "inventory.json") << "{}";
  std::ofstream(dir / "setup.sh") << "true\n";
  const std::string d = dir.string();
  CHECK(bash_complete(s, "tpuctl pool import " + d + "/inv") ==
        std::vector<std::string>{d + "/inventory.json"});
  CHECK(bash_complete(s, "tpuctl --log-file=" + d + "/se") ==
        std::vector<std::string>{d + "/setup.sh"});
  CHECK(bash_complete(s, "tpuctl pool ssh --ssh-config " + d + "/se") ==
        std::vector<std::string>{d + "/setup.sh"});
  CHECK(bash_complete(s, "tpuctl qr create x --metadata-from-file startup-script=" + d + "/se") ==
        std::vector<std::string>{d + "/setup.sh"});
  auto sources = bash_complete(s, "tpuctl scp " + d + "/s");
  CHECK(has(sources, d + "/setup.sh"));
  CHECK(has(sources, d + "/sub"));
  CHECK(has(bash_complete(s, "tpuctl scp setup.sh al"), "alpha-1:"));
  CHECK(has(bash_complete(s, "tpuctl workload create --script-dir " + d + "/s"), d + "/sub"));
  CHECK(has(bash_complete(s, "tpuctl topology describe v5p-12"), "v5p-128"));
  auto topologies = bash_complete(s, "tpuctl qr create x --type v5p --topology 4x4");
  CHECK(has(topologies, "4x4x4"));
  CHECK(has(bash_complete(s, "tpuctl qr create x --type v5l"), "v5litepod"));
  CHECK(bash_complete(s, "tpuctl ssh alpha-1 --node ") ==
        std::vector<std::string>{"0", "alpha-1", "all"});
  CHECK(bash_complete(s, "tpuctl ssh alpha-1 --worker ") == std::vector<std::string>{"all"});
  auto conditions = bash_complete(s, "tpuctl qr wait alpha-1 --for=");
  CHECK(has(conditions, "delete"));
  CHECK(has(conditions, "state=ACTIVE"));
  CHECK(has(bash_complete(s, "tpuctl config set "), "ssh.strict_host_key_checking"));
  CHECK(has(bash_complete(s, "tpuctl config get ssh."), "ssh.batch_size"));
  CHECK(has(bash_complete(s, "tpuctl config set format "), "yaml"));
  CHECK(has(bash_complete(s, "tpuctl config set pool "), "team"));
  auto flags = bash_complete(s, "tpuctl qr list --");
  CHECK(std::set<std::string>(flags.begin(), flags.end()).size() == flags.size());
  // A flag named for a file takes one, whatever its value is called.
  CHECK(bash_complete(s, "tpuctl pool add-hosts h1 --identity-file " + d + "/se") ==
        std::vector<std::string>{d + "/setup.sh"});
  CHECK(bash_complete(s, "tpuctl config set ssh.identity_file " + d + "/se") ==
        std::vector<std::string>{d + "/setup.sh"});
  // A tpu-vm NODE is a node: a queued resource of several nodes is not offered, its nodes are.
  REQUIRE(run_tpuctl({"qr", "create", "multi", "--accelerator-type", "v5litepod-4", "--node-count",
                      "2", "--async", "--valid-after-duration", "1h"},
                     s.env)
              .exit_code == 0);
  CHECK(bash_complete(s, "tpuctl tpu-vm describe ") ==
        std::vector<std::string>{"alpha-1", "beta-2", "multi-0", "multi-1"});
  CHECK(has(bash_complete(s, "tpuctl ssh m"), "multi"));
}

TEST_CASE("completion in zsh (zpty): typing tpuctl qu<TAB>, describe <TAB>, --format=<TAB>") {
  REQUIRE_MESSAGE(!tpuctl::util::find_program("zsh").empty(),
                  "zsh is not installed: run scripts/deps.sh");
  Store s;
  CHECK(zsh_type(s, "tpuctl qu\t", "*queued-resources*").find("tpuctl queued-resources") !=
        std::string::npos);
  auto listed = zsh_type(s, "tpuctl queued-resources describe \t", "*alpha-1*beta-2*");
  CHECK(listed.find("alpha-1") != std::string::npos);
  CHECK(listed.find("beta-2") != std::string::npos);
  auto formats = zsh_type(s, "tpuctl qr list --format=\t", "*json*table*yaml*");
  CHECK(formats.find("yaml") != std::string::npos);
  CHECK(formats.find("json") != std::string::npos);
  // File names where a path goes, and the conditions of qr wait.
  const fs::path dir = s.dir.path() / "zfiles";
  fs::create_directories(dir);
  std::ofstream(dir / "inventory.json") << "{}";
  auto file = zsh_type(s, "tpuctl pool import " + dir.string() + "/inv\t", "*inventory.json*");
  CHECK(file.find(dir.string() + "/inventory.json") != std::string::npos);
  auto conditions = zsh_type(s, "tpuctl qr wait alpha-1 --for=\t", "*delete*state=ACTIVE*");
  CHECK(conditions.find("state=ACTIVE") != std::string::npos);
  auto key = zsh_type(s, "tpuctl pool add-hosts h1 --identity-file " + dir.string() + "/inv\t",
                      "*inventory.json*");
  CHECK(key.find("inventory.json") != std::string::npos); // a long line scrolls: the name only
}

TEST_CASE("completion: completions/ holds what `tpuctl completion bash|zsh` prints") {
  const fs::path dir = fs::path(tpuctl::test::source_dir()) / "completions";
  CHECK_MESSAGE(
      tpuctl::test::read_file(dir / "tpuctl.bash") == run_tpuctl({"completion", "bash"}).out,
      "completions/tpuctl.bash is stale: tpuctl completion bash > completions/tpuctl.bash");
  CHECK_MESSAGE(tpuctl::test::read_file(dir / "_tpuctl") == run_tpuctl({"completion", "zsh"}).out,
                "completions/_tpuctl is stale: tpuctl completion zsh > completions/_tpuctl");
}

TEST_CASE("completion: every fixed value offered for a flag is accepted by that flag") {
  for (const auto& t : tpuctl::cli::fixed_values("accelerator-type")) {
    CAPTURE(t);
    CHECK(tpuctl::topology::parse_accelerator_type(t));
  }
  for (const auto& f : tpuctl::cli::fixed_values("format")) {
    CHECK(run_tpuctl({"topology", "list", "--format", f}).exit_code == 0);
  }
  for (const auto& g : tpuctl::cli::fixed_values("generation")) {
    CHECK(run_tpuctl({"topology", "list", "--generation", g}).exit_code == 0);
  }
  for (const auto& d : tpuctl::cli::fixed_values("dataflow")) {
    CHECK(run_tpuctl({"kernel", "simulate", "--m", "8", "--n", "8", "--k", "8", "--array", "4x4",
                      "--dataflow", d})
              .exit_code == 0);
  }
  for (const auto& v : tpuctl::cli::fixed_values("verbosity")) {
    CHECK(run_tpuctl({"topology", "list", "--verbosity", v}).exit_code == 0);
  }
  CHECK(tpuctl::cli::fixed_values("command").empty()); // free text offers nothing
}
