#include "provision/queue/scheduler.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "topology/accelerator_type.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

using state::Initiator;

std::string duration_text(int64_t ms) {
  int64_t s = ms / 1000;
  if (s < 120) {
    return std::to_string(s) + "s";
  }
  if (s < 7200) {
    return std::to_string(s / 60) + "m";
  }
  return std::to_string(s / 3600) + "h";
}

void mark_changed(std::map<std::string, QueuedResource>& changed, const QueuedResource& qr) {
  changed[qr.id] = qr;
}

// A SUSPENDED request marked `requeue` goes back to the queue, as a reset does, keeping its
// arrival (create revision) and so its place.
void requeue(QueuedResource& qr, int64_t now_ms) {
  const std::string why = qr.history.empty() ? std::string() : qr.history.back().reason;
  qr.requeue = false;
  qr.error.reset();
  qr.nodes.clear();
  qr.pending_reason.clear();
  qr.provisioning.erase("lease");
  transition(qr, QrState::waiting_for_resources, Initiator::service, now_ms,
             "requeued" + (why.empty() ? std::string() : " after: " + why));
}

// The grid as it would be if every host held by a preemptible slice of a lower tier than
// `rank` (and not drained) were free.
HostGrid grid_without_preemptible(const PoolView& view, const HostGrid& grid,
                                  const std::map<std::string, const QueuedResource*>& by_id,
                                  int rank) {
  std::set<std::string> drained;
  for (const auto& h : view.hosts) {
    if (!h.drain_reason.empty()) {
      drained.insert(h.name);
    }
  }
  HostGrid g = grid;
  for (size_t i = 0; i < g.cells().size(); ++i) {
    const GridCell& c = g.cells()[i];
    if (c.state != CellState::claimed) {
      continue;
    }
    auto it = by_id.find(c.owner);
    if (it == by_id.end()) {
      continue;
    }
    const QueuedResource& owner = *it->second;
    bool victim_ok = preemptible(owner.tier) && tier_rank(owner.tier) > rank &&
                     (owner.state == QrState::active || owner.state == QrState::provisioning ||
                      owner.state == QrState::suspending);
    if (victim_ok && !drained.count(c.host)) {
      Dims pos = position_of(g.layout(), static_cast<int>(i));
      g.at(pos).state = CellState::free;
      g.at(pos).owner.clear();
    }
  }
  g.refresh();
  return g;
}

} // namespace

void assign_nodes(QueuedResource& qr, const std::vector<Placement>& placements,
                  const PoolView& view) {
  std::map<std::string, std::string> address;
  for (const auto& h : view.hosts) {
    address[h.name] = h.address;
  }
  qr.nodes.clear();
  for (size_t n = 0; n < placements.size(); ++n) {
    QrNode node;
    node.id = n < qr.node_ids.size() ? qr.node_ids[n] : qr.id + "-" + std::to_string(n);
    for (const auto& p : placements[n].hosts) {
      node.workers.push_back(QrWorker{p.worker, p.host, address[p.host], p.position});
    }
    qr.nodes.push_back(std::move(node));
  }
}

SchedulePlan schedule(const PoolView& view, const std::vector<QueuedResource>& qrs, int64_t now_ms,
                      const SchedulerPolicy& policy) {
  std::map<std::string, QueuedResource> changed;
  std::vector<QueuedResource> work = qrs;

  // 1-3: time-driven transitions.
  for (auto& qr : work) {
    bool touched = false;
    if (qr.state == QrState::suspended && qr.requeue) {
      requeue(qr, now_ms);
      touched = true;
    }
    if (qr.state == QrState::accepted) {
      transition(qr, QrState::waiting_for_resources, Initiator::service, now_ms,
                 "queued in tier " + std::string(to_string(qr.tier)));
      touched = true;
    }
    if (qr.state == QrState::waiting_for_resources && qr.valid_until_ms > 0 &&
        now_ms >= qr.valid_until_ms) {
      qr.error = QrError{"EXPIRED",
                         "no capacity before the request's valid-until time (waited " +
                             duration_text(now_ms - qr.created_at_ms) + ")",
                         -1, "", ""};
      qr.pending_reason.clear();
      transition(qr, QrState::failed, Initiator::service, now_ms, "valid-until reached");
      touched = true;
    }
    if (qr.state == QrState::active && qr.max_run_duration_ms > 0 &&
        now_ms - qr.active_since_ms >= qr.max_run_duration_ms) {
      transition(qr, QrState::suspending, Initiator::service, now_ms,
                 "max-run-duration " + duration_text(qr.max_run_duration_ms) + " reached");
      touched = true;
    }
    if (touched) {
      mark_changed(changed, qr);
    }
  }

  // 4-5: the queue.
  std::vector<QueuedResource*> queue;
  std::map<std::string, const QueuedResource*> by_id;
  for (auto& qr : work) {
    by_id[qr.id] = &qr;
    if (qr.state == QrState::waiting_for_resources) {
      queue.push_back(&qr);
    }
  }
  std::stable_sort(queue.begin(), queue.end(),
                   [](const QueuedResource* a, const QueuedResource* b) {
                     if (tier_rank(a->tier) != tier_rank(b->tier)) {
                       return tier_rank(a->tier) < tier_rank(b->tier);
                     }
                     return a->create_revision < b->create_revision;
                   });

  HostGrid grid = view.grid;
  const QueuedResource* blocked_head = nullptr; // starving: no backfill behind it
  std::set<int> tier_head_seen;
  SchedulePlan plan;

  auto set_pending = [&](QueuedResource& qr, const std::string& reason) {
    if (qr.pending_reason != reason) {
      qr.pending_reason = reason;
      mark_changed(changed, qr);
    }
  };

  for (QueuedResource* qp : queue) {
    QueuedResource& qr = *qp;
    const int rank = tier_rank(qr.tier);
    if (qr.valid_after_ms > 0 && now_ms < qr.valid_after_ms) {
      set_pending(qr, "held back until its valid-after time (" +
                          duration_text(qr.valid_after_ms - now_ms) + " from now)");
      continue;
    }
    const bool head_of_tier = tier_head_seen.insert(rank).second;
    auto type = topology::parse_accelerator_type(qr.accelerator_type);
    Status compatible =
        type ? check_compatible(view.info.layout, *type, view.info.name) : Status(type.error());
    if (!compatible) {
      qr.error = QrError{"INVALID", compatible.error().message, -1, "", ""};
      qr.pending_reason.clear();
      transition(qr, QrState::failed, Initiator::service, now_ms, "the pool cannot hold it");
      mark_changed(changed, qr);
      continue;
    }
    if (blocked_head != nullptr && rank >= tier_rank(blocked_head->tier)) {
      set_pending(qr, "queued behind '" + blocked_head->id + "', which has waited longer than " +
                          duration_text(policy.head_wait_bound.count()) +
                          "; nothing smaller passes it until it is placed");
      continue;
    }
    const int count = std::max<int>(1, static_cast<int>(qr.node_ids.size()));
    auto placed = place_slices(grid, *type, count, view.info.name);
    if (placed) {
      for (const auto& p : *placed) {
        claim(grid, p, qr.id);
      }
      assign_nodes(qr, *placed, view);
      qr.pending_reason.clear();
      qr.error.reset();
      transition(qr, QrState::provisioning, Initiator::service, now_ms,
                 "placed on " + util::counted(hosts_of(qr).size(), "host"));
      mark_changed(changed, qr);
      plan.claims.emplace_back(qr.id, hosts_of(qr));
      continue;
    }
    std::string reason = placed.error().message;
    if (!preemptible(qr.tier)) {
      HostGrid freed = grid_without_preemptible(view, grid, by_id, rank);
      if (auto maybe = place_slices(freed, *type, count, view.info.name)) {
        std::set<std::string> victims;
        for (const auto& p : *maybe) {
          for (const auto& h : p.hosts) {
            const GridCell& cell = grid.at(h.position);
            if (cell.state == CellState::claimed) {
              victims.insert(cell.owner);
            }
          }
        }
        std::vector<std::string> names;
        for (const auto& v : victims) {
          names.push_back("'" + v + "'");
          for (auto& w : work) {
            if (w.id == v && (w.state == QrState::active || w.state == QrState::provisioning)) {
              transition(w, QrState::suspending, Initiator::service, now_ms,
                         "preempted by '" + qr.id + "' (" + std::string(to_string(qr.tier)) + ")");
              w.requeue = w.on_preemption == OnPreemption::requeue;
              mark_changed(changed, w);
            }
          }
        }
        // Set the placement's hosts aside so nothing else takes them meanwhile.
        for (const auto& p : *maybe) {
          claim(grid, p, qr.id);
        }
        set_pending(qr, "preempting " + util::join(names, ", ") + " to make room");
        continue;
      }
    }
    set_pending(qr, reason);
    if (head_of_tier && now_ms - qr.state_since_ms >= policy.head_wait_bound.count()) {
      blocked_head = &qr;
    }
  }

  for (auto& [id, qr] : changed) {
    plan.changed.push_back(std::move(qr));
  }
  return plan;
}

} // namespace tpuctl::provision
