// Chip-hours from the event log (pure): ACTIVE intervals clipped to the window, times the chips
// held then.
#include <doctest/doctest.h>

#include "provision/queue/usage.hpp"

using namespace tpuctl;
using provision::request_usage;

TEST_SUITE_BEGIN("unit");

namespace {

state::Event ev(const std::string& id, int64_t at, const std::string& type, const std::string& from,
                const std::string& to, int chips) {
  state::Event e;
  e.pool = "p";
  e.subject_kind = state::Kind::queued_resource;
  e.subject = id;
  e.time_ms = at;
  e.type = type;
  e.from_state = from;
  e.to_state = to;
  e.actor = "alice";
  e.detail = {{"chips", chips}, {"owner", "alice"}};
  return e;
}

} // namespace

TEST_CASE("usage: ACTIVE intervals clipped to the window, each times the chips it held") {
  std::vector<state::Event> log = {
      ev("a", 500, "CREATED", "ACCEPTED", "ACCEPTED", 8),
      ev("a", 1000, "STATE_CHANGED", "PROVISIONING", "ACTIVE", 8),
      ev("a", 5000, "STATE_CHANGED", "ACTIVE", "SUSPENDING", 8),
      ev("a", 7000, "STATE_CHANGED", "PROVISIONING", "ACTIVE", 4), // a node fewer
      ev("a", 9000, "DELETED", "ACTIVE", "DELETING", 4),
  };
  auto u = request_usage(log, {}, 2000, 8000);
  REQUIRE(u.size() == 1);
  CHECK(u[0].owner == "alice");
  CHECK(u[0].active_ms == 3000 + 1000);
  CHECK(u[0].chip_ms == 3000 * 8 + 1000 * 4);
  // The whole life in a wide window.
  auto whole = request_usage(log, {}, 0, 100000);
  CHECK(whole[0].active_ms == 4000 + 2000);
}

TEST_CASE("usage: still ACTIVE counts to the window's end; ACTIVE before the log's oldest "
          "retained event counts from the window's start; never ACTIVE is no row") {
  std::vector<state::Event> log = {
      ev("old", 3000, "STATE_CHANGED", "ACTIVE", "SUSPENDING", 4), // its ACTIVE start is gone
      ev("now", 4000, "STATE_CHANGED", "PROVISIONING", "ACTIVE", 4),
      ev("never", 4000, "STATE_CHANGED", "ACCEPTED", "WAITING_FOR_RESOURCES", 4),
  };
  auto u = request_usage(log, {}, 1000, 6000);
  REQUIRE(u.size() == 2);
  CHECK(u[0].id == "now");
  CHECK(u[0].active_ms == 2000);
  CHECK(u[1].id == "old");
  CHECK(u[1].active_ms == 2000);
}

TEST_SUITE_END();
