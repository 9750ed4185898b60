#include "provision/queue/scheduler.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "provision/queue/quota.hpp"
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

// The grid as it would be if every host held by a slice `victim` accepts (and not drained) were
// free.
template <typename Victim>
HostGrid grid_without(const PoolView& view, const HostGrid& grid,
                      const std::map<std::string, const QueuedResource*>& by_id,
                      const Victim& victim) {
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
    bool victim_ok = preemptible(owner.tier) && victim(owner) &&
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

// One tier's waiting requests, per project in arrival order: the pass serves the project with
// the lowest share next (quota.hpp), so projects contending in a tier alternate.
class TierQueue {
public:
  void add(QueuedResource* qr) { m_by_project[qr->project].push_back(qr); }
  void sort() {
    for (auto& [project, q] : m_by_project) {
      std::stable_sort(q.begin(), q.end(), [](const QueuedResource* a, const QueuedResource* b) {
        return a->create_revision < b->create_revision;
      });
    }
  }
  // The next request to look at, nullptr when none is left.
  QueuedResource* next(const QuotaBook& book) {
    QueuedResource* best = nullptr;
    double best_share = 0;
    for (auto& [project, q] : m_by_project) {
      if (m_taken[project] >= q.size()) {
        continue;
      }
      QueuedResource* head = q[m_taken[project]];
      const double share = book.share(project);
      if (best == nullptr || share < best_share ||
          (share == best_share && head->create_revision < best->create_revision)) {
        best = head;
        best_share = share;
      }
    }
    if (best != nullptr) {
      m_taken[best->project] += 1;
    }
    return best;
  }
  // "fair share in tier standard: infra 0.25, ml 0.50 (the lowest is served first)", or "" when
  // only one project waits in the tier.
  std::string shares(const QuotaBook& book, Tier tier) const {
    if (m_by_project.size() < 2) {
      return "";
    }
    std::vector<std::string> parts;
    for (const auto& [project, q] : m_by_project) {
      parts.push_back(project + " " + share_text(book.share(project)));
    }
    return "fair share in tier " + std::string(to_string(tier)) + ": " + util::join(parts, ", ") +
           " (the lowest is served first)";
  }

private:
  std::map<std::string, std::vector<QueuedResource*>> m_by_project;
  std::map<std::string, size_t> m_taken;
};

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

  // 4-5: the queue, tier by tier; within a tier by fair share, then arrival.
  std::map<int, TierQueue> tiers;
  std::map<std::string, const QueuedResource*> by_id;
  for (auto& qr : work) {
    by_id[qr.id] = &qr;
    if (qr.state == QrState::waiting_for_resources) {
      tiers[tier_rank(qr.tier)].add(&qr);
    }
  }
  const ProjectQuotas& quotas = view.info.quotas;
  QuotaBook book = quota_book(work, view.info);
  const std::set<std::string> borrowers = borrowing(work, quotas);

  HostGrid grid = view.grid;
  const QueuedResource* blocked_head = nullptr; // starving: no backfill behind it
  SchedulePlan plan;

  // Why each request still waits; the shares of its tier (as the pass leaves them) are added at
  // the end.
  std::vector<std::pair<QueuedResource*, std::string>> waiting;
  auto set_pending = [&](QueuedResource& qr, const std::string& reason) {
    waiting.emplace_back(&qr, reason);
  };

  // Preempts the fewest slices that `victim` accepts whose hosts a placement of `qr` needs,
  // when freeing all of them would let it fit: they start SUSPENDING and the placement's hosts
  // are set aside for `qr`. False when that would not make room.
  auto preempt_for = [&](QueuedResource& qr, const topology::AcceleratorType& type, int count,
                         const auto& victim) {
    HostGrid freed = grid_without(view, grid, by_id, victim);
    auto maybe = place_slices(freed, type, count, view.info.name);
    if (!maybe) {
      return false;
    }
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
      const bool borrowed = borrowers.count(v) > 0;
      names.push_back("'" + v + "'" + (borrowed ? " (borrowing)" : ""));
      for (auto& w : work) {
        if (w.id == v && (w.state == QrState::active || w.state == QrState::provisioning)) {
          transition(w, QrState::suspending, Initiator::service, now_ms,
                     "preempted by '" + qr.id + "' (" + std::string(to_string(qr.tier)) +
                         (borrowed ? ", reclaiming the chips project '" + w.project +
                                         "' borrowed beyond its quota"
                                   : std::string()) +
                         ")");
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
    return true;
  };

  for (auto& [tier_key, tier] : tiers) {
    const int rank = tier_key;  // a plain variable: lambdas below capture it (C++20 forbids
                                // capturing a structured binding; clang refuses it)
    tier.sort();
    bool head_seen = false;
    while (QueuedResource* qp = tier.next(book)) {
      QueuedResource& qr = *qp;
      if (qr.valid_after_ms > 0 && now_ms < qr.valid_after_ms) {
        set_pending(qr, "held back until its valid-after time (" +
                            duration_text(qr.valid_after_ms - now_ms) + " from now)");
        continue;
      }
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
      const int count = std::max<int>(1, static_cast<int>(qr.node_ids.size()));
      const int chips = type->chips * count;
      // Held by its own project's quota: it waits, and never holds other projects back.
      if (auto over = book.over_quota(qr, chips)) {
        set_pending(qr, *over);
        continue;
      }
      const bool head_of_tier = !head_seen;
      head_seen = true;
      if (blocked_head != nullptr && rank >= tier_rank(blocked_head->tier)) {
        set_pending(qr, "queued behind '" + blocked_head->id + "', which has waited longer than " +
                            duration_text(policy.head_wait_bound.count()) +
                            "; nothing smaller passes it until it is placed");
        continue;
      }
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
        book.hold(qr);
        continue;
      }
      if (!preemptible(qr.tier)) {
        // Borrowed chips first (Kueue: borrowing workloads are preempted first), then any
        // spot or best-effort slice of a lower tier.
        auto lower_borrowing = [&](const QueuedResource& o) {
          return tier_rank(o.tier) > rank && borrowers.count(o.id) > 0;
        };
        auto lower = [&](const QueuedResource& o) { return tier_rank(o.tier) > rank; };
        if ((!borrowers.empty() && preempt_for(qr, *type, count, lower_borrowing)) ||
            preempt_for(qr, *type, count, lower)) {
          continue;
        }
      } else if (!borrowers.empty() && book.within_quota(qr.project, chips)) {
        // Reclaim: a spot request within its own quota takes back what other projects borrow.
        auto other_borrowing = [&](const QueuedResource& o) {
          return o.project != qr.project && borrowers.count(o.id) > 0;
        };
        if (preempt_for(qr, *type, count, other_borrowing)) {
          continue;
        }
      }
      set_pending(qr, placed.error().message);
      if (head_of_tier && now_ms - qr.state_since_ms >= policy.head_wait_bound.count()) {
        blocked_head = &qr;
      }
    }
  }

  for (auto& [qp, reason] : waiting) {
    if (std::string shares = tiers[tier_rank(qp->tier)].shares(book, qp->tier); !shares.empty()) {
      reason += "; " + shares;
    }
    if (qp->pending_reason != reason) {
      qp->pending_reason = reason;
      mark_changed(changed, *qp);
    }
  }
  for (auto& [id, qr] : changed) {
    plan.changed.push_back(std::move(qr));
  }
  return plan;
}

} // namespace tpuctl::provision
