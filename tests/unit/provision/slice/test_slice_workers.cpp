// What a command planned on some workers of a slice gets: tpuctl's JAX start-up only when the
// command runs on every process of the job.
#include <doctest/doctest.h>

#include "provision/slice/slice_workers.hpp"

using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

namespace {

std::vector<WorkerPlan> plans_of(int selected, int processes, EnvVars extra = {}) {
  std::vector<WorkerPlan> out;
  for (int i = 0; i < selected; ++i) {
    WorkerPlan p;
    p.worker = i;
    p.env = {{"TPUCTL_PROCESS_ID", std::to_string(i)},
             {"TPUCTL_NUM_PROCESSES", std::to_string(processes)}};
    p.env.insert(p.env.end(), extra.begin(), extra.end());
    out.push_back(p);
  }
  return out;
}

} // namespace

TEST_CASE("provision::mark_partial_job switches the JAX start-up off for part of a job only") {
  SUBCASE("every process of the job: untouched") {
    auto plans = plans_of(4, 4);
    mark_partial_job(plans);
    for (const auto& p : plans) {
      CHECK(!jax_init_off(p.env));
      CHECK(p.env.size() == 2);
    }
  }
  SUBCASE("one worker of four (ssh --worker=0), or one slice of two: off on each") {
    for (auto [selected, processes] : {std::pair{1, 4}, std::pair{4, 8}}) {
      CAPTURE(selected);
      auto plans = plans_of(selected, processes);
      mark_partial_job(plans);
      for (const auto& p : plans) {
        CHECK(jax_init_off(p.env));
      }
    }
  }
  SUBCASE("the user's own TPUCTL_JAX_INIT wins") {
    auto plans = plans_of(1, 4, {{"TPUCTL_JAX_INIT", "1"}});
    mark_partial_job(plans);
    CHECK(!jax_init_off(plans[0].env));
    CHECK(plans[0].env.size() == 3);
  }
}
