// remote::pull_file from 6 real sshd hosts: each host's own bytes arrive in their own local
// file, verified by sha256 (binary and multi-MB content), with the remote mode; a missing path,
// a directory or an unreachable host fails that host alone and leaves no file behind.
#include <fstream>
#include <pwd.h>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "remote/fanout.hpp"
#include "remote/pull.hpp"
#include "tests/support/local_pool_fixture.hpp"

using namespace tpuctl;
using remote::Outcome;
namespace fs = std::filesystem;

namespace {

constexpr int k_block = 205;
constexpr size_t k_hosts = 6;

test::LocalPoolFixture& pool() {
  static test::LocalPoolFixture fixture(k_hosts, k_block);
  return fixture;
}

std::string bytes_of(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (auto& c : out) {
    c = static_cast<char>(rng() & 0xff);
  }
  return out;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_mode & 0777u;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("pull_file: every host's own file arrives verified, in its own local file") {
  test::TempDir remote_side, local_side;
  auto targets = pool().targets();
  std::vector<remote::PullJob> jobs;
  std::vector<std::string> contents;
  for (size_t i = 0; i < targets.size(); ++i) {
    // The hosts share this machine's disk: each "remote" file lives in its own directory.
    fs::path dir = remote_side.path() / targets[i].name;
    fs::create_directories(dir);
    contents.push_back(bytes_of(i == 0 ? 5 * 1024 * 1024 + 7 : 1000 + i, i)); // binary, NULs
    std::ofstream(dir / "out.bin", std::ios::binary) << contents.back();
    fs::permissions(dir / "out.bin", fs::perms(0640));
    jobs.push_back(
        {targets[i], (dir / "out.bin").string(), local_side.path() / targets[i].name, i});
  }
  auto results = remote::pull_file(jobs, pool().options());
  REQUIRE(results);
  REQUIRE(results->size() == k_hosts);
  for (size_t i = 0; i < k_hosts; ++i) {
    INFO(targets[i].name << ": " << (*results)[i].error);
    CHECK((*results)[i].succeeded());
    CHECK(read_all(jobs[i].local_path) == contents[i]);
    CHECK(mode_of(jobs[i].local_path) == 0640);
  }
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(local_side.path())) {
    ++files;
  }
  CHECK(files == k_hosts); // no temporary file left
}

TEST_CASE("pull_file: a missing file, a directory and an unreachable host fail alone") {
  test::TempDir remote_side, local_side;
  auto targets = pool().targets();
  fs::create_directories(remote_side.path() / "adir");
  std::ofstream(remote_side.path() / "good.txt") << "fine\n";
  std::vector<remote::PullJob> jobs{
      {targets[0], (remote_side.path() / "good.txt").string(), local_side.path() / "good", 0},
      {targets[1], (remote_side.path() / "nope.txt").string(), local_side.path() / "nope", 1},
      {targets[2], (remote_side.path() / "adir").string(), local_side.path() / "adir", 2},
      {pool().refused_target(), "/etc/hostname", local_side.path() / "refused", 3},
  };
  auto results = remote::pull_file(jobs, pool().options());
  REQUIRE(results);
  CHECK((*results)[0].succeeded());
  CHECK(read_all(local_side.path() / "good") == "fine\n");
  CHECK(!(*results)[1].succeeded());
  CHECK((*results)[1].error.find("is not a regular file") != std::string::npos);
  CHECK(!(*results)[2].succeeded());
  CHECK((*results)[2].error.find("is not a regular file") != std::string::npos);
  CHECK((*results)[3].outcome == Outcome::refused);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(local_side.path())) {
    left.push_back(e.path().filename().string());
  }
  CHECK(left == std::vector<std::string>{"good"});
}

TEST_CASE("pull_file: a path starting with '-' or '~/' is a path, not an option") {
  test::TempDir local_side;
  auto targets = pool().targets();
  // The fixture's login is this machine's user, so '~/' is that user's home directory (from
  // the password database, as sshd sets it; this process's $HOME may point elsewhere).
  const std::string name = "tpuctl-pull-test-" + std::to_string(::getpid());
  const passwd* pw = ::getpwuid(::getuid());
  REQUIRE(pw != nullptr);
  fs::path home = pw->pw_dir;
  std::ofstream(home / name) << "from home\n";
  auto results = remote::pull_file({{targets[0], "~/" + name, local_side.path() / "home", 0}},
                                   pool().options());
  fs::remove(home / name);
  REQUIRE(results);
  CHECK((*results)[0].succeeded());
  CHECK(read_all(local_side.path() / "home") == "from home\n");
  CHECK(remote::pull_script("-rf").find("./-rf") != std::string::npos);
  CHECK(remote::pull_script("-rf").find("f=-rf") == std::string::npos);
}
