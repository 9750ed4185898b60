// provision::summarize_cluster_queue, xpk's info for a tpuctl cluster as pure logic: a workload
// holding slices is admitted and counts its slices' chips, a QUEUED one is pending (in the
// queue's order), an ended one or another cluster's counts for nothing, and the flavor is named
// as xpk names a TPU flavor.
#include <doctest/doctest.h>

#include "provision/workload/cluster_queue_info.hpp"

using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

namespace {

Workload workload(const std::string& name, const std::string& cluster, WorkloadState state,
                  std::vector<int> slices = {}) {
  Workload w;
  w.name = name;
  w.cluster = cluster;
  w.state = state;
  w.slices = std::move(slices);
  return w;
}

} // namespace

TEST_CASE("summarize_cluster_queue: admitted workloads hold chips, queued ones are pending in "
          "queue order, ended ones and other clusters' count for nothing") {
  Cluster c;
  c.name = "demo";
  c.tpu_type = "v5litepod-16";
  c.num_slices = 3;
  c.queue = {{"late", {{"position", 2}}}, {"early", {{"position", 1}}}};
  const std::vector<Workload> all{
      workload("late", "demo", WorkloadState::queued),
      workload("a", "demo", WorkloadState::running, {0, 2}),
      workload("b", "demo", WorkloadState::evicting, {1}),
      workload("done", "demo", WorkloadState::succeeded, {1}),
      workload("early", "demo", WorkloadState::queued),
      workload("fresh", "demo", WorkloadState::queued),
      workload("elsewhere", "other", WorkloadState::running, {0})};
  const auto u = summarize_cluster_queue(c, all, 16);
  CHECK(u.flavor == "3xv5litepod-16");
  CHECK(u.resource == "google.com/tpu");
  CHECK(u.chips_total == 48);
  CHECK(u.chips_used == 48); // a's two slices and b's one, still held while it stops
  CHECK(u.admitted == std::vector<std::string>{"a", "b"});
  CHECK(u.pending == std::vector<std::string>{"early", "late", "fresh"});

  const auto empty = summarize_cluster_queue(c, {}, 16);
  CHECK(empty.chips_used == 0);
  CHECK(empty.admitted.empty());
  CHECK(empty.pending.empty());
}
