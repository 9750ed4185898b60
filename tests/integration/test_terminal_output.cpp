// What tpuctl prints on a terminal and off it, through the real binary under a pseudo-terminal
// (util-linux `script`) on a local pool (address block 127.0.159.x, owned by this file): live
// per-worker progress rewritten in place on a tty, plain lines when piped, nothing with --quiet
// or a machine format; colour only on a tty and never with NO_COLOR; tables cut to the width.
#include <fstream>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"
#include "tests/support/qr_env.hpp"
#include "util/process.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

using tpuctl::test::QrEnv;

TEST_SUITE_BEGIN("integration");

namespace {

// Runs tpuctl ARGS inside a pseudo-terminal `cols` wide; returns what the terminal received.
std::string on_tty(const QrEnv& env, const std::vector<std::string>& args, int cols = 200,
                   std::map<std::string, std::string> extra = {}) {
  std::vector<std::string> argv{tpuctl::test::tpuctl_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string command =
      "stty cols " + std::to_string(cols) + "; " + tpuctl::util::shell_join(argv);
  tpuctl::util::ProcessOptions o;
  o.env_set = env.vars;
  o.env_set.insert(extra.begin(), extra.end());
  o.env_set["TERM"] = "xterm";
  o.env_unset = {"NO_COLOR"};
  if (extra.count("NO_COLOR")) {
    o.env_unset.clear();
  }
  auto r = tpuctl::util::run_process({"script", "-qec", command, "/dev/null"}, o);
  REQUIRE(r);
  return r->out;
}

std::string strip_ansi(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\033' && i + 1 < s.size() && s[i + 1] == '[') {
      i += 2;
      while (i < s.size() && !std::isalpha(static_cast<unsigned char>(s[i]))) {
        ++i;
      }
      continue;
    }
    out += s[i];
  }
  return out;
}

} // namespace

TEST_CASE("terminal: live progress on a tty, plain lines when piped, none when quiet or json") {
  QrEnv env(8, "127.0.159.2");
  auto tty = on_tty(env, {"qr", "create", "live", "--accelerator-type", "v5litepod-16"});
  CHECK(tty.find("\r\033[K") != std::string::npos);             // a status rewritten in place
  CHECK(strip_ansi(tty).find("push 4/4") != std::string::npos); // per-worker progress
  CHECK(strip_ansi(tty).find("preflight 4/4") != std::string::npos);

  auto piped = env.run({"qr", "create", "plain", "--accelerator-type", "v5litepod-16"});
  REQUIRE(piped.exit_code == 0);
  CHECK(piped.err.find('\r') == std::string::npos);
  CHECK(piped.err.find('\033') == std::string::npos);
  CHECK(piped.err.find("tpuctl: push 4/4 ") != std::string::npos);
  CHECK(piped.err.find("tpuctl: plain: ACTIVE") != std::string::npos);

  REQUIRE(env.run({"qr", "delete", "plain", "--force"}).exit_code == 0);
  auto json =
      env.run({"qr", "create", "quiet1", "--accelerator-type", "v5litepod-16", "--format", "json"});
  REQUIRE(json.exit_code == 0);
  CHECK(json.err.empty());
  REQUIRE(env.run({"qr", "delete", "quiet1", "--force", "--quiet"}).exit_code == 0);
  auto quiet = env.run({"qr", "create", "quiet2", "--accelerator-type", "v5litepod-16", "-q"});
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.err.empty());

  // Pushing files and starting a workload report per worker too.
  tpuctl::test::TempDir files;
  std::ofstream(files.path() / "data.txt") << "payload\n";
  auto copied = env.run({"scp", (files.path() / "data.txt").string(), "live:~/", "--worker=all"});
  REQUIRE_MESSAGE(copied.exit_code == 0, copied.err);
  CHECK(copied.err.find("tpuctl: copy data.txt 4/4 ") != std::string::npos);
  REQUIRE(env.run({"qr", "delete", "quiet2", "--force", "-q"}).exit_code == 0);
  REQUIRE(env.run({"cluster", "create", "--cluster", "wl", "--tpu-type", "v5litepod-16", "-q"})
              .exit_code == 0);
  auto started =
      env.run({"workload", "create", "--cluster", "wl", "--workload", "w", "--command", "true"});
  REQUIRE_MESSAGE(started.exit_code == 0, started.err);
  CHECK(started.err.find("tpuctl: started 4/4 ") != std::string::npos);
  REQUIRE(env.run({"workload", "wait", "w", "--timeout", "60s"}).exit_code == 0);
  REQUIRE(env.run({"cluster", "delete", "wl", "--force", "-q"}).exit_code == 0);
}

TEST_CASE("terminal: colour only on a tty and never with NO_COLOR; tables fit the width") {
  QrEnv env(8, "127.0.159.2");
  REQUIRE(env.run({"qr", "create", "c1", "--accelerator-type", "v5litepod-16"}).exit_code == 0);
  auto coloured = on_tty(env, {"qr", "list"});
  CHECK(coloured.find("\033[32mACTIVE\033[0m") != std::string::npos);
  auto plain = on_tty(env, {"qr", "list"}, 200, {{"NO_COLOR", "1"}});
  CHECK(plain.find('\033') == std::string::npos);
  CHECK(plain.find("ACTIVE") != std::string::npos);
  CHECK(env.run({"qr", "list"}).out.find('\033') == std::string::npos); // piped

  auto narrow = strip_ansi(on_tty(env, {"qr", "list"}, 90));
  for (const auto& line : tpuctl::util::split(narrow, '\n')) {
    CAPTURE(line);
    CHECK(tpuctl::util::trim(line).size() <= 90);
  }
  CHECK(narrow.find("...") != std::string::npos); // the REASON column was cut, not the ids
  CHECK(narrow.find("c1  ") != std::string::npos);
}
