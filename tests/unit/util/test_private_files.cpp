#include <fstream>
#include <sys/stat.h>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"
#include "util/private_files.hpp"

using namespace tpuctl;

namespace {

unsigned mode_of(const std::filesystem::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777u;
}

} // namespace

TEST_SUITE_BEGIN("util");

TEST_CASE("util::make_private_directories creates every missing level 0700 whatever the umask") {
  test::TempDir tmp;
  const mode_t old = ::umask(0);
  auto made = util::make_private_directories((tmp.path() / "a" / "b").string());
  ::umask(old);
  REQUIRE(made);
  CHECK(mode_of(tmp.path() / "a") == 0700u);
  CHECK(mode_of(tmp.path() / "a" / "b") == 0700u);
  std::ofstream(tmp.path() / "file").flush();
  auto bad = util::make_private_directories((tmp.path() / "file" / "x").string());
  REQUIRE(!bad);
  CHECK(bad.error().message.find("'" + (tmp.path() / "file").string() + "' is not a directory") !=
        std::string::npos);
}

TEST_CASE("util::create_private_file creates 0600 and leaves an existing file alone") {
  test::TempDir tmp;
  const auto fresh = tmp.path() / "fresh.log";
  const mode_t old = ::umask(0);
  auto created = util::create_private_file(fresh.string());
  ::umask(old);
  REQUIRE(created);
  CHECK(mode_of(fresh) == 0600u);
  const auto existing = tmp.path() / "existing.log";
  std::ofstream(existing) << "kept\n";
  std::filesystem::permissions(existing, std::filesystem::perms(0640));
  REQUIRE(util::create_private_file(existing.string()));
  CHECK(mode_of(existing) == 0640u);
  CHECK(test::read_file(existing) == "kept\n");
  auto bad = util::create_private_file((tmp.path() / "missing" / "x.log").string());
  REQUIRE(!bad);
  CHECK(bad.error().message.find("missing/x.log") != std::string::npos);
}
