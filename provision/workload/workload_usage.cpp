#include "provision/workload/workload_usage.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "provision/pool/projects.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

bool ended(const std::string& state) {
  return state == "SUCCEEDED" || state == "FAILED";
}

struct Replay {
  WorkloadUsage usage;
  std::string state;
  int64_t since = 0;
  bool open = false;      // existing and not ended since `since`
  int64_t attempt_ms = 0; // RUNNING in the current attempt, within the window
  bool seen = false;
};

// Counts [since, at) in the current state, clipped to the window.
void close(Replay& w, int64_t at, int64_t from_ms, int64_t to_ms) {
  if (!w.open) {
    return;
  }
  const int64_t start = std::max(w.since, from_ms);
  const int64_t end = std::min(at, to_ms);
  if (end > start) {
    w.usage.wall_ms += end - start;
    if (w.state == "RUNNING") {
      w.attempt_ms += end - start;
    }
  }
  w.since = at;
}

} // namespace

std::vector<WorkloadUsage> workload_usage(const std::vector<state::Event>& events, int64_t from_ms,
                                          int64_t to_ms) {
  std::map<std::pair<std::string, std::string>, Replay> all;
  for (const auto& e : events) {
    if (e.subject_kind != state::Kind::workload || e.time_ms >= to_ms) {
      continue;
    }
    Replay& w = all[{e.pool, e.subject}];
    w.usage.pool = e.pool;
    w.usage.name = e.subject;
    if (e.detail.is_object()) {
      if (auto o = e.detail.find("owner"); o != e.detail.end() && o->is_string()) {
        w.usage.owner = o->get<std::string>();
      }
      if (auto p = e.detail.find("project"); p != e.detail.end() && p->is_string()) {
        w.usage.project = p->get<std::string>();
      }
    }
    if (!w.seen) {
      w.seen = true;
      if (e.type == "CREATED") {
        w.usage.owner = w.usage.owner.empty() ? e.actor : w.usage.owner;
      } else { // its creation is past the log's retention: in that state since before
        w.state = e.from_state;
        w.since = from_ms;
        w.open = !ended(w.state);
      }
    }
    close(w, e.time_ms, from_ms, to_ms);
    const bool restarted = e.type == "RESTARTED";
    const bool leaves_running = w.state == "RUNNING" && e.to_state != "RUNNING";
    if (restarted || leaves_running || e.type == "DELETED") {
      // The attempt ends: finished (success, a delete) or thrown away (anything else).
      const bool kept = !restarted && (e.to_state == "SUCCEEDED" || e.type == "DELETED");
      (kept ? w.usage.running_ms : w.usage.lost_ms) += w.attempt_ms;
      w.attempt_ms = 0;
    }
    w.state = e.to_state;
    w.since = e.time_ms;
    w.open = e.type != "DELETED" && !ended(w.state);
  }
  std::vector<WorkloadUsage> out;
  for (auto& [key, w] : all) {
    close(w, to_ms, from_ms, to_ms);
    w.usage.running_ms += w.attempt_ms; // still running at the window's end
    if (w.usage.project.empty()) {
      w.usage.project = k_default_project; // made before projects existed
    }
    if (w.usage.wall_ms > 0) {
      out.push_back(w.usage);
    }
  }
  return out;
}

Expected<UsageGroup> parse_usage_group(const std::string& text) {
  if (text == "owner") {
    return UsageGroup::owner;
  }
  if (text == "project") {
    return UsageGroup::project;
  }
  if (text == "project,owner" || text == "owner,project") {
    return UsageGroup::project_owner;
  }
  return Error(ErrorKind::usage, "--by '" + util::printable(text) +
                                     "' is not one of owner, project, project,owner or request");
}

std::vector<UsageSummary> summarize_usage(const std::vector<RequestUsage>& requests,
                                          const std::vector<WorkloadUsage>& workloads,
                                          UsageGroup group, const std::string& only) {
  std::map<std::pair<std::string, std::string>, UsageSummary> rows;
  auto row = [&](const std::string& project, const std::string& owner) -> UsageSummary& {
    const std::string p = group == UsageGroup::owner && only.empty() ? "" : project;
    const std::string o = group == UsageGroup::project ? "" : owner;
    UsageSummary& s = rows[{p, o}];
    s.project = p;
    s.owner = o;
    return s;
  };
  for (const auto& r : requests) {
    if (!only.empty() && r.project != only) {
      continue;
    }
    UsageSummary& s = row(r.project, r.owner);
    s.requests += 1;
    s.chip_ms += r.chip_ms;
  }
  for (const auto& w : workloads) {
    if (!only.empty() && w.project != only) {
      continue;
    }
    UsageSummary& s = row(w.project, w.owner);
    s.workloads += 1;
    s.wall_ms += w.wall_ms;
    s.running_ms += w.running_ms;
    s.lost_ms += w.lost_ms;
  }
  std::vector<UsageSummary> out;
  for (auto& [key, s] : rows) {
    out.push_back(s);
  }
  return out;
}

} // namespace tpuctl::provision
