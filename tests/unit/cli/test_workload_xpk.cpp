// xpk's workload flags (cli/workload_xpk.hpp): --env-file lines as xpk reads them, the status and
// job filters of `workload list|delete`, and the image flags' combinations.
#include <cstdlib>
#include <fstream>

#include <doctest/doctest.h>

#include "cli/workload_xpk.hpp"
#include "tests/support/helpers.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using namespace tpuctl::cli;

TEST_SUITE_BEGIN("unit");

TEST_CASE("workload xpk: --env-file takes VAR=value, VAR from this shell, comments and blanks") {
  test::TempDir dir;
  const auto file = dir.path() / "env";
  ::setenv("TPUCTL_TEST_FROM_SHELL", "shell value", 1);
  std::ofstream(file) << "# a comment\n\nA=1\nB = two words\nTPUCTL_TEST_FROM_SHELL\nC=x=y\n";
  auto vars = read_env_file(file.string());
  REQUIRE_MESSAGE(vars, vars.error().message);
  CHECK(*vars == provision::EnvVars{{"A", "1"},
                                    {"B", " two words"},
                                    {"TPUCTL_TEST_FROM_SHELL", "shell value"},
                                    {"C", "x=y"}});
  std::ofstream(file) << "OK=1\n1BAD=x\nTPUCTL_TEST_SURELY_UNSET_VAR\n";
  ::unsetenv("TPUCTL_TEST_SURELY_UNSET_VAR");
  auto bad = read_env_file(file.string());
  REQUIRE(!bad);
  CHECK(bad.error().kind == ErrorKind::usage);
  std::string all;
  for (const auto& m : bad.error().all_messages()) {
    all += m + "\n";
  }
  CHECK(all.find("line 2") != std::string::npos);
  CHECK(all.find("line 3: TPUCTL_TEST_SURELY_UNSET_VAR has no value") != std::string::npos);
  CHECK(!read_env_file((dir.path() / "missing").string()));
}

TEST_CASE("workload xpk: status filters as xpk defines them, any case; job is a substring") {
  provision::Workload w;
  w.name = "maxtext-1b-1200";
  auto f = [](const char* status, const char* job = "") {
    auto parsed = parse_workload_filter(status, job);
    REQUIRE(parsed);
    return *parsed;
  };
  using S = provision::WorkloadState;
  const std::vector<std::pair<S, std::vector<const char*>>> keeps = {
      {S::pending, {"EVERYTHING", "queued"}},
      {S::running, {"everything", "RUNNING"}},
      {S::succeeded, {"EVERYTHING", "FINISHED", "SUCCESSFUL"}},
      {S::failed, {"EVERYTHING", "Finished", "FAILED"}},
  };
  for (const auto& [state, kept] : keeps) {
    w.state = state;
    for (const char* status :
         {"EVERYTHING", "RUNNING", "QUEUED", "FINISHED", "FAILED", "SUCCESSFUL"}) {
      bool expect = false;
      for (const char* k : kept) {
        expect = expect || util::to_lower(k) == util::to_lower(status);
      }
      CAPTURE(status);
      CHECK(matches(f(status), w) == expect);
    }
  }
  CHECK(matches(f("EVERYTHING", "1b-"), w));
  CHECK_FALSE(matches(f("EVERYTHING", "llama"), w));
  CHECK(!parse_workload_filter("DONE", ""));
}

TEST_CASE("workload xpk: --docker-image is used as is; a base image takes the script dir") {
  test::TempDir dir;
  std::ofstream(dir.path() / "train.py") << "print(1)\n";
  provision::WorkloadRequest r;
  REQUIRE(apply_image_flags({"", "python:3.10", dir.path().string(), "jax-tpu", "AUTO"}, r));
  CHECK(r.container.image == "python:3.10");
  CHECK(r.container.runtime == "auto");
  REQUIRE(r.app_files.size() == 1);
  CHECK(r.app_files[0].relative == "train.py");

  provision::WorkloadRequest plain;
  REQUIRE(apply_image_flags({"my/image:1", "", "", "jax-tpu", "docker"}, plain));
  CHECK(plain.container.image == "my/image:1");
  CHECK(plain.app_files.empty());

  provision::WorkloadRequest both;
  CHECK(!apply_image_flags({"my/image:1", "python:3.10", "", "jax-tpu", "auto"}, both));
  CHECK(!apply_image_flags({"", "", dir.path().string(), "jax-tpu", "auto"}, both));
  provision::WorkloadRequest none;
  REQUIRE(apply_image_flags({"", "", "", "jax-tpu", "auto"}, none));
  CHECK(none.container.image.empty());
}
