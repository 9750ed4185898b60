#include "provision/slice/driver.hpp"

#include <spdlog/spdlog.h>

#include "provision/pool/pools.hpp"
#include "provision/pool/request_ssh.hpp"
#include "provision/queue/usage.hpp"
#include "util/failpoint.hpp"

namespace tpuctl::provision {

namespace {

using Json = nlohmann::json;

bool transient(QrState s) {
  return s == QrState::provisioning || s == QrState::suspending || s == QrState::deleting;
}

struct Taken {
  QueuedResource qr;
  // The lease was another process's, now dead (killed mid-step): what it started on the workers
  // may still be running.
  bool taken_over = false;
  std::string waiting_for; // not ours to carry: why (no lease taken)
};

// Takes the lease when the request is transient and no other live process holds it. Returns
// the record (with our lease) or nullopt when there is nothing for us to do.
Expected<std::optional<Taken>> take_lease(state::StateStore& store, const std::string& pool,
                                          const std::string& id, const DriveOptions& options) {
  std::optional<Taken> taken;
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    taken.reset();
    // Gone already (another driver finished its delete a moment ago): nothing to do.
    TPUCTL_TRY_ASSIGN(auto found, s.find(state::queued_resource_key(pool, id)));
    if (!found) {
      return std::vector<state::Op>{};
    }
    TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(*found));
    const int64_t now = state::to_unix_ms(options.clock());
    if (!transient(qr.state)) {
      return std::vector<state::Op>{};
    }
    auto lease = lease_of(qr);
    if (lease && lease_alive(*lease, now) && !is_own_lease(*lease)) {
      return std::vector<state::Op>{};
    }
    // Whose keys may do this request's SSH work: the pool says (ssh_work.hpp).
    TPUCTL_TRY_ASSIGN(auto pool_record, s.get(state::pool_key(pool)));
    TPUCTL_TRY_ASSIGN(PoolInfo info, pool_from_json(pool_record.doc));
    if (auto refusal = ssh_work_refusal(s, info, qr.owner, options.as_controller)) {
      taken = Taken{qr, false, *refusal};
      if (waiting_for(qr) == *refusal) {
        return std::vector<state::Op>{};
      }
      qr.provisioning[k_waiting_for] = *refusal; // said once, where describe shows it
      return std::vector<state::Op>{
          state::UpdateOp{state::queued_resource_key(pool, id), to_json(qr), qr.version}};
    }
    if (lease && !is_own_lease(*lease)) {
      spdlog::info("queued resource '{}': taking over from a driver that died (pid {} on {})", id,
                   lease->pid, lease->host);
    }
    qr.provisioning.erase(k_waiting_for);
    qr.provisioning["lease"] = to_json(own_lease(now, options.lease_ttl));
    taken = Taken{qr, lease && !is_own_lease(*lease), ""};
    return std::vector<state::Op>{
        state::UpdateOp{state::queued_resource_key(pool, id), to_json(qr), qr.version}};
  });
  if (!committed) {
    return committed.error();
  }
  if (taken) {
    taken->qr.version = committed->revision;
  }
  return taken;
}

} // namespace

std::string waiting_for(const QueuedResource& qr) {
  auto it = qr.provisioning.find(k_waiting_for);
  return it != qr.provisioning.end() && it->is_string() ? it->get<std::string>() : "";
}

namespace {

// Commits the end of a drive: fn edits the fresh record and adds ops; nothing happens when the
// request left `expected` or another process took the lease meanwhile.
using FinishFn = std::function<void(QueuedResource&, std::vector<state::Op>&, int64_t now)>;
Expected<DriveResult> finish(state::StateStore& store, const std::string& pool,
                             const std::string& id, QrState expected, const DriveOptions& options,
                             const FinishFn& fn) {
  DriveResult result;
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    result = {};
    TPUCTL_TRY_ASSIGN(auto found, s.find(state::queued_resource_key(pool, id)));
    if (!found) {
      return std::vector<state::Op>{};
    }
    TPUCTL_TRY_ASSIGN(QueuedResource qr, qr_from_record(*found));
    auto lease = lease_of(qr);
    if (qr.state != expected || !lease || !is_own_lease(*lease)) {
      result.qr = qr; // moved on without us
      return std::vector<state::Op>{};
    }
    QueuedResource before = qr;
    std::vector<state::Op> ops;
    const int64_t now = state::to_unix_ms(options.clock());
    fn(qr, ops, now);
    qr.provisioning.erase("lease");
    result.carried = true;
    if (qr.state != QrState::deleting) {
      ops.insert(ops.begin(),
                 state::UpdateOp{state::queued_resource_key(pool, id), to_json(qr), qr.version});
      auto events = transition_events(before, qr);
      ops.insert(ops.end(), events.begin(), events.end());
      result.qr = qr;
    }
    return ops;
  });
  if (!committed && state::is_permanent_refusal(committed.error()) && result.carried) {
    // What provisioning found cannot be recorded (too large for the store): the request fails
    // on its own, its hosts freed, instead of staying PROVISIONING for driver after driver.
    spdlog::warn("queued resource '{}': its {} outcome cannot be recorded: {}", id,
                 to_string(expected), committed.error().message);
    TPUCTL_TRY_ASSIGN(auto failed,
                      fail_unrecordable(store, pool, id, options.clock, committed.error()));
    result.qr = std::move(failed);
    return result;
  }
  if (!committed) {
    return committed.error();
  }
  if (result.qr && result.carried) {
    result.qr->version = committed->revision;
  }
  return result;
}

// Releases whatever `owner` still holds (the claims table is the truth, not the record).
Expected<std::vector<std::string>> held_hosts(state::StateStore& store, const std::string& pool,
                                              const std::string& owner) {
  TPUCTL_TRY_ASSIGN(auto claims, store.claims_of(pool, owner));
  std::vector<std::string> hosts;
  for (const auto& c : claims) {
    hosts.push_back(c.host);
  }
  return hosts;
}

void kill_processes(const QueuedResource& qr, const PoolView& view, const DriveOptions& options,
                    const remote::CancelToken* cancel) {
  if (qr.nodes.empty() || qr.uid.empty()) {
    return;
  }
  auto stopped = stop_slice_processes(qr, view, options.provision.ssh, cancel);
  if (!stopped) {
    spdlog::warn("queued resource '{}': could not stop its processes: {}", qr.id,
                 stopped.error().message);
    return;
  }
  for (const auto& r : *stopped) {
    if (!r.succeeded()) {
      spdlog::warn("queued resource '{}': host '{}': processes not stopped: {}", qr.id, r.host,
                   r.error.empty() ? std::string(remote::to_string(r.outcome)) : r.error);
    }
  }
}

} // namespace

Expected<DriveResult> drive(state::StateStore& store, const std::string& pool,
                            const std::string& id, const DriveOptions& given,
                            const remote::CancelToken* cancel) {
  DriveOptions options = given;
  TPUCTL_TRY_ASSIGN(auto taken, take_lease(store, pool, id, options));
  if (!taken || !taken->waiting_for.empty()) {
    TPUCTL_TRY_ASSIGN(auto found, store.find(state::queued_resource_key(pool, id)));
    DriveResult r;
    if (found) {
      TPUCTL_TRY_ASSIGN(r.qr, qr_from_record(*found));
    }
    if (taken) {
      r.waiting_for = taken->waiting_for;
    }
    return r;
  }
  const QueuedResource qr = taken->qr;
  // Its owner's processes carry it on with the SSH settings it was made with.
  TPUCTL_TRY_ASSIGN(options.provision.ssh,
                    request_ssh(given.provision.ssh, qr.ssh, qr.owner, store.actor()));
  TPUCTL_TRY_ASSIGN(PoolView view, load_pool(store, pool));
  TPUCTL_TRY_ASSIGN(auto hosts, held_hosts(store, pool, id));

  switch (qr.state) {
  case QrState::provisioning: {
    util::failpoint("provision.claimed");
    if (taken->taken_over) {
      // Whatever the dead driver left running (a preflight still listening on its port).
      kill_processes(qr, view, options, cancel);
    }
    auto report = provision_slice(qr, view, options.provision, cancel);
    if (cancel != nullptr && cancel->cancelled()) {
      // Interrupted (Ctrl-C): the steps in flight were killed on the workers; the request keeps
      // its hosts and stays PROVISIONING, and the next driver starts it over.
      return finish(store, pool, id, QrState::provisioning, options,
                    [](QueuedResource&, std::vector<state::Op>&, int64_t) {});
    }
    return finish(
        store, pool, id, QrState::provisioning, options,
        [&](QueuedResource& q, std::vector<state::Op>& ops, int64_t now) {
          if (report && report->ok) {
            q.provisioning["agent_sha256"] = report->agent_sha256;
            q.provisioning["report"] = to_stored_json(*report);
            auto script = q.metadata.find("startup-script");
            if (script == q.metadata.end() || script->second.empty()) {
              q.provisioning[k_nothing_launched] = true; // every agent has exited
            } else {
              q.provisioning.erase(k_nothing_launched);
            }
            size_t workers = hosts_of(q).size();
            transition(q, QrState::active, state::Initiator::service, now,
                       workers == 1
                           ? std::string("its worker passed preflight")
                           : "all " + std::to_string(workers) + " workers passed preflight");
            return;
          }
          if (report) {
            q.error = report->failure.value_or(
                QrError{k_provisioning_failed, "provisioning failed", -1, "", ""});
            q.provisioning["report"] = to_stored_json(*report);
          } else {
            q.error = QrError{k_provisioning_failed, report.error().message, -1, "", ""};
          }
          q.nodes.clear();
          transition(q, QrState::failed, state::Initiator::service, now, q.error->message);
          if (!hosts.empty()) {
            ops.push_back(state::ReleaseOp{pool, hosts, id});
          }
        });
  }
  case QrState::suspending: {
    kill_processes(qr, view, options, cancel);
    TPUCTL_TRY_ASSIGN(hosts, held_hosts(store, pool, id));
    return finish(store, pool, id, QrState::suspending, options,
                  [&](QueuedResource& q, std::vector<state::Op>& ops, int64_t now) {
                    std::string why = q.history.empty() ? "" : q.history.back().reason;
                    q.nodes.clear();
                    transition(q, QrState::suspended, q.state_initiator, now, why);
                    if (!hosts.empty()) {
                      ops.push_back(state::ReleaseOp{pool, hosts, id});
                    }
                  });
  }
  case QrState::deleting: {
    kill_processes(qr, view, options, cancel);
    TPUCTL_TRY_ASSIGN(hosts, held_hosts(store, pool, id));
    return finish(store, pool, id, QrState::deleting, options,
                  [&](QueuedResource& q, std::vector<state::Op>& ops, int64_t now) {
                    if (!hosts.empty()) {
                      ops.push_back(state::ReleaseOp{pool, hosts, id});
                    }
                    ops.push_back(state::RemoveOp{state::queued_resource_key(pool, id), q.version});
                    state::Event e;
                    e.time_ms = now;
                    e.pool = pool;
                    e.subject = id;
                    e.type = "DELETED";
                    e.from_state = std::string(to_string(QrState::deleting));
                    e.to_state = std::string(to_string(QrState::deleting));
                    e.initiator = state::Initiator::user;
                    add_usage_detail(e.detail, q);
                    ops.push_back(state::EventOp{std::move(e)});
                  });
  }
  default:
    return DriveResult{false, qr, ""};
  }
}

Expected<int> drive_pending(state::StateStore& store, const std::string& pool,
                            const DriveOptions& options, const SchedulerPolicy& policy,
                            const remote::CancelToken* cancel, int max_rounds) {
  int carried = 0;
  for (int round = 0; round < max_rounds; ++round) {
    if (cancel != nullptr && cancel->cancelled()) {
      break;
    }
    TPUCTL_TRY_ASSIGN(ReconcileResult r, reconcile_pool(store, pool, options.clock, policy));
    bool any = false;
    for (const auto& id : r.needs_driver) {
      TPUCTL_TRY_ASSIGN(DriveResult d, drive(store, pool, id, options, cancel));
      if (d.carried) {
        ++carried;
        any = true;
      }
    }
    if (!any) {
      break;
    }
  }
  return carried;
}

} // namespace tpuctl::provision
