// `workload create --dry-run` through the binary on a local pool (this file's block
// 127.0.132.x): it answers at once whatever the queue or the workers' state, exits 0, shows
// what each worker would run, and stores and starts nothing; a worker lacking what the real
// create would need (a container runtime) is a notice, not a failure.
#include <algorithm>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/workload_env.hpp"
#include "util/process.hpp"

using nlohmann::json;
using tpuctl::test::contains;

TEST_SUITE_BEGIN("integration");

TEST_CASE("workload create --dry-run answers at once, exit 0, whatever holds the slices or the "
          "workers lack, and stores nothing") {
  tpuctl::test::WorkloadEnv env(2, "127.0.132.2");
  auto created = env.run({"cluster", "create", "--cluster", "demo", "--tpu-type", "v5litepod-4",
                          "--num-slices", "2"});
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  env.create_workload("demo", "holder", "sleep 600", {"--num-slices", "all"});

  // Both slices are held: a real create would wait in the queue; the dry run does not.
  auto plan = env.run({"workload", "create", "--cluster", "demo", "--workload", "trial",
                       "--num-slices", "2", "--command", "python3 train.py", "--dry-run"});
  CHECK_MESSAGE(plan.exit_code == 0, plan.err);
  CHECK(contains(plan.out, "dry run: workload 'trial' would start on 2 workers"));
  CHECK(contains(plan.out, "python3 train.py"));
  CHECK(plan.err.find("error") == std::string::npos);
  auto j = env.run_json({"workload", "create", "--cluster", "demo", "--workload", "trial",
                         "--command", "true", "--dry-run"});
  CHECK(j["dry_run"] == true);
  CHECK(j["workers"].size() == 1);

  // An image on workers without docker or podman: what would run, and a notice of what is
  // missing (the real create refuses it), still exit 0.
  const bool has_runtime = !tpuctl::util::find_program("docker").empty() ||
                           !tpuctl::util::find_program("podman").empty();
  auto image = env.run({"workload", "create", "--cluster", "demo", "--workload", "boxed",
                        "--command", "true", "--docker-image", "python:3.11", "--dry-run"});
  CHECK_MESSAGE(image.exit_code == 0, image.err);
  CHECK(contains(image.out, "in image python:3.11"));
  if (!has_runtime) {
    CHECK_MESSAGE(contains(image.err, "tpuctl: notice: "), image.err);
    CHECK(std::count(image.err.begin(), image.err.end(), '\n') == 1);
  }

  // Nothing stored, nothing started.
  auto listed = env.run_json({"workload", "list"});
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["name"] == "holder");
}
