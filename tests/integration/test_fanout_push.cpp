// remote::push_file to 16 real sshd hosts: content verified by sha256 on every host, mode kept,
// atomic rename (no temporary file left), the content-addressed skip, and failures reported.
#include <fstream>
#include <random>
#include <sstream>
#include <sys/stat.h>

#include <doctest/doctest.h>

#include "cli/fanout_output.hpp"
#include "remote/push.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "util/sha256.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using remote::Outcome;
namespace fs = std::filesystem;

namespace {

constexpr int k_block = 203;
constexpr size_t k_hosts = 16;

test::LocalPoolFixture& pool() {
  static test::LocalPoolFixture fixture(k_hosts, k_block);
  return fixture;
}

// The "remote" hosts share this machine's filesystem, so each host gets its own destination.
std::vector<remote::PushJob> jobs_into(const fs::path& root, const std::string& name) {
  std::vector<remote::PushJob> jobs;
  auto targets = pool().targets();
  for (size_t i = 0; i < targets.size(); ++i) {
    jobs.push_back({targets[i], (root / targets[i].name / "bin" / name).string(), i});
  }
  return jobs;
}

std::string random_bytes(size_t n) {
  std::mt19937_64 rng(12345);
  std::string out(n, '\0');
  for (auto& c : out) {
    c = static_cast<char>(rng() & 0xff);
  }
  return out;
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_mode & 07777u;
}

size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) {
    ++n;
  }
  return n;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("remote::push_file copies a file to 16 hosts: sha256 verified, mode kept, atomic") {
  test::TempDir tmp;
  auto local = tmp.path() / "agent.bin";
  const std::string content = random_bytes(3 * 1024 * 1024 + 17); // > the channel window
  std::ofstream(local, std::ios::binary) << content;
  fs::permissions(local, fs::perms(0750));
  auto jobs = jobs_into(tmp.path() / "hosts", "agent");
  remote::PushOptions push;
  push.local_path = local;
  std::vector<size_t> done;
  remote::FanoutCallbacks cb;
  cb.on_host_done = [&](const remote::HostResult& r) { done.push_back(r.index); };
  auto results = remote::push_file(jobs, push, pool().options(), cb);
  REQUIRE(results);
  CHECK(done.size() == k_hosts);
  const std::string want_hash = util::sha256_hex(content);
  for (const auto& r : *results) {
    CAPTURE(r.host);
    CAPTURE(r.error);
    CHECK(r.outcome == Outcome::ok);
    CHECK_FALSE(r.unchanged);
    fs::path dest = jobs[r.index].remote_path;
    CHECK(util::sha256_file_hex(dest).value_or("") == want_hash);
    CHECK(mode_of(dest) == 0750u);
    CHECK(files_in(dest.parent_path()) == 1); // no DEST.tmp.* left behind
  }
  // The system's sha256sum agrees with util::sha256 on the pushed copy.
  auto sum = util::run_process({"sha256sum", jobs[0].remote_path});
  REQUIRE(sum);
  CHECK(sum->out.substr(0, 64) == want_hash);
  CHECK(cli::broadcast_exit_status(*results) == 0);
}

TEST_CASE("remote::push_file with skip_if_same sends only to hosts whose copy differs") {
  test::TempDir tmp;
  auto local = tmp.path() / "tool.sh";
  std::ofstream(local) << "#!/bin/sh\necho tool v1\n";
  auto jobs = jobs_into(tmp.path() / "hosts", "tool.sh");
  remote::PushOptions push;
  push.local_path = local;
  push.mode = 0755;
  push.skip_if_same = true;
  auto first = remote::push_file(jobs, push, pool().options());
  REQUIRE(first);
  for (const auto& r : *first) {
    CHECK(r.outcome == Outcome::ok);
    CHECK_FALSE(r.unchanged); // nothing was there yet
  }
  // Host 3's copy is modified, host 5's mode is changed, and the whole run repeated.
  std::ofstream(jobs[3].remote_path) << "#!/bin/sh\necho tampered\n";
  fs::permissions(jobs[5].remote_path, fs::perms(0600));
  struct stat st7 {};
  ::stat(jobs[7].remote_path.c_str(), &st7);
  auto second = remote::push_file(jobs, push, pool().options());
  REQUIRE(second);
  for (const auto& r : *second) {
    CAPTURE(r.host);
    CHECK(r.outcome == Outcome::ok);
    CHECK(r.unchanged == (r.index != 3));
    CHECK(util::sha256_file_hex(jobs[r.index].remote_path).value_or("") ==
          util::sha256_file_hex(local).value_or("?"));
    CHECK(mode_of(jobs[r.index].remote_path) == 0755u);
  }
  // An unchanged host's file was not rewritten (same inode: no rename happened).
  struct stat st7_after {};
  ::stat(jobs[7].remote_path.c_str(), &st7_after);
  CHECK(st7_after.st_ino == st7.st_ino);
}

TEST_CASE("remote::push_file reports hosts where the file cannot be written and cleans up") {
  test::TempDir tmp;
  auto local = tmp.path() / "data";
  std::ofstream(local) << "payload\n";
  auto targets = pool().targets();
  // A destination whose parent is a regular file: mkdir -p fails.
  auto blocker = tmp.path() / "not-a-dir";
  std::ofstream(blocker) << "x";
  std::vector<remote::PushJob> jobs = {
      {targets[0], (tmp.path() / "ok" / "data").string(), 0},
      {targets[1], (blocker / "data").string(), 1},
      {pool().refused_target(), (tmp.path() / "never" / "data").string(), 2},
  };
  remote::PushOptions push;
  push.local_path = local;
  auto results = remote::push_file(jobs, push, pool().options());
  REQUIRE(results);
  const auto& r = *results;
  CHECK(r[0].outcome == Outcome::ok);
  CHECK(r[1].outcome == Outcome::exit_code);
  CHECK(r[1].error.find("cannot write '" + jobs[1].remote_path + "'") != std::string::npos);
  CHECK(r[2].outcome == Outcome::refused);
  CHECK_FALSE(fs::exists(tmp.path() / "never"));

  // A local file that does not exist fails before any connection.
  push.local_path = tmp.path() / "absent";
  auto absent = remote::push_file(jobs, push, pool().options());
  REQUIRE_FALSE(absent);
  CHECK(absent.error().message.find("absent") != std::string::npos);
}

TEST_CASE("remote::push_upload_script rejects a corrupted upload and removes the temporary file") {
  // Run the upload script locally through sh with a wrong expected hash: it must exit 97,
  // name both hashes and leave neither the destination nor the temporary file behind.
  test::TempDir tmp;
  auto dest = tmp.path() / "d" / "file";
  std::string wrong(64, '0');
  std::string script = remote::push_upload_script(dest.string(), wrong, 0644, "abc123", true);
  util::ProcessOptions o;
  o.stdin_data = "some bytes";
  auto r = util::run_process({"sh", "-c", script}, o);
  REQUIRE(r);
  CHECK(r->exit_code == 97);
  CHECK(r->err.find("expected " + wrong) != std::string::npos);
  CHECK(r->err.find(util::sha256_hex("some bytes")) != std::string::npos);
  CHECK_FALSE(fs::exists(dest));
  CHECK(files_in(dest.parent_path()) == 0);
}
