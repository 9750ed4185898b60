#include "provision/slice/node_repair.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "provision/pool/pools.hpp"
#include "provision/queue/placement.hpp"
#include "provision/slice/slice_env.hpp"
#include "topology/accelerator_type.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

using Json = nlohmann::json;

// Replaces the node's repair mark: with its ready time when `ready`, else by nothing.
Status clear_mark(state::StateStore& store, const std::string& pool, const std::string& qr_id,
                  const std::string& node_id, bool ready, int64_t now) {
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(auto found, s.find(state::queued_resource_key(pool, qr_id)));
    if (!found) {
      return std::vector<state::Op>{};
    }
    TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(*found));
    if (qr.provisioning.contains(k_node_repair_mark)) {
      qr.provisioning[k_node_repair_mark].erase(node_id);
      if (qr.provisioning[k_node_repair_mark].empty()) {
        qr.provisioning.erase(k_node_repair_mark);
      }
    }
    if (ready) {
      qr.provisioning[k_node_ready_mark][node_id] = now;
      if (qr.provisioning.contains(k_node_broken_mark)) {
        qr.provisioning[k_node_broken_mark].erase(node_id);
        if (qr.provisioning[k_node_broken_mark].empty()) {
          qr.provisioning.erase(k_node_broken_mark);
        }
      }
    }
    return std::vector<state::Op>{
        state::UpdateOp{state::queued_resource_key(pool, qr_id), to_json(qr), qr.version}};
  });
  return committed ? tpuctl::ok() : Status(committed.error());
}

} // namespace

std::string provision_nodes(state::StateStore& store, const std::string& pool,
                            const QueuedResource& qr, const std::vector<int>& nodes,
                            const ProvisionOptions& options) {
  ProvisionOptions po = options;
  po.only_nodes = nodes;
  auto report = [&]() -> Expected<ProvisionReport> {
    TPUCTL_TRY_ASSIGN(PoolView view, load_pool(store, pool));
    return provision_slice(qr, view, po);
  }();
  if (!report) {
    return report.error().message;
  }
  if (!report->ok) {
    return report->failure ? report->failure->message : "provisioning failed";
  }
  if (report->agent_sha256 != agent_sha256(qr)) {
    return "the agent built now differs from the one its other slices run (use the tpuctl "
           "that provisioned them, or delete the request and create it again)";
  }
  return "";
}

int64_t node_ready_ms(const QueuedResource& qr, const std::string& node_id) {
  const Json& marks = qr.provisioning.value(k_node_ready_mark, Json::object());
  return marks.is_object() ? marks.value(node_id, int64_t{0}) : 0;
}

bool node_repairing(const QueuedResource& qr, const std::string& node_id) {
  const Json& marks = qr.provisioning.value(k_node_repair_mark, Json::object());
  return marks.is_object() && marks.contains(node_id);
}

std::string node_broken_why(const QueuedResource& qr, const std::string& node_id) {
  const Json& marks = qr.provisioning.value(k_node_broken_mark, Json::object());
  if (!marks.is_object() || !marks.contains(node_id) || !marks[node_id].is_object()) {
    return "";
  }
  const Json& m = marks[node_id];
  if (m.value("since", int64_t{0}) < qr.active_since_ms) {
    return ""; // the request was placed again whole since
  }
  const std::string why = m.value("why", std::string());
  return why.empty() ? "waiting for a repair" : why;
}

bool node_broken(const QueuedResource& qr, const std::string& node_id) {
  return !node_broken_why(qr, node_id).empty();
}

void mark_node_broken(QueuedResource& qr, const std::string& node_id, int64_t now_ms,
                      const std::string& why) {
  qr.provisioning[k_node_broken_mark][node_id] = Json{{"since", now_ms}, {"why", why}};
}

Expected<NodeRepair> repair_node(state::StateStore& store, const std::string& pool,
                                 const std::string& qr_id, const std::string& node_id,
                                 const ProvisionOptions& options, const state::Clock& clock) {
  const int64_t now = state::to_unix_ms(clock());
  NodeRepair out;
  QueuedResource placed;
  int index = -1;
  // 1. Place the node again and move its claims, in one transaction.
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    out = {};
    index = -1;
    TPUCTL_TRY_ASSIGN(auto found, s.find(state::queued_resource_key(pool, qr_id)));
    if (!found) {
      out.why = "queued resource '" + qr_id + "' is gone";
      return std::vector<state::Op>{};
    }
    TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(*found));
    if (qr.state != QrState::active) {
      out.why = "queued resource '" + qr_id + "' is " + std::string(to_string(qr.state));
      return std::vector<state::Op>{};
    }
    for (size_t i = 0; i < qr.nodes.size(); ++i) {
      if (qr.nodes[i].id == node_id) {
        index = static_cast<int>(i);
      }
    }
    if (index < 0) {
      out.why = "queued resource '" + qr_id + "' has no node '" + node_id + "'";
      return std::vector<state::Op>{};
    }
    TPUCTL_TRY_ASSIGN(auto type, topology::parse_accelerator_type(qr.accelerator_type));
    TPUCTL_TRY_ASSIGN(PoolView view, load_pool(s, pool));
    std::map<std::string, const HostEntry*> by_name;
    for (const auto& h : view.hosts) {
      by_name[h.name] = &h;
    }
    std::set<std::string> owned;
    for (const auto& c : view.claims) {
      if (c.owner == qr.id) {
        owned.insert(c.host);
      }
    }
    // The node's own hosts count as free, but for the drained (lost) ones.
    HostGrid grid = view.grid;
    std::vector<std::string> old_hosts;
    QrNode& node = qr.nodes[static_cast<size_t>(index)];
    for (const auto& w : node.workers) {
      if (owned.count(w.host) != 0) {
        old_hosts.push_back(w.host);
      }
      auto h = by_name.find(w.host);
      if (h == by_name.end() || !h->second->drain_reason.empty()) {
        continue;
      }
      GridCell& cell = grid.at(h->second->coords);
      if (cell.host == w.host && cell.state == CellState::claimed) {
        cell.state = CellState::free;
        cell.owner.clear();
      }
    }
    // A repair may take the pool's spares: that is what they are held back for.
    grid.free_spares();
    grid.refresh();
    auto p = try_place_slice(grid, type);
    if (!p) {
      out.why = "no free " + qr.accelerator_type + " block for slice '" + node_id + "' (" +
                explain_no_fit(grid, type).message + ")";
      return std::vector<state::Op>{};
    }
    node.workers.clear();
    for (const auto& ph : p->hosts) {
      auto h = by_name.find(ph.host);
      node.workers.push_back(QrWorker{ph.worker, ph.host,
                                      h == by_name.end() ? std::string() : h->second->address,
                                      ph.position});
      out.hosts.push_back(ph.host);
    }
    qr.provisioning[k_node_repair_mark][node_id] = Json{{"since", now}, {"hosts", out.hosts}};
    placed = qr;
    std::vector<state::Op> ops;
    if (!old_hosts.empty()) {
      ops.push_back(state::ReleaseOp{pool, old_hosts, qr.id});
    }
    ops.push_back(state::ClaimOp{pool, out.hosts, qr.id, std::chrono::seconds(0)});
    ops.push_back(
        state::UpdateOp{state::queued_resource_key(pool, qr_id), to_json(qr), qr.version});
    return ops;
  });
  if (!committed) {
    return committed.error();
  }
  if (index < 0 || out.hosts.empty()) {
    return out; // why says
  }
  // 2. Provision the new hosts only.
  const std::string failed = provision_nodes(store, pool, placed, {index}, options);
  // 3. Ready, or not repaired here.
  TPUCTL_TRY(clear_mark(store, pool, qr_id, node_id, failed.empty(), state::to_unix_ms(clock())));
  if (!failed.empty()) {
    out.why = "slice '" + node_id + "' could not be provisioned on " + util::join(out.hosts, ", ") +
              ": " + failed;
    out.hosts.clear();
    return out;
  }
  out.repaired = true;
  return out;
}

} // namespace tpuctl::provision
