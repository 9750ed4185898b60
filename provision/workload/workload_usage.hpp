// Usage over a window, per project and owner: the chip-hours requests held (queue/usage.hpp) and
// the goodput of workloads, both from the store's events, so a report for last week needs no
// record that still exists.
//
// A workload's time in the window, replayed from its state events (each names the state it left
// and the one it entered): its wall time is every moment it existed and had not ended (SUCCEEDED
// or FAILED), clipped to the window; its running time the moments it was RUNNING. An attempt
// that ends without finishing (a restart, a recovery, an eviction, a failure) turns its running
// time into lost time, as the monitor's own accounting does (workload_goodput.hpp); one that
// succeeds, is deleted, or is still running at the window's end keeps it. goodput = running /
// wall, summed over a group's workloads. A workload whose oldest retained event is not its
// creation (older ones are past the log's retention) is counted from the window's start in the
// state that event left.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "provision/queue/usage.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

struct WorkloadUsage {
  std::string pool;
  std::string name;
  std::string owner;
  std::string project;
  int64_t wall_ms = 0;    // existing and not ended, within the window
  int64_t running_ms = 0; // RUNNING in attempts that finished, or still run
  int64_t lost_ms = 0;    // RUNNING in attempts that did not finish
};

// Every workload with wall time in [from_ms, to_ms), from `events` (oldest first, every kind:
// others are skipped). Ordered by pool, then name.
std::vector<WorkloadUsage> workload_usage(const std::vector<state::Event>& events, int64_t from_ms,
                                          int64_t to_ms);

// How `tpuctl usage` groups its rows.
enum class UsageGroup { owner, project, project_owner };
// "owner", "project", "project,owner" (or "owner,project"). Errors: usage naming the value.
Expected<UsageGroup> parse_usage_group(const std::string& text);

struct UsageSummary {
  std::string project; // "" when grouped by owner alone
  std::string owner;   // "" when grouped by project alone
  int requests = 0;
  int64_t chip_ms = 0;
  int workloads = 0;
  int64_t wall_ms = 0;
  int64_t running_ms = 0;
  int64_t lost_ms = 0;
  double chip_hours() const { return static_cast<double>(chip_ms) / 3600000.0; }
  double goodput() const {
    return wall_ms > 0 ? static_cast<double>(running_ms) / static_cast<double>(wall_ms) : 0.0;
  }
};

// The requests' and workloads' usage summed per group, ordered by its keys; with `project`
// (not empty), that project's only (a row per owner then names it too).
std::vector<UsageSummary> summarize_usage(const std::vector<RequestUsage>& requests,
                                          const std::vector<WorkloadUsage>& workloads,
                                          UsageGroup group, const std::string& project = "");

} // namespace tpuctl::provision
