#include "provision/queue/reconcile.hpp"

#include <csignal>
#include <fstream>
#include <map>
#include <set>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "provision/queue/usage.hpp"

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
    add_usage_detail(e.detail, after);
    ops.push_back(state::EventOp{std::move(e)});
  }
  return ops;
}

namespace {

// What reconciling `pool` would commit, read through `s`, with `result` filled in. Requests in
// `excluded` are left out of the pass; with `only`, the ops are those of that request alone
// (the pass is still planned over every request, so its decision is the same).
Expected<std::vector<state::Op>> plan_reconcile(state::StateStore& s, const std::string& pool,
                                                const state::Clock& clock,
                                                const SchedulerPolicy& policy,
                                                const std::set<std::string>& excluded,
                                                const std::string& only, ReconcileResult& result) {
  result = {};
  TPUCTL_TRY_ASSIGN(PoolView view, load_pool(s, pool));
  TPUCTL_TRY_ASSIGN(auto qrs, list_queued_resources(s, pool));
  std::erase_if(qrs, [&](const QueuedResource& q) { return excluded.count(q.id) > 0; });
  const int64_t now = state::to_unix_ms(clock());
  SchedulePlan plan = schedule(view, qrs, now, policy);
  std::map<std::string, const QueuedResource*> before;
  for (const auto& q : qrs) {
    before[q.id] = &q;
  }
  std::vector<state::Op> ops;
  for (const auto& q : plan.changed) {
    if (!only.empty() && q.id != only) {
      continue;
    }
    ops.push_back(state::UpdateOp{state::queued_resource_key(pool, q.id), to_json(q), q.version});
    auto events = transition_events(*before[q.id], q);
    ops.insert(ops.end(), events.begin(), events.end());
    result.changed.push_back(q);
  }
  for (const auto& [id, hosts] : plan.claims) {
    if (only.empty() || id == only) {
      ops.push_back(state::ClaimOp{pool, hosts, id, std::chrono::seconds(0)});
    }
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
  if (orphaned) {
    result.driver_pools.push_back(pool);
  }
  return ops;
}

// Reconciles `pool` one request at a time, after the pass as a whole could not be recorded: a
// request whose own change the store refuses fails on its own (fail_unrecordable), and if even
// that cannot be recorded it is left out of the pass, so the others still move.
Expected<ReconcileResult> reconcile_one_by_one(state::StateStore& store, const std::string& pool,
                                               const state::Clock& clock,
                                               const SchedulerPolicy& policy) {
  ReconcileResult total;
  std::set<std::string> excluded;
  for (int round = 0; round < 256; ++round) {
    ReconcileResult planned;
    TPUCTL_TRY_ASSIGN(auto ops, plan_reconcile(store, pool, clock, policy, excluded, "", planned));
    total.needs_driver = planned.needs_driver;
    total.driver_pools = planned.driver_pools;
    if (ops.empty() || planned.changed.empty()) {
      break;
    }
    const std::string id = planned.changed.front().id;
    ReconcileResult one;
    auto committed = store.transact([&](state::StateStore& s) {
      return plan_reconcile(s, pool, clock, policy, excluded, id, one);
    });
    if (committed) {
      total.changed.insert(total.changed.end(), one.changed.begin(), one.changed.end());
      continue;
    }
    if (!state::is_permanent_refusal(committed.error())) {
      return committed.error();
    }
    auto failed = fail_unrecordable(store, pool, id, clock, committed.error());
    if (failed) {
      if (*failed) {
        total.changed.push_back(**failed);
      }
      continue;
    }
    if (!state::is_permanent_refusal(failed.error())) {
      return failed.error();
    }
    spdlog::warn("queued resource '{}' in pool '{}' cannot be recorded ({}): it is left out of "
                 "scheduling until it is deleted",
                 id, pool, failed.error().message);
    excluded.insert(id);
  }
  return total;
}

} // namespace

Expected<std::optional<QueuedResource>>
fail_unrecordable(state::StateStore& store, const std::string& pool, const std::string& id,
                  const state::Clock& clock, const Error& refusal) {
  std::optional<QueuedResource> out;
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    out.reset();
    TPUCTL_TRY_ASSIGN(auto found, s.find(state::queued_resource_key(pool, id)));
    if (!found) {
      return std::vector<state::Op>{};
    }
    TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(*found));
    QueuedResource before = qr;
    const int64_t now = state::to_unix_ms(clock());
    qr.error = QrError{std::string(k_state_store_refused),
                       "the state store cannot record this request (" + refusal.message +
                           "): it fails on its own and its hosts are freed; ask for a smaller "
                           "slice, or raise the store's limits",
                       -1, "", ""};
    qr.nodes.clear();
    qr.pending_reason.clear();
    qr.provisioning = nlohmann::json::object(); // the report and lease: what may have been big
    transition(qr, QrState::failed, state::Initiator::service, now, qr.error->message);
    std::vector<state::Op> ops{
        state::UpdateOp{state::queued_resource_key(pool, id), to_json(qr), qr.version}};
    TPUCTL_TRY_ASSIGN(auto held, s.claims_of(pool, id));
    if (!held.empty()) {
      std::vector<std::string> hosts;
      for (const auto& c : held) {
        hosts.push_back(c.host);
      }
      ops.push_back(state::ReleaseOp{pool, std::move(hosts), id});
    }
    auto events = transition_events(before, qr);
    ops.insert(ops.end(), events.begin(), events.end());
    out = std::move(qr);
    return ops;
  });
  if (!committed) {
    return committed.error();
  }
  if (out) {
    out->version = committed->revision;
  }
  return out;
}

Expected<ReconcileResult> reconcile_pool(state::StateStore& store, const std::string& pool,
                                         const state::Clock& clock, const SchedulerPolicy& policy) {
  // Most commands find nothing to change: a plain read says so without taking the store's
  // write lock (SQLite) or a guarded transaction (etcd), so read-only commands never queue
  // behind writers. Anything to change is planned again inside the transaction.
  ReconcileResult result;
  const std::set<std::string> none;
  TPUCTL_TRY_ASSIGN(auto planned, plan_reconcile(store, pool, clock, policy, none, "", result));
  if (planned.empty()) {
    return result;
  }
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    return plan_reconcile(s, pool, clock, policy, none, "", result);
  });
  if (committed) {
    return result;
  }
  if (!state::is_permanent_refusal(committed.error())) {
    return committed.error();
  }
  // The store refuses the pass as a whole (too large for one etcd transaction, say): one
  // request's problem must stay that request's.
  spdlog::info("pool '{}': the scheduler's pass cannot be recorded at once ({}); recording it "
               "request by request",
               pool, committed.error().message);
  return reconcile_one_by_one(store, pool, clock, policy);
}

Expected<ReconcileResult> reconcile_all(state::StateStore& store, const state::Clock& clock,
                                        const SchedulerPolicy& policy) {
  TPUCTL_TRY_ASSIGN(state::Listing pools, store.list(state::Kind::pool, ""));
  ReconcileResult all;
  for (const auto& p : pools.records) {
    auto r = reconcile_pool(store, p.key.pool, clock, policy);
    if (!r) {
      if (state::has_reason(r.error(), state::reason::k_unavailable) && !store.ping()) {
        return r.error(); // the store itself is gone: every pool would say the same
      }
      all.errors.push_back(r.error()); // this pool's problem, not the others'
      continue;
    }
    all.changed.insert(all.changed.end(), r->changed.begin(), r->changed.end());
    all.needs_driver.insert(all.needs_driver.end(), r->needs_driver.begin(), r->needs_driver.end());
    all.driver_pools.insert(all.driver_pools.end(), r->driver_pools.begin(), r->driver_pools.end());
  }
  return all;
}

} // namespace tpuctl::provision
