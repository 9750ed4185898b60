#include <doctest/doctest.h>

#include "provision/slice/worker_select.hpp"

using tpuctl::provision::parse_worker_selection;

TEST_SUITE_BEGIN("unit");

TEST_CASE("provision::parse_worker_selection follows gcloud's --worker grammar") {
  SUBCASE("all, a single id, lists, ranges and mixes, sorted without duplicates") {
    CHECK(*parse_worker_selection("all", 4) == std::vector<int>{0, 1, 2, 3});
    CHECK(*parse_worker_selection("2", 4) == std::vector<int>{2});
    CHECK(*parse_worker_selection("3,1", 4) == std::vector<int>{1, 3});
    CHECK(*parse_worker_selection("1-3", 4) == std::vector<int>{1, 2, 3});
    CHECK(*parse_worker_selection("0,2-3,2", 4) == std::vector<int>{0, 2, 3});
  }
  SUBCASE("a range must start below its end, as gcloud requires") {
    auto r = parse_worker_selection("2-2", 4);
    REQUIRE(!r);
    CHECK(r.error().kind == tpuctl::ErrorKind::usage);
    CHECK(r.error().message.find("'2-2'") != std::string::npos);
    CHECK(!parse_worker_selection("3-1", 4));
  }
  SUBCASE("all in any case, and empty items skipped, as gcloud reads them") {
    CHECK(*parse_worker_selection("ALL", 3) == std::vector<int>{0, 1, 2});
    CHECK(*parse_worker_selection("All", 2) == std::vector<int>{0, 1});
    CHECK(*parse_worker_selection("1,,3,", 4) == std::vector<int>{1, 3});
  }
  SUBCASE("workers outside the slice and malformed items are usage errors naming the value") {
    auto out = parse_worker_selection("4", 4);
    REQUIRE(!out);
    CHECK(out.error().message.find("there are workers 0-3") != std::string::npos);
    CHECK(parse_worker_selection("1", 1).error().message.find("there is only worker 0") !=
          std::string::npos);
    CHECK(!parse_worker_selection("1-4", 4));
    for (const char* bad : {"", "x", ",", "-1", "1-", "a-b", "al", "1;rm -rf /", "1 2"}) {
      CAPTURE(bad);
      auto r = parse_worker_selection(bad, 4);
      REQUIRE(!r);
      CHECK(r.error().kind == tpuctl::ErrorKind::usage);
    }
  }
}
