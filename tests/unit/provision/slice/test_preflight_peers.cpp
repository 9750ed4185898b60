// The preflight's links (provision/slice/preflight_peers.hpp): the coordinator, torus neighbours
// with wraparound, one DCN peer per other slice, each link from both ends, O(N) in all.
#include <algorithm>

#include <doctest/doctest.h>

#include "provision/slice/preflight_peers.hpp"
#include "topology/accelerator_type.hpp"

using namespace tpuctl;
using provision::preflight_links;

TEST_SUITE_BEGIN("unit");

namespace {

topology::AcceleratorType type(const char* name) {
  auto t = topology::parse_accelerator_type(name);
  REQUIRE_MESSAGE(t, name);
  return *t;
}

std::vector<int> peers(const provision::WorkerLinks& w) {
  std::vector<int> out;
  for (const auto& l : w.calls) {
    out.push_back(l.peer);
  }
  return out;
}

} // namespace

TEST_CASE("preflight links: a 2x2 host grid without wraparound") {
  auto links = preflight_links(type("v5litepod-16"), 1);
  REQUIRE(links);
  REQUIRE(links->size() == 4);
  // Worker 3 at (1,1): the coordinator 0, and its neighbours 1 (along y) and 2 (along x).
  CHECK(peers((*links)[3]) == std::vector<int>{0, 1, 2});
  CHECK(provision::link_label(*links, 3, 0) == "coordinator");
  CHECK(provision::link_label(*links, 3, 1) == "ICI y");
  CHECK(provision::link_label(*links, 3, 2) == "ICI x");
  // Worker 1 neighbours worker 0: one call, for both reasons.
  CHECK(provision::link_label(*links, 1, 0) == "ICI x, coordinator");
  CHECK((*links)[0].expects == std::vector<int>{1, 2, 3});
  CHECK(peers((*links)[0]) == std::vector<int>{1, 2});
}

TEST_CASE("preflight links: wraparound axes, symmetric links, and O(N) calls at pod scale") {
  for (const char* name : {"v4-128", "v5p-1024", "tpu7x-4608", "v6e-256"}) {
    CAPTURE(name);
    const auto t = type(name);
    auto links = preflight_links(t, 1);
    REQUIRE(links);
    const size_t n = links->size();
    size_t calls = 0;
    for (size_t a = 0; a < n; ++a) {
      const auto& w = (*links)[a];
      calls += w.calls.size();
      CHECK(w.calls.size() <= 7); // coordinator + 6 neighbours
      for (const auto& l : w.calls) {
        // Every link is checked from both ends, and the callee waits for the caller.
        const auto& back = (*links)[static_cast<size_t>(l.peer)];
        const bool called_back =
            l.label == "coordinator" ||
            std::any_of(back.calls.begin(), back.calls.end(),
                        [&](const auto& x) { return x.peer == static_cast<int>(a); });
        CHECK(called_back);
        CHECK(std::find(back.expects.begin(), back.expects.end(), static_cast<int>(a)) !=
              back.expects.end());
      }
    }
    CHECK(calls <= 7 * n);
    CHECK((*links)[0].expects.size() == n - 1); // every worker reaches the coordinator
  }
  // A wrapped axis: on v4-128's 2x2x4 host grid (chips 4x4x4, every axis wraps) worker 0's z
  // neighbours are 4 (z=1) and 12 (z=3, across the wraparound link); x and y have two hosts: one
  // link each.
  auto v4 = preflight_links(type("v4-128"), 1);
  REQUIRE(v4);
  CHECK(provision::link_label(*v4, 0, 12) == "ICI z");
  CHECK(provision::link_label(*v4, 0, 1) == "ICI x");
  CHECK((*v4)[0].calls.size() == 4);
  CHECK(provision::link_label(*v4, 0, 4) == "ICI z");
}

TEST_CASE("preflight links: multislice adds one DCN peer per other slice") {
  auto links = preflight_links(type("v5litepod-16"), 3);
  REQUIRE(links);
  REQUIRE(links->size() == 12);
  // Worker 1 of slice 0 reaches worker 1 of slices 1 and 2, and its own coordinator (0).
  CHECK(provision::link_label(*links, 1, 5) == "DCN");
  CHECK(provision::link_label(*links, 1, 9) == "DCN");
  CHECK(provision::link_label(*links, 1, 4) == ""); // another slice's coordinator: not called
  CHECK(provision::link_label(*links, 5, 4) == "ICI x, coordinator");
  CHECK((*links)[4].expects == std::vector<int>{0, 5, 6, 7, 8});
  CHECK(!preflight_links(type("v5litepod-16"), 0));
}
