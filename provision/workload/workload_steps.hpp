// The steps workload commands and the monitor share (internal to provision/): reading, changing
// and writing a workload record with compare-and-swap, its events, ending it, and starting an
// attempt on every worker.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "provision/workload/workload.hpp"
#include "provision/workload/workload_ops.hpp"
#include "provision/workload/workload_remote.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

class WorkerWatch;

int64_t now_of(const MonitorOptions& o);
void say(const MonitorOptions& o, const std::string& line);
// Sleeps `duration` in slices of 50 ms, returning early when `cancel` fires.
void sleep_for(std::chrono::milliseconds duration, const remote::CancelToken* cancel);

// A workload event (initiator SERVICE) with the message and the restart count in its detail.
state::Op state_event(const Workload& wl, WorkloadState from, WorkloadState to, int64_t now,
                      const std::string& type, const std::string& message);

// Why mutate() did not write.
enum class Skip { none, gone, deleting, not_ours, evicting };

struct Mutation {
  std::optional<Workload> workload; // the record as written (or as found when skipped)
  Skip skipped = Skip::none;
};
// The record after `m`: nullopt when it is gone.
inline std::optional<Workload> gone_or(const Mutation& m) {
  return m.skipped == Skip::gone ? std::nullopt : m.workload;
}

// Re-reads the workload and applies `change` to it, committing with compare-and-swap (retried on
// conflict). Skips (writes nothing) when the record is gone, being deleted, EVICTING (unless
// `evicting_ok`: the eviction's own steps), or, with `need_lease`, when this process no longer
// holds the monitor lease. `change` returns the
// events (or other ops) to commit with it, or nullopt to write nothing; it may run more than
// once.
using ChangeFn = std::function<std::optional<std::vector<state::Op>>(Workload&)>;
Expected<Mutation> mutate(state::StateStore& store, const std::string& pool,
                          const std::string& name, bool need_lease, const ChangeFn& change,
                          bool evicting_ok = false);

// Ends the workload: SUCCEEDED or FAILED with `message`, workers still running or pending
// STOPPED (FAILED), the monitor's lease dropped, its slices no longer held, the time accounted (a
// failed attempt's running time is lost). Returns the STATE_CHANGED event.
std::optional<std::vector<state::Op>> finish(Workload& wl, WorkloadState to,
                                             const std::string& message, int64_t now);

// Starts the workload's current attempt everywhere: through the monitor's streams (`watch`, when
// given, retargeted to `plans` already) for the workers whose agent takes a start line, with new
// sessions for the rest. On a failure stops whatever started and returns the message naming the
// workers (their indices in `failed`); "" when every worker started.
Expected<std::string> start_attempt(const Workload& wl, const std::vector<WorkerPlan>& plans,
                                    std::vector<size_t>& failed, const MonitorOptions& o,
                                    WorkerWatch* watch = nullptr);

// Stops every worker of the attempt (a fail policy, a restart, an eviction): through the
// monitor's streams first (`watch`, when given; they stay open), then with new sessions the
// workers that did not confirm, except LOST ones: their host did not answer a new session a
// moment ago, and another would only wait for its timeout (a repair drains the host; a delete
// tries it again).
// `grace` is the wait between TERM and KILL through the streams (the workload's -tgps unless
// given: failure_grace_of when a peer is already gone).
void stop_attempt(const Workload& workload, const std::vector<WorkerPlan>& plans,
                  WorkerWatch* watch, const MonitorOptions& options,
                  std::optional<std::chrono::milliseconds> grace = std::nullopt);

} // namespace tpuctl::provision
