#include "provision/workload/workload_goodput.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace tpuctl::provision {

namespace {

constexpr std::array<std::string_view, 6> k_names{"",           "provisioning", "queued",
                                                  "recovering", "running",      "evicted"};

int64_t* bucket(WorkloadTime& t, TimePhase phase) {
  switch (phase) {
  case TimePhase::provisioning:
    return &t.provisioning_ms;
  case TimePhase::queued:
    return &t.queued_ms;
  case TimePhase::recovering:
    return &t.recovering_ms;
  case TimePhase::running:
    return &t.running_ms;
  case TimePhase::evicted:
    return &t.evicted_ms;
  case TimePhase::none:
    break;
  }
  return nullptr;
}

TimePhase phase_from(std::string_view text) {
  for (size_t i = 0; i < k_names.size(); ++i) {
    if (k_names[i] == text) {
      return static_cast<TimePhase>(i);
    }
  }
  return TimePhase::none;
}

double ratio(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

} // namespace

std::string_view to_string(TimePhase phase) {
  return k_names[static_cast<size_t>(phase)];
}

void enter(WorkloadTime& t, TimePhase next, int64_t now_ms) {
  if (int64_t* total = bucket(t, t.phase); total != nullptr) {
    *total += std::max<int64_t>(0, now_ms - t.phase_since_ms);
  }
  t.phase = next;
  t.phase_since_ms = now_ms;
}

void lose_attempt(WorkloadTime& t) {
  t.lost_ms += t.running_ms;
  t.running_ms = 0;
}

Goodput goodput_of(const WorkloadTime& time, int64_t created_ms, int64_t end_ms) {
  WorkloadTime t = time;
  if (t.phase != TimePhase::none) {
    enter(t, TimePhase::none, std::max(end_ms, t.phase_since_ms));
  }
  Goodput g;
  g.provisioning_ms = t.provisioning_ms;
  g.queued_ms = t.queued_ms;
  g.recovering_ms = t.recovering_ms;
  g.running_ms = t.running_ms;
  g.lost_ms = t.lost_ms;
  g.evicted_ms = t.evicted_ms;
  g.wall_ms = created_ms > 0 ? std::max<int64_t>(0, end_ms - created_ms) : 0;
  // Phases are measured on the monitor's clock from the workload's creation on: their sum is
  // the wall time, unless a monitor was missing for a while (that time is in no phase).
  g.wall_ms = std::max(g.wall_ms, g.provisioning_ms + g.queued_ms + g.recovering_ms + g.running_ms +
                                      g.lost_ms + g.evicted_ms);
  g.goodput = ratio(g.running_ms, g.wall_ms);
  return g;
}

Goodput& operator+=(Goodput& total, const Goodput& one) {
  total.wall_ms += one.wall_ms;
  total.provisioning_ms += one.provisioning_ms;
  total.queued_ms += one.queued_ms;
  total.recovering_ms += one.recovering_ms;
  total.running_ms += one.running_ms;
  total.lost_ms += one.lost_ms;
  total.evicted_ms += one.evicted_ms;
  total.goodput = ratio(total.running_ms, total.wall_ms);
  return total;
}

nlohmann::json to_json(const WorkloadTime& t) {
  return nlohmann::json{{"provisioning_ms", t.provisioning_ms},
                        {"queued_ms", t.queued_ms},
                        {"recovering_ms", t.recovering_ms},
                        {"running_ms", t.running_ms},
                        {"lost_ms", t.lost_ms},
                        {"evicted_ms", t.evicted_ms},
                        {"phase", std::string(to_string(t.phase))},
                        {"phase_since_ms", t.phase_since_ms}};
}

WorkloadTime workload_time_from_json(const nlohmann::json& doc) {
  WorkloadTime t;
  if (!doc.is_object()) {
    return t;
  }
  t.provisioning_ms = doc.value("provisioning_ms", int64_t{0});
  t.queued_ms = doc.value("queued_ms", int64_t{0});
  t.recovering_ms = doc.value("recovering_ms", int64_t{0});
  t.running_ms = doc.value("running_ms", int64_t{0});
  t.lost_ms = doc.value("lost_ms", int64_t{0});
  t.evicted_ms = doc.value("evicted_ms", int64_t{0});
  t.phase = phase_from(doc.value("phase", ""));
  t.phase_since_ms = doc.value("phase_since_ms", int64_t{0});
  return t;
}

nlohmann::json to_json(const Goodput& g) {
  return nlohmann::json{
      {"wall_ms", g.wall_ms},       {"provisioning_ms", g.provisioning_ms},
      {"queued_ms", g.queued_ms},   {"recovering_ms", g.recovering_ms},
      {"running_ms", g.running_ms}, {"lost_ms", g.lost_ms},
      {"evicted_ms", g.evicted_ms}, {"goodput", std::round(g.goodput * 10000.0) / 10000.0}};
}

} // namespace tpuctl::provision
