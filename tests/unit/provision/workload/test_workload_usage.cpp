// Workload goodput over a window from the event log (pure), and usage summed per project and
// owner: running time of finished or still running attempts over the wall time, lost time for
// attempts thrown away, everything clipped to the window.
#include <doctest/doctest.h>

#include "provision/workload/workload_usage.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

namespace {

state::Event wl_event(const std::string& name, int64_t at, const std::string& type,
                      const std::string& from, const std::string& to,
                      const std::string& project = "ml", const std::string& owner = "alice") {
  state::Event e;
  e.pool = "p";
  e.subject_kind = state::Kind::workload;
  e.subject = name;
  e.time_ms = at;
  e.type = type;
  e.from_state = from;
  e.to_state = to;
  e.actor = owner;
  e.detail = {{"owner", owner}, {"project", project}};
  return e;
}

} // namespace

TEST_CASE("workload usage: a run that succeeds is all goodput after its queue time; a restarted "
          "attempt's running time is lost") {
  std::vector<state::Event> log = {
      wl_event("w", 0, "CREATED", "QUEUED", "QUEUED"),
      wl_event("w", 1000, "ADMITTED", "QUEUED", "PENDING"),
      wl_event("w", 2000, "STATE_CHANGED", "PENDING", "RUNNING"),
      wl_event("w", 5000, "RESTARTED", "RUNNING", "RUNNING"), // 3 s thrown away
      wl_event("w", 9000, "STATE_CHANGED", "RUNNING", "SUCCEEDED"),
      wl_event("w", 20000, "DELETED", "SUCCEEDED", "SUCCEEDED"),
  };
  auto u = workload_usage(log, 0, 30000);
  REQUIRE(u.size() == 1);
  CHECK(u[0].owner == "alice");
  CHECK(u[0].project == "ml");
  CHECK(u[0].wall_ms == 9000); // it ended at 9 s
  CHECK(u[0].running_ms == 4000);
  CHECK(u[0].lost_ms == 3000);
  // A window that cuts the run: [3 s, 7 s) holds 2 s lost, then 2 s of the attempt that
  // finished later.
  auto cut = workload_usage(log, 3000, 7000);
  REQUIRE(cut.size() == 1);
  CHECK(cut[0].wall_ms == 4000);
  CHECK(cut[0].lost_ms == 2000);
  CHECK(cut[0].running_ms == 2000);
}

TEST_CASE("workload usage: a recovery or eviction loses the attempt; one still running at the "
          "window's end keeps it; one ended before the window is no row") {
  std::vector<state::Event> log = {
      wl_event("a", 0, "CREATED", "QUEUED", "QUEUED"),
      wl_event("a", 0, "STATE_CHANGED", "QUEUED", "RUNNING"),
      wl_event("a", 4000, "WORKER_LOST", "RUNNING", "RECOVERING"),
      wl_event("a", 6000, "RECOVERED", "RECOVERING", "RUNNING"),
      wl_event("b", 0, "CREATED", "QUEUED", "QUEUED", "infra", "bob"),
      wl_event("b", 1000, "STATE_CHANGED", "QUEUED", "RUNNING", "infra", "bob"),
      wl_event("b", 3000, "EVICTED", "RUNNING", "EVICTING", "infra", "bob"),
      wl_event("b", 3500, "REQUEUED", "EVICTING", "QUEUED", "infra", "bob"),
      wl_event("c", 0, "CREATED", "QUEUED", "QUEUED"),
      wl_event("c", 100, "STATE_CHANGED", "QUEUED", "FAILED"),
  };
  auto u = workload_usage(log, 1000, 10000);
  REQUIRE(u.size() == 2);
  CHECK(u[0].name == "a");
  CHECK(u[0].wall_ms == 9000);
  CHECK(u[0].lost_ms == 3000);    // [1 s, 4 s)
  CHECK(u[0].running_ms == 4000); // [6 s, 10 s), still running
  CHECK(u[1].name == "b");
  CHECK(u[1].wall_ms == 9000); // queued again, not ended
  CHECK(u[1].lost_ms == 2000);
  CHECK(u[1].running_ms == 0);

  auto by_project = summarize_usage({}, u, UsageGroup::project);
  REQUIRE(by_project.size() == 2);
  CHECK(by_project[0].project == "infra");
  CHECK(by_project[0].owner.empty());
  CHECK(by_project[0].goodput() == doctest::Approx(0.0));
  CHECK(by_project[1].project == "ml");
  CHECK(by_project[1].goodput() == doctest::Approx(4000.0 / 9000.0));
}

TEST_CASE("workload usage: requests and workloads sum per project and owner, per project or per "
          "owner; --by takes those and nothing else") {
  RequestUsage r1{"p", "q1", "alice", "ml", 8, 1000, 8000};
  RequestUsage r2{"p", "q2", "bob", "ml", 4, 1000, 4000};
  RequestUsage r3{"p", "q3", "alice", "infra", 4, 500, 2000};
  WorkloadUsage w{"p", "w", "alice", "ml", 1000, 500, 0};
  auto both = summarize_usage({r1, r2, r3}, {w}, UsageGroup::project_owner);
  REQUIRE(both.size() == 3);
  CHECK(both[0].project == "infra");
  CHECK(both[1].project == "ml");
  CHECK(both[1].owner == "alice");
  CHECK(both[1].chip_ms == 8000);
  CHECK(both[1].workloads == 1);
  CHECK(both[1].goodput() == doctest::Approx(0.5));
  auto owners = summarize_usage({r1, r2, r3}, {w}, UsageGroup::owner);
  REQUIRE(owners.size() == 2);
  CHECK(owners[0].owner == "alice");
  CHECK(owners[0].project.empty());
  CHECK(owners[0].requests == 2);
  CHECK(owners[0].chip_ms == 10000);
  auto projects = summarize_usage({r1, r2, r3}, {w}, UsageGroup::project);
  REQUIRE(projects.size() == 2);
  CHECK(projects[1].project == "ml");
  CHECK(projects[1].requests == 2);
  CHECK(projects[1].chip_ms == 12000);

  CHECK(parse_usage_group("project,owner").value() == UsageGroup::project_owner);
  CHECK(parse_usage_group("owner,project").value() == UsageGroup::project_owner);
  auto bad = parse_usage_group("team");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().kind == ErrorKind::usage);
  CHECK(bad.error().message.find("'team'") != std::string::npos);
}
