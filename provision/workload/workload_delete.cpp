// Deleting a workload: who stops its processes, and how the delete knows they are gone.
//
// A RUNNING workload's monitor holds a stream to every worker (workload_watch.hpp). Opening a
// new session to every host to stop them would cost the delete one full SSH round (at 256
// workers on one box, about 3 s of key exchanges) and race with the monitor's own teardown; the
// streams are already there. So the delete marks the record and leaves the monitor its lease:
//
//   delete                          store record                 monitor
//   mark deleting (lease kept) ---> deleting, monitor=lease ---> wakes on the change (its wait
//                                                                between turns), visits
//                              <--- monitor.stopping=true   <--- says it is at it
//                                                                stop line on every stream:
//                                                                TERM, grace, KILL, rm files
//                              <--- monitor={stopped:[...]} <--- hands the lease back
//   stops the workers not in the list with one session per host (a local pool's hosts: one
//   session for them all), removes the record.
//
// The delete waits for the "stopping" answer for a turn plus 30 s (not at all from a monitor of
// this machine that is SIGSTOPped), and for the list for the grace plus 30 s; a monitor that
// dies lets go of its lease by dying (lease_alive), so a dead, stopped or overloaded monitor
// costs the delete that bound at most, never the workload's processes.
// A monitor that may be starting processes (a restart, a recovery: the record says so) is not
// trusted with the stop: it ends at its next visit (one on this host is terminated and waited
// for) and the delete stops everything itself. Every exit of a monitor releases a lease a
// delete left it (release_to_delete), whatever ended it.
#include "provision/workload/workload_delete.hpp"

#include <algorithm>
#include <set>
#include <signal.h>
#include <thread>

#include <spdlog/spdlog.h>

#include "provision/queue/reconcile.hpp"
#include "provision/workload/workload_admit.hpp"
#include "provision/workload/workload_remote.hpp"
#include "provision/workload/workload_steps.hpp"
#include "remote/fanout.hpp"
#include "util/process_tree.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

using Ms = std::chrono::milliseconds;

namespace {

// A detached monitor waits for a finished workload's TTL only when it expires within this.
constexpr int64_t k_linger_ms = 3600 * 1000;

// A delete that found this monitor watching left it the lease (delete_workload): sets what
// `change` sets in the lease's place, while the record is being deleted and the lease is still
// this process's; nothing otherwise.
Status answer_delete(state::StateStore& store, const std::string& pool, const std::string& name,
                     const std::function<void(nlohmann::json& monitor)>& change) {
  auto answered = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(auto found, s.find(workload_key(pool, name)));
    if (!found) {
      return std::vector<state::Op>{};
    }
    TPUCTL_TRY_ASSIGN(Workload w, workload_from_record(*found));
    auto lease = lease_from_json(w.monitor);
    if (!w.deleting || !lease || !is_own_lease(*lease)) {
      return std::vector<state::Op>{};
    }
    change(w.monitor);
    return std::vector<state::Op>{state::UpdateOp{workload_key(pool, name), to_json(w), w.version}};
  });
  return answered ? tpuctl::ok() : Status(answered.error());
}

// The workers the monitor that kept its lease stopped through its streams (stop_for_delete), as
// it says when it hands the lease back; none when it died first or took too long (its grace, its
// answers, a visit to the store: bounded), which the delete then stops itself.
std::vector<size_t> wait_for_monitor_stop(state::StateStore& store, const std::string& pool,
                                          const std::string& name, const Lease& monitor,
                                          std::chrono::milliseconds grace,
                                          const MonitorOptions& o) {
  // It notices the mark within a turn (a turn's checks of suspects take up to 5 s) and says it
  // is stopping; from then on its answer comes within the stop's grace and its waits. The bounds
  // are generous (a loaded machine delays everything); a monitor on this machine that is
  // stopped (SIGSTOP) cannot answer at all and is not waited for.
  const auto start = std::chrono::steady_clock::now();
  const auto notice_by = start + o.poll_interval + std::chrono::seconds(30);
  const auto answer_by = start + o.poll_interval + grace + std::chrono::seconds(30);
  int64_t revision = 0;
  for (auto now = start; now < answer_by; now = std::chrono::steady_clock::now()) {
    auto found = store.find(workload_key(pool, name));
    if (!found || !*found) {
      return {};
    }
    auto w = workload_from_record(**found);
    if (!w) {
      return {};
    }
    if (w->monitor.is_object() && w->monitor.contains("stopped")) {
      std::vector<size_t> stopped;
      for (const auto& i : w->monitor["stopped"]) {
        if (i.is_number_unsigned()) {
          stopped.push_back(i.get<size_t>());
        }
      }
      return stopped;
    }
    auto lease = lease_from_json(w->monitor);
    if (!lease || lease->host != monitor.host || lease->pid != monitor.pid ||
        !lease_alive(*lease, now_of(o))) {
      return {}; // it ended without an answer
    }
    const bool stopped_here =
        monitor.host == own_lease(0, Ms(0)).host && util::process_stopped(monitor.pid);
    if (!w->monitor.value("stopping", false) && (now >= notice_by || stopped_here)) {
      spdlog::warn("workload '{}': its monitor (pid {} on {}) did not answer the delete; "
                   "stopping the workers through new sessions",
                   name, monitor.pid, monitor.host);
      return {};
    }
    auto next = store.wait_for_change(pool, revision, Ms(500));
    revision = next ? *next : revision;
  }
  spdlog::warn("workload '{}': its monitor did not say in time which workers it stopped; "
               "stopping them through new sessions",
               name);
  return {};
}

} // namespace

Status release_to_delete(state::StateStore& store, const std::string& pool, const std::string& name,
                         const std::vector<size_t>& stopped) {
  return answer_delete(store, pool, name, [&](nlohmann::json& monitor) {
    monitor = {{"stopped", stopped}};
  });
}

Expected<std::optional<Workload>> stop_for_delete(state::StateStore& store, const Workload& wl,
                                                  WorkerWatch& watch, const MonitorOptions& o) {
  say(o, "deleting: stopping " + util::counted(wl.workers.size(), "worker") +
             " through their streams");
  // Tell the delete this monitor is at it (it waits for the answer only so long otherwise).
  TPUCTL_TRY(answer_delete(store, wl.pool, wl.name,
                           [](nlohmann::json& monitor) { monitor["stopping"] = true; }));
  const auto confirmed = watch.stop(grace_of(wl), workload_tag(wl), true);
  std::vector<size_t> stopped;
  for (size_t i = 0; i < confirmed.size(); ++i) {
    if (confirmed[i]) {
      stopped.push_back(i);
    }
  }
  TPUCTL_TRY(release_to_delete(store, wl.pool, wl.name, stopped));
  return std::optional<Workload>(wl);
}

Expected<WorkloadDeletion> delete_workload(state::StateStore& store, const std::string& pool,
                                           const std::string& name, bool force,
                                           const MonitorOptions& o) {
  TPUCTL_TRY_ASSIGN(Workload before, load_workload(store, pool, name));
  std::optional<Lease> monitor;
  bool launching = false;
  bool delegated = false;
  auto marked = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(Workload w, load_workload(s, pool, name));
    monitor = lease_from_json(w.monitor);
    // A monitor starts processes only while the record says so (a restart's PENDING workers, a
    // recovery): then its launch must end before the stop, else the stop need not wait for it.
    launching = w.state != WorkloadState::running ||
                std::any_of(w.workers.begin(), w.workers.end(), [](const WorkloadWorker& x) {
                  return x.state == WorkerState::pending;
                });
    // A live monitor of a running workload holds a stream to every worker: it stops them (no
    // new session per host) and keeps its lease until it says which it stopped.
    delegated = !launching && w.state == WorkloadState::running && monitor &&
                !is_own_lease(*monitor) && lease_alive(*monitor, now_of(o));
    w.deleting = true;
    if (!delegated) {
      w.monitor = to_json(own_lease(now_of(o), o.lease_ttl));
    }
    return std::vector<state::Op>{state::UpdateOp{workload_key(pool, name), to_json(w), w.version}};
  });
  if (!marked) {
    return marked.error();
  }
  // A monitor that may be starting processes (on this machine) is stopped first and waited for,
  // so that the stop below comes after its launch. Any other monitor notices the mark at its next
  // visit to the store and ends by itself, once the stop below has begun: its streams' teardown
  // does not compete with the stop (on a local pool they share the machine).
  if (launching && monitor && !is_own_lease(*monitor) && lease_alive(*monitor, now_of(o)) &&
      monitor->host == own_lease(0, Ms(0)).host) {
    ::kill(monitor->pid, SIGTERM);
    for (int i = 0; i < 60 && lease_alive(*monitor, now_of(o)); ++i) {
      std::this_thread::sleep_for(Ms(50));
    }
  }
  std::vector<bool> stopped_by_monitor(before.workers.size(), false);
  if (delegated) {
    for (size_t i : wait_for_monitor_stop(store, pool, name, *monitor, grace_of(before), o)) {
      if (i < stopped_by_monitor.size()) {
        stopped_by_monitor[i] = true;
      }
    }
  }
  WorkloadDeletion result{before, {}, 0};
  result.stopped_by_monitor =
      static_cast<size_t>(std::count(stopped_by_monitor.begin(), stopped_by_monitor.end(), true));
  // Where it may have left processes or files: the slices it holds; every slice of its cluster
  // when its script dir went to all of them, or an eviction moved it. A workload that never
  // left the queue has nothing anywhere.
  Workload where = before;
  if (before.container.app || before.evictions > 0) {
    where.slices.clear();
    where.slice_nodes.clear();
  }
  const bool never_ran = before.state == WorkloadState::queued && !before.container.app &&
                         before.evictions == 0 && before.workers.empty();
  auto plans = never_ran ? Expected<std::vector<WorkerPlan>>(std::vector<WorkerPlan>{})
                         : plan_workload(store, where);
  if (plans) {
    // What the monitor did not confirm: one session per host, stop, then remove the files there.
    std::set<std::pair<std::string, int>> confirmed;
    for (size_t i = 0; i < before.workers.size(); ++i) {
      if (stopped_by_monitor[i]) {
        confirmed.insert({before.workers[i].node, before.workers[i].worker});
      }
    }
    std::vector<WorkerPlan> left;
    for (const auto& p : *plans) {
      if (confirmed.count({p.node, p.worker}) == 0) {
        left.push_back(p);
      }
    }
    std::vector<remote::HostResult> stopped;
    if (!left.empty()) {
      TPUCTL_TRY_ASSIGN(stopped, stop_workers(before, left, o.ssh, true));
    }
    for (const auto& r : stopped) {
      if (!r.succeeded()) {
        result.unreachable.push_back(
            r.host + " (" +
            (r.error.empty() ? std::string(remote::to_string(r.outcome)) : r.error) + ")");
      }
    }
  } else {
    spdlog::warn("workload '{}': {}; its processes went with its slices", name,
                 plans.error().message);
  }
  if (!result.unreachable.empty() && !force) {
    return Error(ErrorKind::failure,
                 "workload '" + name + "' could not be stopped on " +
                     util::join(result.unreachable, ", ") +
                     ": it stays marked for deletion; run 'tpuctl workload delete " + name +
                     "' again once the hosts are back, or add --force to forget it");
  }
  const int64_t now = now_of(o);
  auto removed =
      store.commit({state::RemoveOp{workload_key(pool, name), state::k_any_version},
                    state_event(before, before.state, before.state, now, "DELETED", "deleted")});
  if (!removed && !state::has_reason(removed.error(), state::reason::k_not_found)) {
    return removed.error();
  }
  admit_quietly(store, before, o); // its slices are free: the next in the queue gets them now
  return result;
}

bool ttl_expired(const Workload& wl, int64_t now_ms) {
  return is_terminal(wl.state) && !wl.deleting && wl.ttl_after_finished_ms >= 0 &&
         wl.finished_at_ms > 0 && now_ms >= wl.finished_at_ms + wl.ttl_after_finished_ms;
}

Status delete_after_ttl(state::StateStore& store, const std::string& pool, const std::string& name,
                        const MonitorOptions& o, const remote::CancelToken* cancel) {
  while (!(cancel && cancel->cancelled())) {
    auto found = store.find(workload_key(pool, name));
    if (!found) {
      return found.error();
    }
    if (!*found) {
      return tpuctl::ok(); // deleted meanwhile
    }
    TPUCTL_TRY_ASSIGN(Workload wl, workload_from_record(**found));
    if (!is_terminal(wl.state) || wl.deleting || wl.ttl_after_finished_ms < 0) {
      return tpuctl::ok();
    }
    const int64_t now = now_of(o);
    if (ttl_expired(wl, now)) {
      say(o, "deleting workload '" + name + "': its --ttl-seconds-after-finished passed");
      auto deleted = delete_workload(store, pool, name, false, o);
      if (!deleted && deleted.error().kind != ErrorKind::not_found) {
        return deleted.error();
      }
      return tpuctl::ok();
    }
    const int64_t left = wl.finished_at_ms + wl.ttl_after_finished_ms - now;
    if (left > k_linger_ms) {
      return tpuctl::ok(); // not worth a sleeping process: the next workload command deletes it
    }
    sleep_for(Ms(std::clamp<int64_t>(left, 50, 30000)), cancel);
  }
  return tpuctl::ok();
}

} // namespace tpuctl::provision
