// The shell scripts push_file runs on each host, run here through the local /bin/sh.
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "remote/push.hpp"
#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/sha256.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using namespace std::string_literals;
namespace fs = std::filesystem;

namespace {

util::ProcessResult sh(const std::string& script, const std::string& input = "") {
  util::ProcessOptions o;
  o.stdin_data = input;
  auto r = util::run_process({"sh", "-c", script}, o);
  REQUIRE(r);
  return *r;
}

} // namespace

TEST_SUITE_BEGIN("remote");

TEST_CASE("remote::push_upload_script writes through a temporary name to a hostile path") {
  test::TempDir tmp;
  fs::path dest = tmp.path() / "dir with space" / "it's $(touch pwned); `x`" / "file";
  const std::string content = "binary\0data\nmore"s;
  auto r =
      sh(remote::push_upload_script(dest.string(), util::sha256_hex(content), 0640, "t1", true),
         content);
  CHECK(r.exit_code == 0);
  CHECK(r.err == "");
  CHECK(util::sha256_file_hex(dest).value_or("") == util::sha256_hex(content));
  struct stat st {};
  ::stat(dest.c_str(), &st);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK_FALSE(fs::exists(fs::current_path() / "pwned"));
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dest.parent_path())) {
    ++entries;
  }
  CHECK(entries == 1); // the temporary file was renamed, not left behind
}

TEST_CASE("remote::push_upload_script installs from a pipe and from any other stdin alike") {
  // sshd gives commands a pipe (install reads it by name); a socket or file is copied with cat.
  test::TempDir tmp;
  const std::string content = "bytes\0of the agent"s;
  const std::string sha = util::sha256_hex(content);
  const fs::path input = tmp.path() / "input";
  std::ofstream(input, std::ios::binary) << content;
  for (const bool pipe : {true, false}) {
    CAPTURE(pipe);
    const fs::path dest = tmp.path() / (pipe ? "p" : "f") / "sub" / "agent";
    const std::string script = remote::push_upload_script(dest.string(), sha, 0750, "t", true);
    auto r = pipe ? sh(script, content) : sh("exec < '" + input.string() + "'\n" + script);
    CHECK(r.exit_code == 0);
    CHECK(r.err == "");
    CHECK(test::read_file(dest) == content);
    struct stat st {};
    ::stat(dest.c_str(), &st);
    CHECK((st.st_mode & 07777) == 0750);
    // The directories it made are the owner's alone, whatever the caller's umask.
    for (const fs::path& dir : {dest.parent_path(), dest.parent_path().parent_path()}) {
      ::stat(dir.c_str(), &st);
      CHECK_MESSAGE((st.st_mode & 07777) == 0700, dir.string());
    }
  }
}

TEST_CASE("remote::push_check_script says same only for the same content, and fixes the mode") {
  test::TempDir tmp;
  fs::path dest = tmp.path() / "f";
  std::ofstream(dest) << "v1";
  fs::permissions(dest, fs::perms(0600));
  CHECK(sh(remote::push_check_script(dest.string(), util::sha256_hex("v1"), 0755)).out == "same\n");
  struct stat st {};
  ::stat(dest.c_str(), &st);
  CHECK((st.st_mode & 07777) == 0755);
  CHECK(sh(remote::push_check_script(dest.string(), util::sha256_hex("v2"), 0755)).out ==
        "differ\n");
  CHECK(
      sh(remote::push_check_script((tmp.path() / "absent").string(), util::sha256_hex("v1"), 0755))
          .out == "differ\n");
}

TEST_CASE("remote::push_upload_script and push_check_script take a leading '-' as a path") {
  test::TempDir tmp;
  const std::string in_tmp = "cd '" + tmp.path().string() + "' || exit 99\n";
  auto r =
      sh(in_tmp + remote::push_upload_script("-rf", util::sha256_hex("x"), 0600, "t1", false), "x");
  CHECK(r.exit_code == 0);
  CHECK(r.err == "");
  CHECK(test::read_file(tmp.path() / "-rf") == "x");
  CHECK(sh(in_tmp + remote::push_check_script("-rf", util::sha256_hex("x"), 0600)).out == "same\n");
}

TEST_CASE(
    "remote::push_check_script with a stamp trusts an unchanged file and rehashes a changed") {
  test::TempDir tmp;
  fs::path dest = tmp.path() / "agent";
  const std::string sha = util::sha256_hex("v1");
  auto up = sh(remote::push_upload_script(dest.string(), sha, 0700, "t1", true, true), "v1");
  REQUIRE(up.exit_code == 0);
  REQUIRE(fs::exists(tmp.path() / "agent.sha256"));
  const std::string stamp = test::read_file(tmp.path() / "agent.sha256");
  CHECK(util::starts_with(stamp, sha + " 700 2 "));
  CHECK(sh(remote::push_check_script(dest.string(), sha, 0700, true)).out == "same\n");
  // The same bytes written again: the stamp is stale (a new mtime and ctime), the full hash
  // still matches, so the answer is the same and the stamp is renewed.
  ::usleep(20000);
  std::ofstream(dest) << "v1";
  CHECK(sh(remote::push_check_script(dest.string(), sha, 0700, true)).out == "same\n");
  CHECK(test::read_file(tmp.path() / "agent.sha256") != stamp);
  // Other bytes of the same size: differ, whatever the stamp says.
  ::usleep(20000);
  std::ofstream(dest) << "v2";
  CHECK(sh(remote::push_check_script(dest.string(), sha, 0700, true)).out == "differ\n");
  // A different mode asked for: hashed again, and the mode is fixed.
  std::ofstream(dest) << "v1";
  CHECK(sh(remote::push_check_script(dest.string(), sha, 0750, true)).out == "same\n");
  struct stat st {};
  ::stat(dest.c_str(), &st);
  CHECK((st.st_mode & 07777) == 0750);
  // A forged stamp for other content: the live stat no longer matches it after any write.
  std::ofstream(tmp.path() / "agent.sha256") << stamp;
  std::ofstream(dest) << "v3";
  CHECK(sh(remote::push_check_script(dest.string(), sha, 0750, true)).out == "differ\n");
}
