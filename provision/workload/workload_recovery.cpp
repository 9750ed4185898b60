#include "provision/workload/workload_recovery.hpp"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "provision/pool/pools.hpp"
#include "provision/queue/reconcile.hpp"
#include "provision/slice/node_repair.hpp"
#include "provision/workload/cluster.hpp"
#include "provision/workload/workload_hotswap.hpp"
#include "provision/workload/workload_steps.hpp"
#include "provision/workload/workload_watch.hpp"
#include "util/failpoint.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::provision {

namespace {

using Json = nlohmann::json;

std::string state_text(const QueuedResource& qr) {
  std::string s = "queued resource '" + qr.id + "' is " + std::string(to_string(qr.state));
  if (!qr.history.empty() && !qr.history.back().reason.empty()) {
    s += " (" + qr.history.back().reason + ")";
  }
  return s;
}

// Drains the hosts of the repair that are not drained yet (an operator's reason is kept).
Status drain_lost(state::StateStore& store, const Workload& wl,
                  const std::vector<std::string>& hosts, const std::string& reason) {
  TPUCTL_TRY_ASSIGN(PoolView view, load_pool(store, wl.pool));
  std::vector<std::string> todo;
  for (const auto& h : view.hosts) {
    if (h.drain_reason.empty() && std::find(hosts.begin(), hosts.end(), h.name) != hosts.end()) {
      todo.push_back(h.name);
    }
  }
  if (todo.empty()) {
    return tpuctl::ok();
  }
  auto drained = set_drain(store, wl.pool, todo, reason, state::Initiator::service);
  return drained ? tpuctl::ok() : Status(drained.error());
}

// Marks the request to come back: an ACTIVE (or PROVISIONING) one starts SUSPENDING (SERVICE)
// with the requeue mark; one already on its way down gets the mark. Nothing when it is already
// queued again or gone.
Status suspend_for_repair(state::StateStore& store, const Workload& wl, const std::string& why,
                          int64_t now_ms) {
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(auto found, s.find(state::queued_resource_key(wl.pool, wl.queued_resource)));
    if (!found) {
      return std::vector<state::Op>{};
    }
    TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(*found));
    const QueuedResource before = qr;
    if (qr.state == QrState::active || qr.state == QrState::provisioning) {
      transition(qr, QrState::suspending, state::Initiator::service, now_ms, why);
      qr.requeue = true;
    } else if ((qr.state == QrState::suspending || qr.state == QrState::suspended) && !qr.requeue) {
      qr.requeue = true;
    } else {
      return std::vector<state::Op>{};
    }
    std::vector<state::Op> ops{state::UpdateOp{
        state::queued_resource_key(wl.pool, wl.queued_resource), to_json(qr), qr.version}};
    auto events = transition_events(before, qr);
    ops.insert(ops.end(), events.begin(), events.end());
    return ops;
  });
  return committed ? tpuctl::ok() : Status(committed.error());
}

// The slices (nodes) of the workload that held a lost host.
std::vector<std::string> nodes_of(const Workload& wl, const std::vector<std::string>& lost) {
  std::vector<std::string> nodes;
  for (const auto& w : wl.workers) {
    if (std::find(lost.begin(), lost.end(), w.host) != lost.end() &&
        std::find(nodes.begin(), nodes.end(), w.node) == nodes.end()) {
      nodes.push_back(w.node);
    }
  }
  return nodes;
}

// Places and provisions again only the slices `nodes`, the request staying ACTIVE
// (node_repair.hpp). Returns "" when done, else why it cannot be done here (no provisioning
// options, no block fits, provisioning failed): the caller swaps or repairs the whole request.
Expected<std::string> repair_in_place(state::StateStore& store, const Workload& wl,
                                      const std::vector<std::string>& nodes,
                                      const MonitorOptions& o) {
  if (!o.provision) {
    return std::string("no provisioning options here");
  }
  if (nodes.empty()) {
    return std::string("no slice of the workload held the lost hosts");
  }
  for (const auto& node : nodes) {
    say(o, "repairing: placing slice '" + node + "' of cluster '" + wl.cluster + "' again");
    TPUCTL_TRY_ASSIGN(NodeRepair r,
                      repair_node(store, wl.pool, wl.queued_resource, node, *o.provision, o.clock));
    if (!r.repaired) {
      return r.why;
    }
    say(o, "slice '" + node + "' placed again on " + util::join(r.hosts, ", "));
  }
  return std::string();
}

TimePhase phase_for(const SliceCheck& check) {
  if (check.qr && check.qr->state == QrState::waiting_for_resources) {
    return TimePhase::queued;
  }
  if (check.qr && check.qr->state == QrState::provisioning) {
    return TimePhase::provisioning;
  }
  return TimePhase::recovering;
}

} // namespace

Expected<SliceCheck> check_slices(state::StateStore& store, const Workload& wl) {
  SliceCheck c;
  TPUCTL_TRY_ASSIGN(auto found,
                    store.find(state::queued_resource_key(wl.pool, wl.queued_resource)));
  if (!found) {
    c.status = SliceStatus::gone;
    c.why = "its queued resource '" + wl.queued_resource + "' was deleted";
    return c;
  }
  TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(*found));
  // A slice deleted on its own (tpu-vm delete --force of one node): the request lives on without
  // it, and the workload cannot.
  for (const auto& w : wl.workers) {
    if (std::find(qr.node_ids.begin(), qr.node_ids.end(), w.node) == qr.node_ids.end() &&
        std::find(c.deleted_nodes.begin(), c.deleted_nodes.end(), w.node) ==
            c.deleted_nodes.end()) {
      c.deleted_nodes.push_back(w.node);
    }
  }
  if (!c.deleted_nodes.empty()) {
    c.status = SliceStatus::gone;
    for (const auto& n : c.deleted_nodes) {
      c.why += (c.why.empty() ? "" : "; ") + std::string("its slice '") + n + "' was deleted";
    }
    c.qr = std::move(qr);
    return c;
  }
  c.why = state_text(qr);
  switch (qr.state) {
  case QrState::active:
    c.status =
        qr.active_since_ms > wl.attempt_started_ms ? SliceStatus::coming_back : SliceStatus::intact;
    if (c.status == SliceStatus::coming_back) {
      c.why = "queued resource '" + qr.id + "' was provisioned again since attempt " +
              std::to_string(wl.attempt) + " started";
      break;
    }
    // One of its slices repaired in place (node_repair.hpp), or being repaired.
    for (const auto& w : wl.workers) {
      if (node_repairing(qr, w.node)) {
        c.status = SliceStatus::coming_back;
        c.repairing = true;
        c.why = "slice '" + w.node + "' is being placed and provisioned again";
        break;
      }
      if (node_ready_ms(qr, w.node) > wl.attempt_started_ms) {
        c.status = SliceStatus::coming_back;
        c.why = "slice '" + w.node + "' was placed again since attempt " +
                std::to_string(wl.attempt) + " started";
      }
    }
    break;
  case QrState::suspending:
  case QrState::suspended:
    c.status = qr.requeue ? SliceStatus::coming_back : SliceStatus::gone;
    if (!qr.requeue) {
      c.why += "; a cluster created with --on-preemption requeue resumes its workloads by itself";
    }
    break;
  case QrState::accepted:
  case QrState::waiting_for_resources:
  case QrState::provisioning:
    c.status = SliceStatus::coming_back;
    break;
  case QrState::failed:
  case QrState::deleting:
    c.status = SliceStatus::gone;
    if (qr.error) {
      c.why += ": " + qr.error->message;
    }
    break;
  }
  c.qr = std::move(qr);
  return c;
}

std::vector<state::Op> begin_recovery(Workload& wl, int64_t now_ms, const std::string& why,
                                      const std::vector<std::string>& lost_hosts) {
  const WorkloadState from = wl.state;
  wl.state = WorkloadState::recovering;
  wl.recovering_since_ms = now_ms;
  wl.message = why;
  enter(wl.time, TimePhase::recovering, now_ms);
  lose_attempt(wl.time);
  for (auto& w : wl.workers) {
    if (w.state == WorkerState::running || w.state == WorkerState::pending) {
      w.state = WorkerState::stopped;
    }
  }
  std::string type = "RECOVERING";
  if (!lost_hosts.empty()) {
    wl.repairs += 1; // the infrastructure's failure: never a restart (workload_policy.hpp)
    wl.repair = Json{{"hosts", lost_hosts},
                     {"reason", "lost by workload '" + wl.name + "' at " +
                                    util::format_timestamp(now_ms) + ": " + why}};
    type = "REPAIR_STARTED";
  }
  return {state_event(wl, from, WorkloadState::recovering, now_ms, type, why)};
}

Expected<RecoveryStep> recovery_step(state::StateStore& store, const Workload& in,
                                     const MonitorOptions& o, WorkerWatch* watch) {
  RecoveryStep step;
  Workload wl = in;
  const std::string pool = wl.pool;
  const std::string name = wl.name;

  // 1. The repair still to carry out: drain, then send the request back through the queue.
  if (wl.repair.is_object() && wl.repair.contains("hosts")) {
    const auto hosts = wl.repair.at("hosts").get<std::vector<std::string>>();
    const std::string reason = wl.repair.value("reason", "lost by workload '" + name + "'");
    say(o, "repairing: draining " + util::join(hosts, ", ") + " and placing cluster '" +
               wl.cluster + "' again");
    TPUCTL_TRY(drain_lost(store, wl, hosts, reason));
    util::failpoint("workload.repair");
    const auto nodes = nodes_of(wl, hosts);
    TPUCTL_TRY_ASSIGN(const std::string not_in_place, repair_in_place(store, wl, nodes, o));
    if (!not_in_place.empty() && !nodes.empty()) {
      // Another slice of the cluster, a lower-priority workload's if need be (GKE Hotswap).
      TPUCTL_TRY_ASSIGN(auto swapped, hotswap(store, wl, nodes, not_in_place, o));
      if (swapped) {
        say(o, swapped->message);
        step.workload = std::move(swapped);
        return step;
      }
    }
    if (!not_in_place.empty()) {
      say(o, "repairing the whole request instead: " + not_in_place);
      TPUCTL_TRY(suspend_for_repair(
          store, wl, "repair: " + util::join(hosts, ", ") + " lost by workload '" + name + "'",
          now_of(o)));
    }
    TPUCTL_TRY_ASSIGN(auto m, mutate(store, pool, name, true, [&](Workload& w) {
                        w.repair = Json::object();
                        return std::optional<std::vector<state::Op>>(std::vector<state::Op>{});
                      }));
    if (m.skipped != Skip::none) {
      step.workload = gone_or(m);
      return step;
    }
    wl = *m.workload;
  }

  // 2. Let the request move: suspended, requeued, placed, provisioned.
  if (o.drive_pool) {
    if (auto driven = o.drive_pool(pool); !driven) {
      spdlog::warn("workload '{}': {}", name, driven.error().message);
    }
  } else if (auto r = reconcile_pool(store, pool, o.clock); !r) {
    spdlog::warn("workload '{}': {}", name, r.error().message);
  }

  // 3. Where it stands now.
  TPUCTL_TRY_ASSIGN(SliceCheck check, check_slices(store, wl));
  const int64_t now = now_of(o);
  const bool timed_out =
      wl.timeout_ms > 0 && wl.started_at_ms > 0 && now - wl.started_at_ms > wl.timeout_ms;
  if (check.status == SliceStatus::gone || timed_out) {
    const std::string why =
        timed_out ? "timed out while recovering: still not running after --timeout " +
                        util::format_duration(std::chrono::milliseconds(wl.timeout_ms)) + " (" +
                        check.why + ")"
                  : "its slices are gone: " + check.why;
    TPUCTL_TRY_ASSIGN(auto f, mutate(store, pool, name, true, [&](Workload& w) {
                        return finish(w, WorkloadState::failed, why, now);
                      }));
    step.workload = gone_or(f);
    return step;
  }
  if (check.status == SliceStatus::intact || !check.qr || check.qr->state != QrState::active ||
      check.repairing) {
    // Still on its way back: say why, and account the time to the request's state.
    const std::string waiting =
        "waiting for cluster '" + wl.cluster + "': " + check.why +
        (check.qr && !check.qr->pending_reason.empty() ? "; " + check.qr->pending_reason
                                                       : std::string());
    const TimePhase phase = phase_for(check);
    TPUCTL_TRY_ASSIGN(auto m, mutate(store, pool, name, true, [&](Workload& w) {
                        if (w.message == waiting && w.time.phase == phase) {
                          return std::optional<std::vector<state::Op>>();
                        }
                        w.message = waiting;
                        enter(w.time, phase, now);
                        return std::optional<std::vector<state::Op>>(std::vector<state::Op>{});
                      }));
    step.workload = gone_or(m);
    return step;
  }

  // 4. ACTIVE again: every worker starts the next attempt together.
  Workload next = wl;
  next.attempt += 1;
  TPUCTL_TRY_ASSIGN(auto plans, plan_workload(store, next));
  TPUCTL_TRY_ASSIGN(auto started, mutate(store, pool, name, true, [&](Workload& w) {
                      w.attempt = next.attempt;
                      w.recoveries += 1;
                      w.attempt_started_ms = now;
                      w.workers = pending_workers(plans, w.attempt);
                      enter(w.time, TimePhase::recovering, now);
                      return std::optional<std::vector<state::Op>>(std::vector<state::Op>{});
                    }));
  if (started.skipped != Skip::none) {
    step.workload = gone_or(started);
    return step;
  }
  wl = *started.workload;
  say(o, "cluster '" + wl.cluster + "' is ACTIVE again: starting attempt " +
             std::to_string(wl.attempt) + " on " + util::counted(plans.size(), "worker"));
  if (watch != nullptr && !watch->retarget(wl, plans)) {
    watch = nullptr; // another number of workers: the monitor makes a new watch
  }
  step.watch_kept = watch != nullptr;
  std::vector<size_t> failed;
  TPUCTL_TRY_ASSIGN(std::string failure, start_attempt(wl, plans, failed, o, watch));
  const int64_t at = now_of(o);
  TPUCTL_TRY_ASSIGN(auto m, mutate(store, pool, name, true, [&](Workload& w) {
                      if (!failure.empty()) {
                        return finish(w, WorkloadState::failed, failure, at);
                      }
                      const int64_t took = at - w.recovering_since_ms;
                      w.state = WorkloadState::running;
                      w.message = "recovered in " +
                                  util::format_duration(std::chrono::milliseconds(took)) +
                                  ": attempt " + std::to_string(w.attempt) + " running";
                      for (auto& x : w.workers) {
                        x.state = WorkerState::running;
                      }
                      enter(w.time, TimePhase::running, at);
                      auto ev = state_event(w, WorkloadState::recovering, WorkloadState::running,
                                            at, "RECOVERED", w.message);
                      std::get<state::EventOp>(ev).event.detail["recovery_ms"] = took;
                      return std::optional<std::vector<state::Op>>(std::vector<state::Op>{ev});
                    }));
  step.workload = gone_or(m);
  if (step.workload && step.workload->state == WorkloadState::running) {
    step.plans = std::move(plans);
  }
  return step;
}

} // namespace tpuctl::provision
