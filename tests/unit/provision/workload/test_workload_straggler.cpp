// Stragglers as pure logic: a worker busy well above its peers' median is flagged, a job whose
// workers are alike is not, on a loaded machine either.
#include <doctest/doctest.h>

#include "provision/workload/workload_straggler.hpp"

using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

TEST_CASE("provision::find_stragglers flags the worker the others wait for, with its evidence") {
  // 120 samples each (a minute, twice a second): worker 2 busy 90%, the others about 30%.
  auto found = find_stragglers({{120, 36}, {120, 40}, {120, 108}, {120, 33}}, 60'000);
  REQUIRE(found.size() == 1);
  CHECK(found[0].worker == 2);
  CHECK(found[0].share == doctest::Approx(0.9));
  CHECK(found[0].peers == doctest::Approx(36.0 / 120));
  CHECK(found[0].score < 0.7);
  CHECK(found[0].evidence == "busy 90% of the last 1m (its peers 30%): score 0.33 < 0.70");
}

TEST_CASE("provision::find_stragglers flags nothing when the workers are alike, however busy") {
  CHECK(find_stragglers({{120, 30}, {120, 40}, {120, 50}, {120, 35}}, 60'000).empty());
  // A machine loaded as a whole: every worker busier, alike.
  CHECK(find_stragglers({{120, 100}, {120, 110}, {120, 115}, {120, 105}}, 60'000).empty());
  // Not enough samples, or only two workers to compare: nothing decided.
  CHECK(find_stragglers({{5, 5}, {120, 30}, {120, 30}, {120, 30}}, 60'000).empty());
  CHECK(find_stragglers({{120, 110}, {120, 10}}, 60'000).empty());
  // Far above its peers in share but they are busy too: the score rule holds it back.
  CHECK(find_stragglers({{120, 120}, {120, 90}, {120, 92}, {120, 88}}, 60'000).empty());
}
