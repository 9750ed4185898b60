// The record side of the cluster queue as pure logic: which slices a workload holds (by node id,
// whatever the request's node order becomes), what an eviction's requeue does to the record, and
// the broken-slice mark a hot swap leaves on the request.
#include <doctest/doctest.h>

#include "provision/slice/node_repair.hpp"
#include "provision/workload/workload.hpp"
#include "provision/workload/workload_admit.hpp"

using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

TEST_CASE("workload queue: held slices follow their node ids when the request's nodes move") {
  Workload w;
  w.state = WorkloadState::running;
  w.slices = {1, 2};
  w.slice_nodes = {"c-1", "c-2"};
  CHECK(held_slices(w, {"c-0", "c-1", "c-2"}) == std::vector<int>{1, 2});
  // A shrink put the leaving node last; a deleted node is simply not held any more.
  CHECK(held_slices(w, {"c-0", "c-2", "c-1"}) == std::vector<int>{2, 1});
  CHECK(held_slices(w, {"c-0", "c-2"}) == std::vector<int>{1});
  // Not admitted: nothing held, whatever the record says.
  w.state = WorkloadState::queued;
  CHECK(held_slices(w, {"c-0", "c-1", "c-2"}).empty());
  // A record from before the queue ran on every slice.
  Workload old;
  old.state = WorkloadState::running;
  CHECK(held_slices(old, {"c-0", "c-1"}) == std::vector<int>{0, 1});
  CHECK(resolve_slices(old, {"c-0", "c-1"}).empty()); // it named none
}

TEST_CASE("workload queue: an eviction's requeue frees the slices, keeps restarts and repairs, "
          "takes the next attempt and counts the evicted time as its own phase") {
  Workload w;
  w.name = "spare";
  w.cluster = "c";
  w.state = WorkloadState::evicting;
  w.slices = {0};
  w.slice_nodes = {"c-0"};
  w.restarts = 1;
  w.repairs = 2;
  w.attempt = 3;
  w.workers.resize(4);
  enter(w.time, TimePhase::running, 1000);
  enter(w.time, TimePhase::evicted, 5000); // the eviction's mark
  const auto events = requeue_evicted(w, 8000);
  CHECK(events.size() == 1);
  CHECK(w.state == WorkloadState::queued);
  CHECK(w.slices.empty());
  CHECK(w.slice_nodes.empty());
  CHECK(w.workers.empty());
  CHECK(w.evictions == 1);
  CHECK(w.attempt == 4);
  CHECK(w.restarts == 1);
  CHECK(w.repairs == 2);
  CHECK(w.time.phase == TimePhase::evicted);
  const Goodput g = goodput_of(w.time, 1000, 10000);
  CHECK(g.lost_ms == 4000);    // the evicted attempt's running time
  CHECK(g.evicted_ms == 5000); // from the eviction on, still open at 10000
  CHECK(g.running_ms == 0);
}

TEST_CASE("broken slices: a node marked broken waits for a repair until the mark is gone, and a "
          "mark from before the request was placed again whole is stale") {
  QueuedResource qr;
  qr.node_ids = {"c-0", "c-1"};
  qr.active_since_ms = 1000;
  CHECK_FALSE(node_broken(qr, "c-0"));
  mark_node_broken(qr, "c-0", 2000, "a host lost by workload 'w': no free block");
  CHECK(node_broken(qr, "c-0"));
  CHECK(node_broken_why(qr, "c-0") == "a host lost by workload 'w': no free block");
  CHECK_FALSE(node_broken(qr, "c-1"));
  // Suspended, requeued and placed again whole: every node is new.
  qr.active_since_ms = 3000;
  CHECK_FALSE(node_broken(qr, "c-0"));
  CHECK(node_broken_why(qr, "c-0").empty());
}
