#include "provision/workload/cluster_resize.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "provision/pool/pools.hpp"
#include "provision/queue/placement.hpp"
#include "provision/slice/node_repair.hpp"
#include "provision/workload/workload.hpp"
#include "provision/workload/workload_admit.hpp"
#include "provision/workload/workload_steps.hpp"
#include "topology/accelerator_type.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

using Json = nlohmann::json;
using Ms = std::chrono::milliseconds;

state::Key cluster_key(const std::string& pool, const std::string& name) {
  return state::record_key(state::Kind::cluster, pool, name);
}

state::Op resize_event(const QueuedResource& qr, int64_t now, const std::string& type,
                       const std::string& message) {
  state::Event e;
  e.time_ms = now;
  e.pool = qr.pool;
  e.subject_kind = state::Kind::queued_resource;
  e.subject = qr.id;
  e.type = type;
  e.from_state = std::string(to_string(qr.state));
  e.to_state = e.from_state;
  e.initiator = state::Initiator::user;
  e.detail = Json{{"message", message}};
  return state::EventOp{e};
}

struct Snapshot {
  state::Record cluster_record;
  Cluster cluster;
  state::Record qr_record;
  QueuedResource qr;
};

// The cluster and its request, checked against the request to resize. Errors: as resize_cluster.
Expected<Snapshot> read_cluster(state::StateStore& s, const ClusterRequest& r) {
  Snapshot out;
  TPUCTL_TRY_ASSIGN(out.cluster_record, s.get(cluster_key(r.pool, r.name)));
  TPUCTL_TRY_ASSIGN(out.cluster, cluster_from_json(out.cluster_record.doc));
  out.cluster.version = out.cluster_record.version;
  const Cluster& c = out.cluster;
  const std::string shape =
      c.tpu_type + " x " + std::to_string(c.num_slices) + ", " + std::string(to_string(c.tier));
  TPUCTL_TRY_ASSIGN(auto type, topology::parse_accelerator_type(r.tpu_type));
  if (type.name != c.tpu_type) {
    return usage_error("cluster '" + c.name + "' is " + shape + "; --tpu-type " +
                       util::printable(r.tpu_type) +
                       " is another type: a resize keeps the type (delete the cluster and "
                       "create it again to change it: tpuctl cluster delete " +
                       c.name + " --force)");
  }
  if (r.tier != c.tier) {
    return usage_error("cluster '" + c.name + "' is " + shape + "; the " +
                       std::string(to_string(r.tier)) +
                       " tier asked for is another: a resize keeps the tier (delete the cluster "
                       "and create it again to change it)");
  }
  TPUCTL_TRY_ASSIGN(out.qr_record, s.get(state::queued_resource_key(r.pool, c.queued_resource)));
  TPUCTL_TRY_ASSIGN(out.qr, qr_from_record(out.qr_record));
  if (out.qr.state != QrState::active) {
    return Error(ErrorKind::failure, "cluster '" + c.name + "' is " +
                                         std::string(to_string(out.qr.state)) +
                                         ": resize it once it is ACTIVE (see 'tpuctl cluster "
                                         "describe " +
                                         c.name + "')");
  }
  return out;
}

std::vector<std::string> node_hosts(const QrNode& node) {
  std::vector<std::string> out;
  for (const auto& w : node.workers) {
    out.push_back(w.host);
  }
  return out;
}

// Removes nodes `ids` from the request and releases their hosts (what the request owns of them).
Status remove_nodes(state::StateStore& store, const ClusterRequest& r,
                    const std::vector<std::string>& ids, const Cluster* cluster_after,
                    int64_t now) {
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(auto rec, s.get(state::queued_resource_key(r.pool, r.name)));
    TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(rec));
    TPUCTL_TRY_ASSIGN(PoolView view, load_pool(s, r.pool));
    std::set<std::string> owned;
    for (const auto& c : view.claims) {
      if (c.owner == qr.id) {
        owned.insert(c.host);
      }
    }
    std::vector<std::string> release;
    std::vector<QrNode> kept;
    for (const auto& n : qr.nodes) {
      if (std::find(ids.begin(), ids.end(), n.id) == ids.end()) {
        kept.push_back(n);
        continue;
      }
      for (const auto& h : node_hosts(n)) {
        if (owned.count(h) != 0) {
          release.push_back(h);
        }
      }
    }
    qr.nodes = std::move(kept);
    qr.node_ids.erase(std::remove_if(qr.node_ids.begin(), qr.node_ids.end(),
                                     [&](const std::string& id) {
                                       return std::find(ids.begin(), ids.end(), id) != ids.end();
                                     }),
                      qr.node_ids.end());
    for (const auto& id : ids) {
      if (qr.provisioning.contains(k_node_repair_mark)) {
        qr.provisioning[k_node_repair_mark].erase(id);
      }
    }
    std::vector<state::Op> ops;
    if (!release.empty()) {
      ops.push_back(state::ReleaseOp{r.pool, release, qr.id});
    }
    ops.push_back(state::UpdateOp{rec.key, to_json(qr), rec.version});
    if (cluster_after != nullptr) {
      ops.push_back(state::UpdateOp{cluster_key(r.pool, r.name), to_json(*cluster_after),
                                    state::k_any_version});
    }
    ops.push_back(
        resize_event(qr, now, "NODES_REMOVED", "slices removed: " + util::join(ids, ", ")));
    return ops;
  });
  return committed ? tpuctl::ok() : Status(committed.error());
}

Expected<ClusterResize> grow(state::StateStore& store, const ClusterRequest& r,
                             const ProvisionOptions& provision, const ResizeWait& wait,
                             const state::Clock& clock,
                             const std::function<void(const std::string&)>& say) {
  int64_t now = state::to_unix_ms(clock());
  ClusterResize out;
  std::vector<int> indices; // of the nodes to provision
  QueuedResource placed;
  auto place = [&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    out = {};
    indices.clear();
    TPUCTL_TRY_ASSIGN(Snapshot snap, read_cluster(s, r));
    QueuedResource& qr = snap.qr;
    out.from = snap.cluster.num_slices;
    out.cluster = snap.cluster;
    TPUCTL_TRY_ASSIGN(auto type, topology::parse_accelerator_type(qr.accelerator_type));
    TPUCTL_TRY_ASSIGN(PoolView view, load_pool(s, r.pool));
    std::map<std::string, std::string> address;
    for (const auto& h : view.hosts) {
      address[h.name] = h.address;
    }
    // Nodes past the cluster's count were placed by a grow that did not finish: provision them.
    for (int i = snap.cluster.num_slices; i < static_cast<int>(qr.nodes.size()); ++i) {
      indices.push_back(i);
      out.added.push_back(qr.nodes[static_cast<size_t>(i)].id);
    }
    // A size the pool could not hold even with every host free is refused at once (as qr
    // create refuses it), not waited for.
    if (!fits_empty(view.info.layout, type, r.num_slices)) {
      NoFit why = explain_no_fit(view.grid, type, r.num_slices, r.pool);
      return Error(ErrorKind::capacity,
                   "cluster '" + r.name + "' cannot grow to " + std::to_string(r.num_slices) +
                       " slices: " + why.message + " (nothing changed)",
                   "never_fits");
    }
    HostGrid grid = view.grid;
    std::vector<std::string> claim;
    int next = static_cast<int>(qr.nodes.size());
    while (static_cast<int>(qr.nodes.size()) < r.num_slices) {
      auto p = try_place_slice(grid, type);
      if (!p) {
        return Error(ErrorKind::capacity,
                     "cluster '" + r.name + "' cannot grow to " + std::to_string(r.num_slices) +
                         " slices: " + explain_no_fit(grid, type).message +
                         " (nothing changed; run it again once hosts are free)",
                     "no_free_block");
      }
      std::string id;
      do {
        id = qr.id + "-" + std::to_string(next++);
      } while (std::find(qr.node_ids.begin(), qr.node_ids.end(), id) != qr.node_ids.end());
      QrNode node;
      node.id = id;
      for (const auto& ph : p->hosts) {
        node.workers.push_back(QrWorker{ph.worker, ph.host, address[ph.host], ph.position});
        claim.push_back(ph.host);
        grid.at(ph.position).state = CellState::claimed;
        grid.at(ph.position).owner = qr.id;
      }
      grid.refresh();
      qr.provisioning[k_node_repair_mark][id] = Json{{"since", now}, {"hosts", node_hosts(node)}};
      indices.push_back(static_cast<int>(qr.nodes.size()));
      out.added.push_back(id);
      qr.nodes.push_back(std::move(node));
      qr.node_ids.push_back(id);
    }
    placed = qr;
    if (claim.empty()) {
      return std::vector<state::Op>{};
    }
    return std::vector<state::Op>{
        state::ClaimOp{r.pool, claim, qr.id, std::chrono::seconds(0)},
        state::UpdateOp{snap.qr_record.key, to_json(qr), snap.qr_record.version},
        resize_event(qr, now, "NODES_ADDED", "slices placed: " + util::join(out.added, ", "))};
  };
  // No room now: the new slices wait for hosts to free up, as any request does, until `wait`
  // says to stop (nothing changes meanwhile).
  const auto deadline = std::chrono::steady_clock::now() + wait.limit;
  std::string said;
  Expected<state::CommitResult> committed = store.transact(place);
  while (!committed && state::has_reason(committed.error(), "no_free_block") && wait.wait &&
         (wait.limit.count() == 0 || std::chrono::steady_clock::now() < deadline)) {
    if (committed.error().message != said) {
      said = committed.error().message;
      say("waiting: " + said);
    }
    TPUCTL_TRY_ASSIGN(const int64_t rev, store.wait_for_change(r.pool, 0, Ms(0)));
    Ms left = Ms(5000);
    if (wait.limit.count() > 0) {
      left = std::min(left,
                      std::chrono::duration_cast<Ms>(deadline - std::chrono::steady_clock::now()));
    }
    (void)store.wait_for_change(r.pool, rev, std::max(left, Ms(0)));
    now = state::to_unix_ms(clock());
    committed = store.transact(place);
  }
  if (!committed) {
    return committed.error();
  }
  if (indices.empty()) {
    return out;
  }
  say("provisioning " + util::counted(indices.size(), "new slice") + " of cluster '" + r.name +
      "': " + util::join(out.added, ", "));
  const std::string failed = provision_nodes(store, r.pool, placed, indices, provision);
  const int64_t done = state::to_unix_ms(clock());
  if (!failed.empty()) {
    TPUCTL_TRY(remove_nodes(store, r, out.added, nullptr, done));
    return Error(ErrorKind::failure, "cluster '" + r.name + "' did not grow: its new slices " +
                                         util::join(out.added, ", ") +
                                         " could not be provisioned: " + failed);
  }
  // Ready: the queue may use them now.
  auto ready = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(Snapshot snap, read_cluster(s, r));
    for (const auto& id : out.added) {
      if (snap.qr.provisioning.contains(k_node_repair_mark)) {
        snap.qr.provisioning[k_node_repair_mark].erase(id);
      }
      snap.qr.provisioning[k_node_ready_mark][id] = done;
    }
    if (snap.qr.provisioning.contains(k_node_repair_mark) &&
        snap.qr.provisioning[k_node_repair_mark].empty()) {
      snap.qr.provisioning.erase(k_node_repair_mark);
    }
    snap.cluster.num_slices = static_cast<int>(snap.qr.nodes.size());
    out.cluster = snap.cluster;
    return std::vector<state::Op>{
        state::UpdateOp{snap.qr_record.key, to_json(snap.qr), snap.qr_record.version},
        state::UpdateOp{snap.cluster_record.key, to_json(snap.cluster),
                        snap.cluster_record.version}};
  });
  if (!ready) {
    return ready.error();
  }
  return out;
}

Expected<ClusterResize> shrink(state::StateStore& store, const ClusterRequest& r, bool force,
                               const state::Clock& clock,
                               const std::function<void(const std::string&)>& say) {
  ClusterResize out;
  std::vector<std::string> leaving;
  int64_t longest_grace = 0;
  // 1. The count drops, the nodes leaving go last, held ones are evicted.
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    out = {};
    leaving.clear();
    longest_grace = 0;
    TPUCTL_TRY_ASSIGN(Snapshot snap, read_cluster(s, r));
    out.from = snap.cluster.num_slices;
    QueuedResource& qr = snap.qr;
    std::vector<std::string> ids;
    for (const auto& n : qr.nodes) {
      ids.push_back(n.id);
    }
    TPUCTL_TRY_ASSIGN(state::Listing listing, s.list(state::Kind::workload, r.pool));
    std::vector<std::pair<state::Record, Workload>> workloads;
    std::map<std::string, std::string> holder; // node id -> workload
    for (const auto& rec : listing.records) {
      auto w = workload_from_record(rec);
      if (!w || w->cluster != r.name) {
        continue;
      }
      for (int i : held_slices(*w, ids)) {
        holder[ids[static_cast<size_t>(i)]] = w->name;
      }
      workloads.emplace_back(rec, std::move(*w));
    }
    // Free slices first, the highest numbers first; then held ones.
    const int remove = static_cast<int>(ids.size()) - r.num_slices;
    std::vector<std::string> held;
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = static_cast<int>(ids.size()) - 1;
           i >= 0 && static_cast<int>(leaving.size()) < remove; --i) {
        const bool is_held = holder.count(ids[static_cast<size_t>(i)]) != 0;
        if (is_held == (pass == 1)) {
          leaving.push_back(ids[static_cast<size_t>(i)]);
          if (is_held) {
            held.push_back(ids[static_cast<size_t>(i)]);
          }
        }
      }
    }
    std::set<std::string> victims;
    for (const auto& id : held) {
      victims.insert(holder[id]);
    }
    if (!victims.empty() && !force) {
      std::vector<std::string> named;
      for (const auto& id : held) {
        named.push_back(id + " (held by " + holder[id] + ")");
      }
      return Error(ErrorKind::failure,
                   "cluster '" + r.name + "' cannot shrink to " + std::to_string(r.num_slices) +
                       " slices without removing " + util::join(named, ", ") +
                       ": add --force to evict their workloads (each gets its grace to "
                       "checkpoint, then waits in the queue), or delete them first");
    }
    // The ones staying first, in their order; then the ones leaving.
    std::vector<QrNode> order;
    for (const auto& n : qr.nodes) {
      if (std::find(leaving.begin(), leaving.end(), n.id) == leaving.end()) {
        order.push_back(n);
      }
    }
    for (const auto& n : qr.nodes) {
      if (std::find(leaving.begin(), leaving.end(), n.id) != leaving.end()) {
        order.push_back(n);
      }
    }
    qr.nodes = order;
    qr.node_ids.clear();
    for (const auto& n : qr.nodes) {
      qr.node_ids.push_back(n.id);
    }
    snap.cluster.num_slices = r.num_slices;
    out.cluster = snap.cluster;
    const int64_t now = state::to_unix_ms(clock());
    std::vector<state::Op> ops{
        state::UpdateOp{snap.qr_record.key, to_json(qr), snap.qr_record.version},
        state::UpdateOp{snap.cluster_record.key, to_json(snap.cluster),
                        snap.cluster_record.version}};
    for (auto& [rec, w] : workloads) {
      const Json before = to_json(w);
      if (victims.count(w.name) != 0 && holds_slices(w.state) &&
          w.state != WorkloadState::evicting) {
        const WorkloadState from = w.state;
        w.state = WorkloadState::evicting;
        w.message = "evicted: cluster " + r.name + " shrinks to " +
                    util::counted(static_cast<size_t>(r.num_slices), "slice") + "; stopping with " +
                    std::to_string(w.termination_grace_ms / 1000) + " s of grace";
        enter(w.time, TimePhase::evicted, now);
        ops.push_back(state_event(w, from, w.state, now, "EVICTED", w.message));
        out.evicted.push_back(w.name);
      }
      if (victims.count(w.name) != 0) {
        longest_grace = std::max(longest_grace, w.termination_grace_ms);
      }
      if (!w.slice_nodes.empty()) {
        w.slices = resolve_slices(w, qr.node_ids);
      }
      if (to_json(w) != before) {
        ops.push_back(state::UpdateOp{rec.key, to_json(w), rec.version});
      } else {
        ops.push_back(state::CheckOp{rec.key, rec.version});
      }
    }
    return ops;
  });
  if (!committed) {
    return committed.error();
  }
  // 2. Wait until no workload holds a slice leaving (their monitors stop them with their grace).
  if (!out.evicted.empty()) {
    say("evicting " + util::join(out.evicted, ", ") + " from the slices leaving cluster '" +
        r.name + "'");
  }
  const auto deadline =
      std::chrono::steady_clock::now() + Ms(longest_grace) + std::chrono::seconds(60);
  std::vector<std::string> still;
  for (;;) {
    still.clear();
    TPUCTL_TRY_ASSIGN(auto rec, store.get(state::queued_resource_key(r.pool, r.name)));
    TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(rec));
    TPUCTL_TRY_ASSIGN(auto workloads, list_workloads(store, r.pool, r.name));
    for (const auto& w : workloads) {
      for (int i : held_slices(w, qr.node_ids)) {
        if (std::find(leaving.begin(), leaving.end(), qr.node_ids[static_cast<size_t>(i)]) !=
            leaving.end()) {
          still.push_back(w.name);
        }
      }
    }
    if (still.empty() || std::chrono::steady_clock::now() > deadline) {
      break;
    }
    std::this_thread::sleep_for(Ms(200));
  }
  if (!still.empty()) {
    return Error(ErrorKind::failure,
                 "cluster '" + r.name + "' is shrinking to " + std::to_string(r.num_slices) +
                     " slices, but " + util::join(still, ", ") +
                     " still holds a slice leaving it: run the same command again once it has "
                     "stopped (see 'tpuctl workload describe " +
                     still.front() + "')");
  }
  // 3. The nodes go, and their hosts.
  TPUCTL_TRY(remove_nodes(store, r, leaving, nullptr, state::to_unix_ms(clock())));
  out.removed = leaving;
  return out;
}

} // namespace

Status check_resize(state::StateStore& store, const ClusterRequest& request) {
  auto snap = read_cluster(store, request);
  return snap ? tpuctl::ok() : Status(snap.error());
}

Expected<ClusterResize> resize_cluster(state::StateStore& store, const ClusterRequest& r,
                                       bool force, const ProvisionOptions& provision,
                                       const ResizeWait& wait, const state::Clock& clock,
                                       const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) {
      progress(line);
    }
  };
  TPUCTL_TRY_ASSIGN(Snapshot snap, read_cluster(store, r));
  const int nodes = static_cast<int>(snap.qr.nodes.size());
  Expected<ClusterResize> out = ClusterResize{snap.cluster, snap.cluster.num_slices, {}, {}, {}};
  // (Nodes past the cluster's count are a grow that did not finish: a grow provisions them; a
  // resize to the count removes them.)
  if (r.num_slices > snap.cluster.num_slices) {
    out = grow(store, r, provision, wait, clock, say);
  } else if (r.num_slices < nodes) {
    out = shrink(store, r, force, clock, say);
  }
  if (out) {
    if (auto pass = admit_queue(store, r.pool, r.name, state::to_unix_ms(clock())); !pass) {
      return pass.error();
    }
  }
  return out;
}

} // namespace tpuctl::provision
