// Encrypted identity files through the real binary, with real sshd on the address block
// 127.0.249.x (owned by this file): the local pool's own key is encrypted in place with
// ssh-keygen -p, and then `pool ssh` reaches the hosts with its passphrase from
// --identity-passphrase-file, from SSH_ASKPASS, or through a real ssh-agent holding the key; in
// batch mode (none of those) it fails at once naming the file and the ways out, as it does for
// a wrong passphrase. Provisioning a slice works with it too.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/background.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/qr_env.hpp"
#include "util/process.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

using tpuctl::test::contains;
using tpuctl::test::QrEnv;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

namespace {

void write_private(const fs::path& path, const std::string& text, fs::perms perms) {
  std::ofstream(path) << text;
  fs::permissions(path, perms, fs::perm_options::replace);
}

// One `tpuctl: error:` line on stderr.
size_t error_lines(const std::string& err) {
  size_t n = 0;
  for (const auto& line : tpuctl::util::split(err, '\n')) {
    n += line.rfind("tpuctl: error:", 0) == 0 ? 1 : 0;
  }
  return n;
}

} // namespace

TEST_CASE("encrypted keys: a passphrase from a file, SSH_ASKPASS or ssh-agent; in batch mode one "
          "line naming the file and the ways out; a slice is provisioned with it") {
  QrEnv env(2, "127.0.249.2");
  const fs::path key = env.pool_dir() / "client_ed25519";
  REQUIRE(fs::exists(key));
  const std::string pass = "correct horse " + tpuctl::util::random_hex_id();
  auto encrypted = tpuctl::util::run_process(
      {"ssh-keygen", "-q", "-p", "-f", key.string(), "-P", "", "-N", pass});
  REQUIRE(encrypted);
  REQUIRE_MESSAGE(encrypted->exit_code == 0, encrypted->err);
  const std::vector<std::string> probe{"pool", "ssh", "--command", "echo reached"};
  // The environment of a CI job: no terminal, no agent, no askpass.
  const std::map<std::string, std::string> batch{
      {"SSH_AUTH_SOCK", ""}, {"SSH_ASKPASS", ""}, {"DISPLAY", ""}};

  auto none = env.run_with(probe, batch);
  CHECK(none.exit_code == 5);
  CHECK(error_lines(none.err) == 1);
  CHECK_MESSAGE(contains(none.err, "identity file '" + key.string() +
                                       "' is encrypted and no passphrase was given: give its "
                                       "passphrase with --identity-passphrase-file FILE"),
                none.err);
  CHECK(contains(none.err, "ssh-add " + key.string()));
  CHECK(none.out.empty());

  // From a file (its first line).
  const fs::path good = env.dir.path() / "passphrase";
  write_private(good, pass + "\n", fs::perms::owner_read | fs::perms::owner_write);
  auto args = probe;
  args.insert(args.end(), {"--identity-passphrase-file", good.string()});
  auto from_file = env.run_with(args, batch);
  CHECK_MESSAGE(from_file.exit_code == 0, from_file.err);
  CHECK(tpuctl::util::split(from_file.out, '\n').size() >= 2);
  CHECK(contains(from_file.out, "reached"));

  // A wrong one: one line, exit 5.
  const fs::path bad = env.dir.path() / "wrong";
  write_private(bad, "not it\n", fs::perms::owner_read | fs::perms::owner_write);
  args = probe;
  args.insert(args.end(), {"--identity-passphrase-file", bad.string()});
  auto wrong = env.run_with(args, batch);
  CHECK(wrong.exit_code == 5);
  CHECK(error_lines(wrong.err) == 1);
  CHECK(contains(wrong.err, "the passphrase of identity file '" + key.string() + "' is wrong"));

  // SSH_ASKPASS, as ssh(1) runs it: the prompt as its argument, the passphrase on its stdout.
  const fs::path askpass = env.dir.path() / "askpass.sh";
  write_private(askpass, "#!/bin/sh\ncat " + tpuctl::util::shell_quote(good.string()) + "\n",
                fs::perms::owner_all);
  auto with_askpass = batch;
  with_askpass["SSH_ASKPASS"] = askpass.string();
  with_askpass["SSH_ASKPASS_REQUIRE"] = "force";
  auto asked = env.run_with(probe, with_askpass);
  CHECK_MESSAGE(asked.exit_code == 0, asked.err);
  CHECK(contains(asked.out, "reached"));

  // ssh-agent holding the key: no passphrase needed by tpuctl.
  const fs::path sock = env.dir.path() / "agent.sock";
  tpuctl::test::Background agent({"/usr/bin/ssh-agent", "-D", "-a", sock.string()}, {}, {},
                                 env.dir.path(), "ssh-agent");
  REQUIRE(tpuctl::test::wait_until([&] { return fs::exists(sock); }, std::chrono::seconds(10)));
  tpuctl::util::ProcessOptions add;
  add.env_set = {{"SSH_AUTH_SOCK", sock.string()},
                 {"SSH_ASKPASS", askpass.string()},
                 {"SSH_ASKPASS_REQUIRE", "force"},
                 {"DISPLAY", ":0"}};
  auto added = tpuctl::util::run_process({"ssh-add", key.string()}, add);
  REQUIRE(added);
  REQUIRE_MESSAGE(added->exit_code == 0, added->err);
  auto with_agent = batch;
  with_agent["SSH_AUTH_SOCK"] = sock.string();
  auto through_agent = env.run_with(probe, with_agent);
  CHECK_MESSAGE(through_agent.exit_code == 0, through_agent.err);
  CHECK(contains(through_agent.out, "reached"));
  ::kill(agent.pid(), SIGTERM);
  CHECK(agent.wait(std::chrono::seconds(10)).has_value());

  // Provisioning a slice (push, startup, preflight) with the passphrase from the file.
  auto created = env.run_with({"qr", "create", "q", "--accelerator-type", "v5litepod-4",
                               "--identity-passphrase-file", good.string()},
                              batch);
  CHECK_MESSAGE(created.exit_code == 0, created.err);
  CHECK(env.describe("q")["state"] == "ACTIVE");
  CHECK(env.run_with({"qr", "delete", "q", "--force", "--identity-passphrase-file", good.string()},
                     batch)
            .exit_code == 0);
}
