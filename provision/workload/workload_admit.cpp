#include "provision/workload/workload_admit.hpp"

#include <algorithm>
#include <map>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "provision/queue/reconcile.hpp"
#include "provision/slice/node_repair.hpp"
#include "provision/workload/cluster.hpp"
#include "provision/workload/workload_hotswap.hpp"
#include "provision/workload/workload_steps.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

// How often a waiting workload's monitor makes a pass of its own (plus up to 5 s, by pid): a
// safety net only, as whoever frees slices makes one.
constexpr int64_t k_queue_pass_ms = 30000;

std::string slice_list(const std::vector<int>& slices) {
  std::vector<std::string> parts;
  for (int s : slices) {
    parts.push_back(std::to_string(s));
  }
  return util::join(parts, ",");
}

} // namespace

bool apply_plan(const QueuePlan& plan, const std::vector<std::string>& node_ids, Workload& w,
                int64_t now, std::vector<state::Op>& events) {
  const nlohmann::json before = to_json(w);
  const std::string& n = w.name;
  if (!w.slice_nodes.empty()) {
    w.slices = resolve_slices(w, node_ids);
  }
  if (auto a = plan.admit.find(n); a != plan.admit.end()) {
    const WorkloadState from = w.state;
    w.state = WorkloadState::pending;
    w.slices = a->second;
    w.slice_nodes.clear();
    for (int s : a->second) {
      if (s >= 0 && static_cast<size_t>(s) < node_ids.size()) {
        w.slice_nodes.push_back(node_ids[static_cast<size_t>(s)]);
      }
    }
    w.admitted_at_ms = now;
    w.message = "admitted onto slice" + std::string(a->second.size() == 1 ? " " : "s ") +
                slice_list(a->second) + " of cluster " + w.cluster;
    if (w.time.phase != TimePhase::evicted) { // an evicted one's wait is its eviction's
      enter(w.time, TimePhase::provisioning, now);
    }
    events.push_back(state_event(w, from, w.state, now, "ADMITTED", w.message));
  } else if (auto e = plan.evicted_for.find(n); e != plan.evicted_for.end()) {
    const WorkloadState from = w.state;
    w.state = WorkloadState::evicting;
    w.message = "evicted to make room for " + e->second + " (higher priority); stopping with " +
                std::to_string(w.termination_grace_ms / 1000) + " s of grace";
    enter(w.time, TimePhase::evicted, now);
    events.push_back(state_event(w, from, w.state, now, "EVICTED", w.message));
  }
  return to_json(w) != before;
}

namespace {

// The waiting workloads' view of `plan`: {NAME: {position, reason, head_since_ms}}.
nlohmann::json waiting_view(const QueuePlan& plan) {
  nlohmann::json view = nlohmann::json::object();
  for (const auto& [name, reason] : plan.reason) {
    auto p = plan.position.find(name);
    auto h = plan.head_since_ms.find(name);
    view[name] = nlohmann::json{{"position", p == plan.position.end() ? 0 : p->second},
                                {"reason", reason},
                                {"head_since_ms", h == plan.head_since_ms.end() ? 0 : h->second}};
  }
  return view;
}

} // namespace

std::vector<int> held_slices(const Workload& w, const std::vector<std::string>& node_ids) {
  if (!holds_slices(w.state)) {
    return {};
  }
  if (!w.slices.empty() || !w.slice_nodes.empty()) {
    return resolve_slices(w, node_ids);
  }
  std::vector<int> all;
  for (size_t s = 0; s < node_ids.size(); ++s) {
    all.push_back(static_cast<int>(s));
  }
  return all;
}

Expected<std::optional<QueueRead>> read_queue(state::StateStore& s, const std::string& pool,
                                              const std::string& cluster) {
  QueueRead q;
  TPUCTL_TRY_ASSIGN(auto crec, s.find(state::record_key(state::Kind::cluster, pool, cluster)));
  if (!crec) {
    return std::optional<QueueRead>();
  }
  q.cluster_record = std::move(*crec);
  TPUCTL_TRY_ASSIGN(q.cluster, cluster_from_json(q.cluster_record.doc));
  const Cluster& c = q.cluster;
  // Its request's nodes, in order: what a held slice's index means now.
  TPUCTL_TRY_ASSIGN(q.qr_record, s.find(state::queued_resource_key(pool, c.queued_resource)));
  if (q.qr_record) {
    TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(*q.qr_record));
    q.node_ids = qr.node_ids;
    for (size_t i = 0; i < qr.node_ids.size(); ++i) {
      if (node_broken(qr, qr.node_ids[i])) {
        q.broken.insert(static_cast<int>(i));
      }
    }
    q.qr = std::move(qr);
  }
  for (int i = static_cast<int>(q.node_ids.size()); i < c.num_slices; ++i) {
    q.node_ids.push_back(c.queued_resource + "-" + std::to_string(i));
  }
  TPUCTL_TRY_ASSIGN(state::Listing listing, s.list(state::Kind::workload, pool));
  for (const auto& r : listing.records) {
    auto w = workload_from_record(r);
    if (!w || w->cluster != cluster || is_terminal(w->state)) {
      continue; // a damaged record is another command's to report
    }
    if (w->state == WorkloadState::queued && w->deleting) {
      continue; // on its way out: never admitted
    }
    QueueEntry e;
    e.name = w->name;
    e.priority = w->priority;
    e.arrival_ms = w->created_at_ms;
    e.num_slices = w->num_slices > 0 ? w->num_slices : c.num_slices;
    e.held = held_slices(*w, q.node_ids);
    e.admitted_ms = w->admitted_at_ms;
    e.evicting = w->state == WorkloadState::evicting || w->deleting;
    e.head_since_ms =
        c.queue.value(w->name, nlohmann::json::object()).value("head_since_ms", int64_t{0});
    q.entries.push_back(std::move(e));
    q.reads.push_back({r, std::move(*w)});
  }
  return std::optional<QueueRead>(std::move(q));
}

std::vector<state::Op> apply_queue(QueueRead& q, const QueuePlan& plan, int64_t now,
                                   AdmitPass& pass) {
  // Every pass that changes anything rewrites the cluster record with the version it read:
  // passes are serialized on that one key, so two never act on the same view (the second
  // plans again), and only the records that change are written besides.
  std::vector<state::Op> ops;
  std::vector<state::Op> events;
  bool changed = false;
  for (auto& [record, w] : q.reads) {
    if (!w.deleting && apply_plan(plan, q.node_ids, w, now, events)) {
      changed = true;
      ops.push_back(state::UpdateOp{record.key, to_json(w), record.version});
      if (w.state == WorkloadState::pending && plan.admit.count(w.name) != 0) {
        pass.admitted.push_back(w.name);
      } else if (w.state == WorkloadState::evicting) {
        pass.evicted.push_back(w.name);
      }
    }
  }
  nlohmann::json view = waiting_view(plan);
  if (!changed && view == q.cluster.queue) {
    return {};
  }
  q.cluster.queue = std::move(view);
  ops.push_back(state::UpdateOp{q.cluster_record.key, to_json(q.cluster), q.cluster_record.version});
  if (q.qr_record) {
    ops.push_back(state::CheckOp{q.qr_record->key, q.qr_record->version});
  }
  ops.insert(ops.end(), events.begin(), events.end());
  return ops;
}

Expected<AdmitPass> admit_queue(state::StateStore& store, const std::string& pool,
                                const std::string& cluster, int64_t now,
                                const QueuePolicy& policy) {
  AdmitPass pass;
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    pass = {};
    TPUCTL_TRY_ASSIGN(auto q, read_queue(s, pool, cluster));
    if (!q) {
      return std::vector<state::Op>{};
    }
    const QueuePlan plan =
        plan_queue(cluster, q->cluster.num_slices, q->entries, now, policy, q->broken);
    return apply_queue(*q, plan, now, pass);
  });
  if (!committed) {
    return committed.error();
  }
  return pass;
}

std::vector<state::Op> requeue_evicted(Workload& w, int64_t now) {
  const WorkloadState from = w.state;
  w.state = WorkloadState::queued;
  w.slices.clear();
  w.slice_nodes.clear();
  w.evictions += 1;
  w.attempt += 1;
  w.workers.clear();
  w.repair = nlohmann::json::object();
  lose_attempt(w.time); // what it ran since its last checkpoint is the job's to know
  if (w.time.phase != TimePhase::evicted) {
    enter(w.time, TimePhase::evicted, now);
  }
  w.message = "evicted " + util::counted(static_cast<size_t>(w.evictions), "time") +
              "; back in the queue of cluster " + w.cluster;
  return {state_event(w, from, w.state, now, "REQUEUED", w.message)};
}

Status fill_queue_view(state::StateStore& store, std::vector<Workload>& workloads) {
  std::map<std::string, nlohmann::json> queues; // cluster -> its queue view
  for (auto& w : workloads) {
    if (w.state != WorkloadState::queued) {
      continue;
    }
    auto q = queues.find(w.cluster);
    if (q == queues.end()) {
      TPUCTL_TRY_ASSIGN(auto found,
                        store.find(state::record_key(state::Kind::cluster, w.pool, w.cluster)));
      nlohmann::json view = nlohmann::json::object();
      if (found) {
        if (auto c = cluster_from_json(found->doc); c) {
          view = c->queue;
        }
      }
      q = queues.emplace(w.cluster, std::move(view)).first;
    }
    const nlohmann::json entry = q->second.value(w.name, nlohmann::json::object());
    if (entry.contains("reason")) {
      w.message = entry.value("reason", w.message);
      w.queue_position = entry.value("position", 0);
      w.head_since_ms = entry.value("head_since_ms", int64_t{0});
    }
  }
  return tpuctl::ok();
}

void admit_quietly(state::StateStore& store, const Workload& wl, const MonitorOptions& o) {
  if (auto pass = admit_queue(store, wl.pool, wl.cluster, now_of(o)); !pass) {
    spdlog::warn("cluster '{}': admitting its queue: {}", wl.cluster, pass.error().message);
  }
}

Expected<std::optional<Workload>> wait_in_queue(state::StateStore& store, const Workload& start,
                                                const MonitorOptions& o,
                                                const remote::CancelToken* cancel) {
  using Ms = std::chrono::milliseconds;
  const std::string& pool = start.pool;
  const std::string& name = start.name;
  int64_t refreshed = 0;
  int64_t revision = 0;
  int64_t passed = 0;
  std::string said;
  // Every change that frees slices (a workload ending, evicted or deleted, a create, a resize)
  // is followed by a pass of the process that made it; a waiting monitor reads its own record
  // at each change and makes a pass itself only now and then (a safety net for a pass that died
  // with its process, and for the head-of-queue bound), so dozens of waiting workloads do not
  // all plan the same queue at every change.
  const int64_t pass_every = k_queue_pass_ms + static_cast<int64_t>(::getpid() % 5000);
  while (!(cancel && cancel->cancelled())) {
    // The revision before the pass: whatever commits during it wakes the wait below.
    if (auto rev = store.wait_for_change(pool, 0, Ms(0)); rev) {
      revision = *rev;
    }
    if (now_of(o) - passed >= pass_every) {
      // A slice of the cluster waiting for a repair (workload_hotswap.hpp) gets one now if the
      // pool has room for it.
      if (auto repaired = repair_broken_slices(store, start, o); !repaired) {
        spdlog::warn("workload '{}': {}", name, repaired.error().message);
      } else {
        for (const auto& r : *repaired) {
          say(o, "repaired: " + r);
        }
      }
      admit_quietly(store, start, o);
      passed = now_of(o);
    }
    const int64_t now = now_of(o);
    const bool refresh = now - refreshed >= o.lease_ttl.count() / 3;
    TPUCTL_TRY_ASSIGN(auto m, mutate(store, pool, name, true, [&](Workload& w) {
                        if (w.state != WorkloadState::queued || !refresh) {
                          return std::optional<std::vector<state::Op>>();
                        }
                        w.monitor = to_json(own_lease(now, o.lease_ttl));
                        return std::optional<std::vector<state::Op>>(std::vector<state::Op>{});
                      }));
    if (m.skipped == Skip::gone) {
      return std::optional<Workload>();
    }
    if (m.skipped != Skip::none || m.workload->state != WorkloadState::queued) {
      return m.workload;
    }
    if (refresh) {
      refreshed = now;
    }
    std::vector<Workload> one{*m.workload};
    if (fill_queue_view(store, one) && one[0].message != said) {
      said = one[0].message;
      say(o, "queued: " + said);
    }
    auto changed = store.wait_for_change(pool, revision, o.poll_interval * 5);
    if (!changed) {
      sleep_for(o.poll_interval, cancel);
    }
  }
  return std::optional<Workload>(start);
}

Expected<Started> start_admitted(state::StateStore& store, const Workload& wl,
                                 const MonitorOptions& o, bool keep_lease) {
  Started out;
  auto planned = plan_workload(store, wl);
  if (!planned) {
    const std::string why = planned.error().message;
    TPUCTL_TRY_ASSIGN(auto f, mutate(store, wl.pool, wl.name, true, [&](Workload& w) {
                        return finish(w, WorkloadState::failed, why, now_of(o));
                      }));
    out.workload = gone_or(f);
    return out;
  }
  const std::vector<WorkerPlan>& plans = *planned;
  // A start that was under way when its process died: what it started is stopped first.
  if (std::any_of(wl.workers.begin(), wl.workers.end(),
                  [&](const WorkloadWorker& x) { return x.attempt == wl.attempt; })) {
    (void)stop_workers(wl, plans, o.ssh);
  }
  TPUCTL_TRY_ASSIGN(auto m, mutate(store, wl.pool, wl.name, true, [&](Workload& w) {
                      if (w.state != WorkloadState::pending) {
                        return std::optional<std::vector<state::Op>>();
                      }
                      w.workers = pending_workers(plans, w.attempt);
                      return std::optional<std::vector<state::Op>>(std::vector<state::Op>{});
                    }));
  if (m.skipped != Skip::none || m.workload->state != WorkloadState::pending) {
    out.workload = gone_or(m);
    return out;
  }
  const Workload& now_wl = *m.workload;
  say(o, "starting '" + wl.name + "' on " + util::counted(plans.size(), "worker") + " of cluster " +
             wl.cluster);
  std::vector<size_t> failed;
  TPUCTL_TRY_ASSIGN(std::string failure, start_attempt(now_wl, plans, failed, o));
  const int64_t at = now_of(o);
  TPUCTL_TRY_ASSIGN(
      auto f, mutate(store, wl.pool, wl.name, true, [&](Workload& w) {
        if (w.started_at_ms == 0) {
          w.started_at_ms = at;
        }
        w.attempt_started_ms = at;
        if (!keep_lease) {
          w.monitor = nlohmann::json::object(); // a monitor takes it
        }
        if (!failure.empty()) {
          for (size_t i : failed) {
            if (i < w.workers.size()) {
              w.workers[i].state = WorkerState::failed;
              w.workers[i].detail = "could not start";
            }
          }
          return finish(w, WorkloadState::failed, failure, at);
        }
        const WorkloadState from = w.state;
        w.state = WorkloadState::running;
        w.message.clear();
        enter(w.time, TimePhase::running, at);
        for (auto& x : w.workers) {
          x.state = WorkerState::running; // started: the supervisor runs it
        }
        return std::optional<std::vector<state::Op>>(std::vector<state::Op>{
            state_event(w, from, WorkloadState::running, at, "STATE_CHANGED", "started")});
      }));
  if (f.skipped == Skip::gone || f.skipped == Skip::deleting || f.skipped == Skip::not_ours) {
    (void)stop_workers(now_wl, plans, o.ssh); // deleted while it started
  }
  out.workload = gone_or(f);
  if (f.skipped == Skip::none && f.workload->state == WorkloadState::running) {
    out.plans = std::move(*planned);
  }
  return out;
}

Expected<std::optional<Workload>> evict_workload(state::StateStore& store, const Workload& wl,
                                                 const std::vector<WorkerPlan>* plans,
                                                 WorkerWatch* watch, const MonitorOptions& o) {
  say(o, wl.message);
  std::optional<std::vector<WorkerPlan>> own;
  if (plans == nullptr) {
    if (auto planned = plan_workload(store, wl); planned) {
      own = std::move(*planned);
      plans = &*own;
    } else {
      spdlog::warn("workload '{}': {}; its processes went with its slices", wl.name,
                   planned.error().message);
    }
  }
  if (plans != nullptr) {
    stop_attempt(wl, *plans, watch, o);
  }
  TPUCTL_TRY_ASSIGN(auto m, mutate(
                                store, wl.pool, wl.name, true,
                                [&](Workload& w) -> std::optional<std::vector<state::Op>> {
                                  if (w.state != WorkloadState::evicting) {
                                    return std::nullopt;
                                  }
                                  return requeue_evicted(w, now_of(o));
                                },
                                true));
  if (m.skipped == Skip::gone) {
    return std::optional<Workload>();
  }
  say(o, m.workload->message);
  admit_quietly(store, *m.workload, o);
  return m.workload;
}

} // namespace tpuctl::provision
