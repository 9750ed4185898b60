// Installing tpuctl: `cmake --install` into a fresh prefix puts the binary, the man pages and
// the completion scripts in the standard places, and the .deb that CPack builds unpacks into an
// empty root whose tpuctl runs, and depends only on packages this Debian has.
#include <filesystem>
#include <set>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

using tpuctl::test::TempDir;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

namespace {

fs::path build_dir() {
  return fs::path(tpuctl::test::tpuctl_binary()).parent_path().parent_path();
}

tpuctl::util::ProcessResult run(const std::vector<std::string>& argv) {
  tpuctl::util::ProcessOptions o;
  o.timeout = std::chrono::minutes(5);
  auto r = tpuctl::util::run_process(argv, o);
  REQUIRE(r);
  return *r;
}

} // namespace

TEST_CASE("cmake --install: binary, man pages and completions under a fresh prefix") {
  TempDir prefix;
  auto r = run({"cmake", "--install", build_dir().string(), "--prefix", prefix.path().string()});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const fs::path p = prefix.path();
  CHECK(fs::exists(p / "bin" / "tpuctl"));
  CHECK(fs::exists(p / "share" / "man" / "man1" / "tpuctl.1"));
  CHECK(fs::exists(p / "share" / "man" / "man1" / "tpuctl-workload.1"));
  CHECK(fs::exists(p / "share" / "bash-completion" / "completions" / "tpuctl"));
  CHECK(fs::exists(p / "share" / "zsh" / "vendor-completions" / "_tpuctl"));
  auto version = run({(p / "bin" / "tpuctl").string(), "version", "--format", "json"});
  CHECK(version.exit_code == 0);
  CHECK(version.out.find("\"version\"") != std::string::npos);
}

TEST_CASE("cpack: the .deb unpacks into an empty root, runs, and its dependencies exist here") {
  TempDir out;
  auto r = run({"cpack", "-G", "DEB", "--config", (build_dir() / "CPackConfig.cmake").string(),
                "-B", out.path().string()});
  REQUIRE_MESSAGE(r.exit_code == 0, (r.out + r.err));
  fs::path deb;
  for (const auto& e : fs::directory_iterator(out.path())) {
    if (e.path().extension() == ".deb") {
      deb = e.path();
    }
  }
  REQUIRE_MESSAGE(!deb.empty(), "cpack made no .deb");
  CHECK(deb.filename().string().rfind("tpuctl_", 0) == 0);
  TempDir root;
  REQUIRE(run({"dpkg-deb", "-x", deb.string(), root.path().string()}).exit_code == 0);
  auto version = run({(root.path() / "usr" / "bin" / "tpuctl").string(), "version"});
  CHECK(version.exit_code == 0);
  CHECK(fs::exists(root.path() / "usr" / "share" / "man" / "man1" / "tpuctl.1"));
  auto depends = run({"dpkg-deb", "-f", deb.string(), "Depends"});
  CHECK(depends.out.find("libssh-4") != std::string::npos);
  CHECK(depends.out.find("libsqlite3-0") != std::string::npos);
  // Every dependency is a package installed here, or one an installed package provides.
  auto installed = run({"dpkg-query", "-W", "-f=${Status}|${Package}|${Provides}\\n"});
  std::set<std::string> present;
  for (const auto& line : tpuctl::util::split(installed.out, '\n')) {
    auto fields = tpuctl::util::split(line, '|');
    if (fields.size() == 3 && fields[0] == "install ok installed") {
      present.insert(fields[1]);
      for (const auto& p : tpuctl::util::split(fields[2], ',')) {
        present.insert(std::string(tpuctl::util::trim(p.substr(0, p.find('(')))));
      }
    }
  }
  for (const auto& item : tpuctl::util::split(std::string(tpuctl::util::trim(depends.out)), ',')) {
    const std::string name(tpuctl::util::trim(item.substr(0, item.find('('))));
    CAPTURE(name);
    CHECK(present.count(name) == 1);
  }
}
