// provision::plan_queue, the cluster's workload queue as pure logic: admission by priority then
// arrival onto free slices, eviction of lower priorities (fewest and lowest, walked back), the
// slices of evicting workloads still held, and the starving head that stops backfill.
#include <set>

#include <doctest/doctest.h>

#include "provision/workload/workload_queue.hpp"

using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

namespace {

QueueEntry entry(const std::string& name, int priority, int64_t arrival, int slices,
                 std::vector<int> held = {}) {
  QueueEntry e;
  e.name = name;
  e.priority = priority;
  e.arrival_ms = arrival;
  e.num_slices = slices;
  e.held = std::move(held);
  e.admitted_ms = e.held.empty() ? 0 : arrival + 1;
  return e;
}

} // namespace

TEST_CASE("plan_queue admits by priority then arrival onto the lowest free slices; held slices "
          "are never given twice") {
  const std::vector<QueueEntry> entries = {
      entry("old-low", 250, 1, 1), entry("new-high", 750, 5, 2), entry("mid", 500, 2, 1),
      entry("running", 500, 0, 1, {1})};
  auto plan = plan_queue("c", 4, entries, 100);
  REQUIRE(plan.admit.count("new-high") == 1);
  CHECK(plan.admit["new-high"] == std::vector<int>{0, 2}); // slice 1 is running's
  CHECK(plan.admit["mid"] == std::vector<int>{3});
  CHECK(plan.admit.count("old-low") == 0);
  CHECK(plan.position["old-low"] == 1);
  CHECK(plan.reason["old-low"] ==
        "waiting for 1 free slice of cluster c (0 free): slice 1 held by running (priority "
        "medium)");
  CHECK(plan.evict.empty());
}

TEST_CASE("plan_queue: a higher priority that does not fit evicts the fewest, lowest, most "
          "recently admitted workloads it needs, and the slices they free are set aside") {
  std::vector<QueueEntry> entries = {entry("low-a", 250, 1, 1, {0}), entry("low-b", 250, 2, 1, {1}),
                                     entry("vlow", 100, 3, 1, {2}), entry("med", 500, 4, 1, {3})};
  entries.push_back(entry("urgent", 1000, 10, 2));
  entries.push_back(entry("small", 250, 11, 1)); // must not take what urgent waits for
  auto plan = plan_queue("c", 4, entries, 100);
  CHECK(plan.admit.empty());
  // vlow first (lowest), then the more recently admitted of the two lows.
  CHECK(plan.evict == std::vector<std::string>{"vlow", "low-b"});
  CHECK(plan.reason["urgent"] ==
        "evicting vlow (priority very-low), low-b (priority low) to make room on cluster c");
  CHECK(plan.position["small"] == 2);

  // While they stop (evicting) their slices stay held and nobody is evicted twice.
  entries[1].evicting = true;
  entries[2].evicting = true;
  plan = plan_queue("c", 4, entries, 200);
  CHECK(plan.evict.empty());
  CHECK(plan.admit.empty());
  CHECK(plan.reason["urgent"] ==
        "waiting for low-b, vlow to stop (evicted to make room on cluster c)");
  // Once they are gone, urgent gets their slices.
  entries.erase(entries.begin() + 1, entries.begin() + 3);
  plan = plan_queue("c", 4, entries, 300);
  CHECK(plan.admit["urgent"] == std::vector<int>{1, 2});
}

TEST_CASE("plan_queue: eviction walks back, sparing a victim whose slices are not needed; no "
          "eviction when lower priorities cannot free enough") {
  std::vector<QueueEntry> entries = {entry("a", 100, 1, 1, {0}), entry("b", 250, 2, 2, {1, 2}),
                                     entry("c1", 750, 3, 1, {3})};
  entries.push_back(entry("x", 500, 10, 2));
  auto plan = plan_queue("c", 4, entries, 100);
  // Greedy takes a then b (3 slices); walking back, a is not needed once b's two are taken.
  CHECK(plan.evict == std::vector<std::string>{"b"});
  entries.back().num_slices = 4; // c1 (high) cannot be evicted by a medium
  plan = plan_queue("c", 4, entries, 100);
  CHECK(plan.evict.empty());
  CHECK(plan.reason["x"].rfind("waiting for 4 free slices of cluster c (0 free): slice 0 held "
                               "by a (priority very-low), slice 1 by b",
                               0) == 0);
}

TEST_CASE("plan_queue: smaller workloads pass a head that does not fit only until it has waited "
          "the bound; higher priorities are never held back") {
  QueuePolicy policy;
  policy.head_wait_bound = std::chrono::minutes(10);
  std::vector<QueueEntry> entries = {entry("run", 500, 0, 3, {0, 1, 2}), entry("big", 500, 1, 2),
                                     entry("small", 500, 2, 1), entry("vip", 750, 3, 1)};
  auto plan = plan_queue("c", 4, entries, 1000, policy);
  CHECK(plan.admit.count("vip") == 1); // higher priority, first in order
  entries[3].held = plan.admit["vip"];
  entries[3].admitted_ms = 1000;
  entries.push_back(entry("tiny", 500, 4, 1));
  plan = plan_queue("c", 5, entries, 2000, policy); // a fifth slice: small backfills past big
  CHECK(plan.admit.count("small") == 1);
  REQUIRE(plan.head_since_ms.count("big") == 1);
  CHECK(plan.head_since_ms["big"] == 2000);
  entries[1].head_since_ms = 2000;
  const int64_t later = 2000 + 10 * 60 * 1000;
  plan = plan_queue("c", 5, entries, later, policy);
  CHECK(plan.admit.empty()); // big has starved long enough: nothing of its priority passes
  CHECK(plan.reason["small"].find("waiting behind big") == 0);
  entries.push_back(entry("vip2", 1000, 9, 1));
  plan = plan_queue("c", 5, entries, later, policy);
  CHECK(plan.admit.count("vip2") == 1); // never held back by a lower priority
}

TEST_CASE("parse_priority takes xpk's names; plan_queue says when a workload asks for more "
          "slices than the cluster has") {
  CHECK(*parse_priority("very-low") == 100);
  CHECK(*parse_priority("very-high") == 1000);
  auto bad = parse_priority("urgent");
  REQUIRE(!bad);
  CHECK(bad.error().message ==
        "--priority urgent is not a priority: give very-low, low, medium, high or very-high");
  CHECK(priority_name(750) == "high");
  auto plan = plan_queue("c", 2, {entry("huge", 500, 1, 3)}, 0);
  CHECK(plan.reason["huge"] == "asks for 3 slices; cluster c has 2");
}

TEST_CASE("plan_queue: a broken slice is free for nobody; a workload that held it takes an idle "
          "slice, else evicts a lower priority for one, and the others wait naming the repair") {
  const std::set<int> broken{0};
  SUBCASE("an idle slice") {
    auto plan = plan_queue("c", 3, {entry("swapped", 750, 1, 1), entry("other", 250, 2, 1, {1})},
                           100, {}, broken);
    CHECK(plan.admit["swapped"] == std::vector<int>{2}); // never slice 0
    CHECK(plan.evict.empty());
  }
  SUBCASE("a lower priority's slice") {
    auto plan = plan_queue("c", 2, {entry("swapped", 750, 1, 1), entry("batch", 250, 2, 1, {1})},
                           100, {}, broken);
    CHECK(plan.admit.empty());
    CHECK(plan.evict == std::vector<std::string>{"batch"});
    CHECK(plan.evicted_for["batch"] == "swapped");
  }
  SUBCASE("nothing lower: it waits, and so does an evicted one, naming the repair") {
    auto plan = plan_queue("c", 2, {entry("swapped", 250, 1, 1), entry("urgent", 750, 2, 1, {1})},
                           100, {}, broken);
    CHECK(plan.admit.empty());
    CHECK(plan.evict.empty());
    CHECK(plan.reason["swapped"] ==
          "waiting for 1 free slice of cluster c (0 free): slice 1 held by urgent (priority "
          "high); slice 0 waiting for a repair");
  }
  SUBCASE("a broken slice held by a victim frees nothing: it is not evicted for it") {
    auto plan = plan_queue(
        "c", 3, {entry("high", 750, 1, 1), entry("on-broken", 250, 3, 1, {0}),
                 entry("healthy", 250, 2, 1, {1}), entry("mid", 500, 4, 1, {2})},
        100, {}, broken);
    CHECK(plan.evict == std::vector<std::string>{"healthy"});
  }
}
