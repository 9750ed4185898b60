// Where a workload's wall time went, and its goodput.
//
// Every moment since a workload was created counts in exactly one phase:
//   provisioning  its workers being started the first time, and its cluster's slices being
//                 provisioned again after a repair or a preemption (PROVISIONING);
//   queued        waiting in its cluster's queue for free slices before its first run (QUEUED),
//                 and its cluster waiting for capacity after a requeue (WAITING_FOR_RESOURCES);
//   recovering    the rest of a recovery, from a failure noticed to every worker running again:
//                 stopping workers, suspending the broken slice, restarting the attempt;
//   running       the current attempt running on every worker: productive time;
//   evicted       from an eviction (a higher priority took its slices) until it runs again:
//                 its processes' grace, its wait in the queue, its restart (EVICTING, QUEUED);
//   lost          the running time of attempts that did not finish (failed, lost, preempted):
//                 work done and thrown away, as no checkpoint is known to tpuctl.
// goodput = running / wall. These map onto Google's ML goodput terms: scheduling goodput is
// 1 - (queued + provisioning) / wall, runtime goodput running / (running + lost + recovering).
// Pure accounting: the monitor (workload_ops.cpp) calls enter() at each change, on its clock.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tpuctl::provision {

enum class TimePhase { none, provisioning, queued, recovering, running, evicted };
std::string_view to_string(TimePhase phase); // "", "provisioning", "queued", ...

struct WorkloadTime {
  int64_t provisioning_ms = 0;
  int64_t queued_ms = 0;
  int64_t recovering_ms = 0;
  int64_t running_ms = 0; // the current (or final, successful) attempt's
  int64_t lost_ms = 0;
  int64_t evicted_ms = 0;
  TimePhase phase = TimePhase::none; // what the time since phase_since_ms counts as
  int64_t phase_since_ms = 0;
};

// Closes the current phase at `now_ms` (its time added to its total) and opens `next`
// (TimePhase::none: the workload ended). A clock that went back adds nothing.
void enter(WorkloadTime& time, TimePhase next, int64_t now_ms);

// The current attempt ended without finishing: its running time becomes lost.
void lose_attempt(WorkloadTime& time);

struct Goodput {
  int64_t wall_ms = 0;
  int64_t provisioning_ms = 0;
  int64_t queued_ms = 0;
  int64_t recovering_ms = 0;
  int64_t running_ms = 0;
  int64_t lost_ms = 0;
  double goodput = 0; // running / wall, 0 when no time passed
  int64_t evicted_ms = 0;
};

// The totals with the open phase counted up to `end_ms` (now, or when the workload ended), over
// the wall time since `created_ms`.
Goodput goodput_of(const WorkloadTime& time, int64_t created_ms, int64_t end_ms);

// Sums (a cluster's workloads); goodput = the summed running time over the summed wall time.
Goodput& operator+=(Goodput& total, const Goodput& one);

nlohmann::json to_json(const WorkloadTime& time);
WorkloadTime workload_time_from_json(const nlohmann::json& doc); // missing fields: zero
nlohmann::json to_json(const Goodput& goodput);

} // namespace tpuctl::provision
