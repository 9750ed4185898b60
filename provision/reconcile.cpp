#include "provision/reconcile.hpp"

#include <csignal>
#include <fstream>
#include <map>
#include <unistd.h>

namespace tpuctl::provision {

namespace {

std::string this_host() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) {
    return "localhost";
  }
  return buf;
}

bool pid_running(int pid) {
  if (pid <= 0) {
    return false;
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) {
    return false;
  }
  // "pid (comm) S ...": a zombie ('Z') or dead ('X') process holds nothing.
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) {
    return false;
  }
  char st = line[close + 2];
  return st != 'Z' && st != 'X';
}

} // namespace

nlohmann::json to_json(const Lease& l) {
  return nlohmann::json{
      {"host", l.host}, {"pid", l.pid}, {"taken_ms", l.taken_ms}, {"expires_ms", l.expires_ms}};
}

std::optional<Lease> lease_from_json(const nlohmann::json& doc) {
  if (!doc.is_object()) {
    return std::nullopt;
  }
  Lease l;
  l.host = doc.value("host", "");
  l.pid = doc.value("pid", 0);
  l.taken_ms = doc.value("taken_ms", int64_t{0});
  l.expires_ms = doc.value("expires_ms", int64_t{0});
  return l;
}

std::optional<Lease> lease_of(const QueuedResource& qr) {
  auto it = qr.provisioning.find("lease");
  if (it == qr.provisioning.end()) {
    return std::nullopt;
  }
  return lease_from_json(*it);
}

Lease own_lease(int64_t now_ms, std::chrono::milliseconds ttl) {
  return Lease{this_host(), static_cast<int>(getpid()), now_ms, now_ms + ttl.count()};
}

bool lease_alive(const Lease& lease, int64_t now_ms) {
  if (lease.host == this_host()) {
    return pid_running(lease.pid);
  }
  return now_ms < lease.expires_ms;
}

bool is_own_lease(const Lease& lease) {
  return lease.host == this_host() && lease.pid == static_cast<int>(getpid());
}

bool needs_driver(const QueuedResource& qr, int64_t now_ms) {
  if (qr.state != QrState::provisioning && qr.state != QrState::suspending &&
      qr.state != QrState::deleting) {
    return false;
  }
  auto lease = lease_of(qr);
  return !lease || !lease_alive(*lease, now_ms);
}

std::vector<state::Op> transition_events(const QueuedResource& before,
                                         const QueuedResource& after) {
  std::vector<state::Op> ops;
  for (size_t i = before.history.size(); i < after.history.size(); ++i) {
    const StateChange& c = after.history[i];
    state::Event e;
    e.time_ms = c.time_ms;
    e.pool = after.pool;
    e.subject_kind = state::Kind::queued_resource;
    e.subject = after.id;
    e.type = "STATE_CHANGED";
    e.from_state = std::string(to_string(c.from));
    e.to_state = std::string(to_string(c.to));
    e.initiator = c.initiator;
    e.detail = nlohmann::json{{"reason", c.reason}};
    ops.push_back(state::EventOp{std::move(e)});
  }
  return ops;
}

namespace {

// What reconciling `pool` would commit, read through `s`, with `result` filled in.
Expected<std::vector<state::Op>> plan_reconcile(state::StateStore& s, const std::string& pool,
                                                const state::Clock& clock,
                                                const SchedulerPolicy& policy,
                                                ReconcileResult& result) {
  result = {};
  TPUCTL_TRY_ASSIGN(PoolView view, load_pool(s, pool));
  TPUCTL_TRY_ASSIGN(auto qrs, list_queued_resources(s, pool));
  const int64_t now = state::to_unix_ms(clock());
  SchedulePlan plan = schedule(view, qrs, now, policy);
  std::map<std::string, const QueuedResource*> before;
  for (const auto& q : qrs) {
    before[q.id] = &q;
  }
  std::vector<state::Op> ops;
  for (const auto& q : plan.changed) {
    ops.push_back(state::UpdateOp{state::queued_resource_key(pool, q.id), to_json(q), q.version});
    auto events = transition_events(*before[q.id], q);
    ops.insert(ops.end(), events.begin(), events.end());
  }
  for (const auto& [id, hosts] : plan.claims) {
    ops.push_back(state::ClaimOp{pool, hosts, id, std::chrono::seconds(0)});
  }
  // Requests nobody is carrying, as they will be after this commit.
  std::map<std::string, const QueuedResource*> after;
  for (const auto& q : qrs) {
    after[q.id] = &q;
  }
  for (const auto& q : plan.changed) {
    after[q.id] = &q;
  }
  // A request whose lease this process holds (a delete or reset that took it) is ours to
  // carry, but needs no background driver.
  bool orphaned = false;
  for (const auto& [id, q] : after) {
    auto lease = lease_of(*q);
    if (needs_driver(*q, now)) {
      result.needs_driver.push_back(id);
      orphaned = true;
    } else if (lease && is_own_lease(*lease)) {
      result.needs_driver.push_back(id);
    }
  }
  result.changed = plan.changed;
  if (orphaned) {
    result.driver_pools.push_back(pool);
  }
  return ops;
}

} // namespace

Expected<ReconcileResult> reconcile_pool(state::StateStore& store, const std::string& pool,
                                         const state::Clock& clock, const SchedulerPolicy& policy) {
  // Most commands find nothing to change: a plain read says so without taking the store's
  // write lock (SQLite) or a guarded transaction (etcd), so read-only commands never queue
  // behind writers. Anything to change is planned again inside the transaction.
  ReconcileResult result;
  TPUCTL_TRY_ASSIGN(auto planned, plan_reconcile(store, pool, clock, policy, result));
  if (planned.empty()) {
    return result;
  }
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    return plan_reconcile(s, pool, clock, policy, result);
  });
  if (!committed) {
    return committed.error();
  }
  return result;
}

Expected<ReconcileResult> reconcile_all(state::StateStore& store, const state::Clock& clock,
                                        const SchedulerPolicy& policy) {
  TPUCTL_TRY_ASSIGN(state::Listing pools, store.list(state::Kind::pool, ""));
  ReconcileResult all;
  for (const auto& p : pools.records) {
    TPUCTL_TRY_ASSIGN(ReconcileResult r, reconcile_pool(store, p.key.pool, clock, policy));
    all.changed.insert(all.changed.end(), r.changed.begin(), r.changed.end());
    all.needs_driver.insert(all.needs_driver.end(), r.needs_driver.begin(), r.needs_driver.end());
    all.driver_pools.insert(all.driver_pools.end(), r.driver_pools.begin(), r.driver_pools.end());
  }
  return all;
}

} // namespace tpuctl::provision
