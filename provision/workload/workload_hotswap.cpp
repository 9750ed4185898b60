#include "provision/workload/workload_hotswap.hpp"

#include <algorithm>
#include <set>

#include "provision/slice/node_repair.hpp"
#include "provision/workload/workload_admit.hpp"
#include "provision/workload/workload_queue.hpp"
#include "provision/workload/workload_steps.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

Expected<std::optional<Workload>> hotswap(state::StateStore& store, const Workload& wl,
                                          const std::vector<std::string>& nodes,
                                          const std::string& why, const MonitorOptions& o) {
  const int64_t now = now_of(o);
  std::optional<Workload> out;
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    out.reset();
    TPUCTL_TRY_ASSIGN(auto q, read_queue(s, wl.pool, wl.cluster));
    if (!q || !q->qr || !q->qr_record || q->qr->state != QrState::active) {
      return std::vector<state::Op>{}; // the whole request is on its way back: no swap
    }
    auto me = std::find_if(q->reads.begin(), q->reads.end(),
                           [&](const QueueRead::Read& r) { return r.workload.name == wl.name; });
    if (me == q->reads.end() || me->workload.state != WorkloadState::recovering ||
        me->workload.deleting) {
      return std::vector<state::Op>{};
    }
    const size_t mine = static_cast<size_t>(me - q->reads.begin());
    std::set<int> broken = q->broken;
    for (const auto& node : nodes) {
      auto at = std::find(q->node_ids.begin(), q->node_ids.end(), node);
      if (at != q->node_ids.end()) {
        broken.insert(static_cast<int>(at - q->node_ids.begin()));
      }
    }
    // 2. and 3.: waiting again, the queue planned without the broken slices.
    q->entries[mine].held.clear();
    const QueuePlan plan =
        plan_queue(wl.cluster, q->cluster.num_slices, q->entries, now, {}, broken);
    std::vector<std::string> victims;
    for (const auto& [victim, for_whom] : plan.evicted_for) {
      if (for_whom == wl.name) {
        victims.push_back(victim);
      }
    }
    const bool idle = plan.admit.count(wl.name) != 0;
    if (!idle && victims.empty()) {
      return std::vector<state::Op>{}; // nothing lower to take: the caller's fallback
    }
    Workload& w = me->workload;
    const WorkloadState from = w.state;
    w.state = WorkloadState::queued;
    w.slices.clear();
    w.slice_nodes.clear();
    w.workers.clear();
    w.attempt += 1;
    w.repair = nlohmann::json::object();
    w.message = "hot swap: " + why + "; " +
                (idle ? std::string("taking an idle slice of cluster ") + wl.cluster
                      : "evicting " + util::join(victims, ", ") +
                            " (lower priority) to take their slice");
    std::vector<state::Op> ops{state_event(w, from, w.state, now, "HOTSWAP", w.message)};
    const state::Key wkey = me->record.key;
    const int64_t wversion = me->record.version;
    AdmitPass pass;
    auto applied = apply_queue(*q, plan, now, pass);
    // 1. The broken mark, written in place of the pass's check of the request's version.
    QueuedResource qr = *q->qr;
    for (const auto& node : nodes) {
      mark_node_broken(qr, node, now, "a host lost by workload '" + wl.name + "': " + why);
    }
    bool wrote_me = false;
    for (auto& op : applied) {
      if (auto* check = std::get_if<state::CheckOp>(&op); check && check->key == q->qr_record->key) {
        continue;
      }
      if (auto* update = std::get_if<state::UpdateOp>(&op); update && update->key == wkey) {
        wrote_me = true;
      }
      ops.push_back(std::move(op));
    }
    if (!wrote_me) {
      ops.push_back(state::UpdateOp{wkey, to_json(w), wversion});
    }
    ops.push_back(state::UpdateOp{q->qr_record->key, to_json(qr), q->qr_record->version});
    out = w;
    return ops;
  });
  if (!committed) {
    return committed.error();
  }
  return out;
}

Expected<std::vector<std::string>> repair_broken_slices(state::StateStore& store,
                                                        const Workload& wl,
                                                        const MonitorOptions& o) {
  std::vector<std::string> repaired;
  if (!o.provision) {
    return repaired;
  }
  TPUCTL_TRY_ASSIGN(auto found,
                    store.find(state::queued_resource_key(wl.pool, wl.queued_resource)));
  if (!found) {
    return repaired;
  }
  TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(*found));
  if (qr.state != QrState::active) {
    return repaired;
  }
  for (const auto& node : qr.node_ids) {
    if (!node_broken(qr, node) || node_repairing(qr, node)) {
      continue;
    }
    TPUCTL_TRY_ASSIGN(NodeRepair r, repair_node(store, wl.pool, wl.queued_resource, node,
                                                *o.provision, o.clock));
    if (r.repaired) {
      repaired.push_back("slice '" + node + "' placed again on " + util::join(r.hosts, ", "));
    }
  }
  return repaired;
}

} // namespace tpuctl::provision
