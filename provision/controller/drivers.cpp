#include "provision/controller/drivers.hpp"

#include <set>

#include <spdlog/spdlog.h>

#include "provision/pool/pools.hpp"
#include "provision/queue/reconcile.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

void warn_unreconciled(const std::vector<Error>& errors) {
  for (const auto& e : errors) {
    if (state::has_reason(e, state::reason::k_schema_too_new) ||
        state::has_reason(e, state::reason::k_read_only)) {
      continue;
    }
    spdlog::warn("due transitions were not applied: {}", e.message);
  }
}

namespace {

// Whether a request of `pool` that needs a driver may be carried by this process: a driver
// started here for none would only note, with this caller's name, that they wait for others.
Expected<bool> anything_to_carry(state::StateStore& store, const std::string& pool,
                                 bool as_controller) {
  TPUCTL_TRY_ASSIGN(auto record, store.get(state::pool_key(pool)));
  TPUCTL_TRY_ASSIGN(PoolInfo info, pool_from_json(record.doc));
  if (info.ssh_work == SshWork::anyone) {
    return true;
  }
  TPUCTL_TRY_ASSIGN(auto listing, store.list(state::Kind::queued_resource, pool));
  const int64_t now = state::to_unix_ms(state::system_clock()());
  bool any = false;
  for (const auto& r : listing.records) {
    auto qr = qr_from_record(r);
    if (!qr || !needs_driver(*qr, now)) {
      continue;
    }
    if (!ssh_work_refusal(store, info, qr->owner, as_controller)) {
      any = true;
    } else if (waiting_for(*qr).empty()) {
      // Someone else's: said once in the request, where describe shows it (drive() notes it
      // and does nothing else).
      DriveOptions note;
      note.as_controller = as_controller;
      TPUCTL_TRY(drive(store, pool, qr->id, note));
    }
  }
  return any;
}

} // namespace

Status reconcile_and_spawn(const Launcher& launcher, state::StateStore& store) {
  TPUCTL_TRY_ASSIGN(auto result, reconcile_all(store, state::system_clock()));
  warn_unreconciled(result.errors);
  for (const auto& pool : result.driver_pools) {
    auto ours = anything_to_carry(store, pool, false);
    if (!ours || *ours) { // unknown: a driver finds out for itself
      spawn_driver(launcher, pool);
    }
  }
  return tpuctl::ok();
}

Expected<int> drive_pools(state::StateStore& store, const std::string& pool,
                          const DriveOptions& options, const remote::CancelToken* cancel) {
  std::vector<std::string> pools;
  if (!pool.empty()) {
    pools.push_back(pool);
  } else {
    TPUCTL_TRY_ASSIGN(auto listing, store.list(state::Kind::pool, ""));
    for (const auto& r : listing.records) {
      pools.push_back(r.key.pool);
    }
  }
  int carried = 0;
  for (const auto& p : pools) {
    TPUCTL_TRY_ASSIGN(int n, drive_pending(store, p, options, {}, cancel));
    carried += n;
  }
  return carried;
}

namespace {

// One tick of follow(): reconciles `pool`, drives `id` and the requests whose lease this
// process holds, and starts one detached driver for the others that need one and were not
// handed off before. Returns how many it carried.
struct OwnTick {
  int carried = 0;
  std::string waiting_for; // `id` is not this process's to carry: why
};
Expected<OwnTick> drive_own(state::StateStore& store, const std::string& pool,
                            const std::string& id, const DriveOptions& options,
                            const Launcher& launcher, const remote::CancelToken* cancel,
                            std::set<std::string>& handed_off) {
  OwnTick tick;
  if (cancel != nullptr && cancel->cancelled()) {
    return tick; // interrupted: nothing more is started here
  }
  TPUCTL_TRY_ASSIGN(auto r, reconcile_pool(store, pool, options.clock));
  std::optional<PoolInfo> info;
  bool hand_off = false;
  for (const auto& need : r.needs_driver) {
    TPUCTL_TRY_ASSIGN(auto found, store.find(state::queued_resource_key(pool, need)));
    std::optional<QueuedResource> q;
    if (found) {
      if (auto parsed = qr_from_record(*found)) {
        q = std::move(*parsed);
      }
    }
    const auto lease = q ? lease_of(*q) : std::nullopt;
    if (need == id || (lease && is_own_lease(*lease))) {
      TPUCTL_TRY_ASSIGN(auto d, drive(store, pool, need, options, cancel));
      tick.carried += d.carried ? 1 : 0;
      if (need == id) {
        tick.waiting_for = d.waiting_for;
      }
      continue;
    }
    if (!info) {
      TPUCTL_TRY_ASSIGN(auto record, store.get(state::pool_key(pool)));
      TPUCTL_TRY_ASSIGN(info, pool_from_json(record.doc));
    }
    // Handed to a detached driver only when it would be that driver's (and so this caller's)
    // to carry: someone else's waits for them, and drive() only notes for whom.
    if (q && ssh_work_refusal(store, *info, q->owner, options.as_controller)) {
      TPUCTL_TRY(drive(store, pool, need, options, cancel));
      continue;
    }
    if (handed_off.insert(need).second) {
      hand_off = true;
    }
  }
  if (hand_off) {
    spawn_driver(launcher, pool);
  }
  return tick;
}

// "ACTIVE", or "WAITING_FOR_RESOURCES: <why>": where a request stands, as follow() shows it.
std::string shown_state(const std::optional<QueuedResource>& qr) {
  if (!qr) {
    return "gone";
  }
  std::string shown(to_string(qr->state));
  std::string why = qr->error ? qr->error->message
                    : qr->state == QrState::waiting_for_resources
                        ? qr->pending_reason
                        : (qr->history.empty() ? "" : qr->history.back().reason);
  if (!why.empty()) {
    shown += ": " + why;
  }
  return shown;
}

// The error of a follow that Ctrl-C (or SIGTERM) ended, naming the state `now` (as read).
Error interrupted_error(const std::string& id, const std::optional<QueuedResource>& now) {
  std::string where;
  if (now) {
    where = " (now " + std::string(to_string(now->state)) +
            "; the next tpuctl command on this pool, or a running `tpuctl controller`, "
            "carries it on)";
  }
  return Error(ErrorKind::interrupted, "interrupted while waiting for '" + id + "'" + where);
}

} // namespace

bool settled(const std::optional<QueuedResource>& qr) {
  return !qr || qr->state == QrState::active || qr->state == QrState::failed ||
         qr->state == QrState::suspended;
}

Expected<FollowResult> follow(state::StateStore& store, const std::string& pool,
                              const std::string& id, const DoneFn& done,
                              std::chrono::milliseconds timeout, const DriveOptions& options,
                              const Launcher& launcher, const Following& following) {
  const remote::CancelToken* cancel = following.cancel;
  const auto start = std::chrono::steady_clock::now();
  std::string last_shown;
  auto shown_since = start;
  FollowResult result;
  std::set<std::string> handed_off; // requests given to a detached driver by this call
  // Shows the request's state (when it changed), then drives what is due, so the first line
  // a user sees is where the request stands, not the provisioning detail that follows.
  auto refresh = [&]() -> Status {
    TPUCTL_TRY_ASSIGN(auto found, store.find(state::queued_resource_key(pool, id)));
    result.qr.reset();
    if (found) {
      TPUCTL_TRY_ASSIGN(result.qr, qr_from_record(*found));
    }
    const std::string shown = shown_state(result.qr);
    if (shown != last_shown) {
      if (following.line) {
        following.line(id + ": " + shown);
      }
      last_shown = shown;
      shown_since = std::chrono::steady_clock::now();
    } else if (result.qr && !done(result.qr) && following.status) {
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::steady_clock::now() - shown_since);
      following.status(id + ": still " + std::string(to_string(result.qr->state)) + " after " +
                       util::format_duration(waited));
    }
    return tpuctl::ok();
  };
  TPUCTL_TRY_ASSIGN(auto listing, store.list(state::Kind::queued_resource, pool));
  int64_t revision = listing.revision;
  for (;;) {
    TPUCTL_TRY(refresh());
    if (done(result.qr)) {
      // What this request's change unblocked (a waiting request placed on hosts a delete
      // freed) starts now, in a detached driver, not at the next command.
      TPUCTL_TRY(drive_own(store, pool, id, options, launcher, cancel, handed_off));
      result.done = true;
      return result;
    }
    TPUCTL_TRY_ASSIGN(OwnTick tick,
                      drive_own(store, pool, id, options, launcher, cancel, handed_off));
    if (tick.carried > 0) {
      continue; // show the new state at once
    }
    if (!tick.waiting_for.empty() && following.stop_when_owners) {
      // Someone else's SSH work: its owner's (who alone carries it on: following it here would
      // wait for nothing) or the controller's (which does; followed as any driver's work).
      TPUCTL_TRY(refresh());
      TPUCTL_TRY_ASSIGN(auto record, store.get(state::pool_key(pool)));
      TPUCTL_TRY_ASSIGN(PoolInfo info, pool_from_json(record.doc));
      if (info.ssh_work == SshWork::owner) {
        result.waiting_for = tick.waiting_for;
        return result;
      }
    }
    if (cancel != nullptr && cancel->cancelled()) {
      std::optional<QueuedResource> now;
      if (auto found = store.find(state::queued_resource_key(pool, id)); found && *found) {
        if (auto q = qr_from_record(**found)) {
          now = std::move(*q);
        }
      }
      return interrupted_error(id, now);
    }
    if (timeout.count() > 0 && std::chrono::steady_clock::now() - start >= timeout) {
      TPUCTL_TRY(refresh());
      result.done = done(result.qr);
      return result;
    }
    // Sleep until the store changes (etcd: a watch; SQLite: polling its revision), or a second
    // passes: time-based transitions (valid-until, max-run-duration) need ticks too.
    TPUCTL_TRY_ASSIGN(revision, store.wait_for_change(pool, revision, std::chrono::seconds(1)));
  }
}

CarryOn carry_on(state::StateStore& store, const QueuedResource& recorded, bool async,
                 std::chrono::milliseconds timeout, const DriveOptions& options,
                 const Launcher& launcher, const Following& following, const std::string& what) {
  CarryOn result;
  result.qr = recorded;
  result.done = true;
  auto refresh = [&] {
    if (auto now = load_queued_resource(store, recorded.pool, recorded.id)) {
      result.qr = std::move(*now);
    }
  };
  if (async) {
    if (auto r = reconcile_and_spawn(launcher.with_default_ssh(), store); !r) {
      spdlog::warn("{} was created; starting what carries it on failed (the next tpuctl "
                   "command on its pool does): {}",
                   what, r.error().message);
    }
    refresh();
    return result;
  }
  auto followed =
      follow(store, recorded.pool, recorded.id, settled, timeout, options, launcher, following);
  if (followed) {
    if (followed->qr) {
      result.qr = *followed->qr;
    }
    result.gone = !followed->qr;
    result.done = followed->done || !followed->waiting_for.empty();
    result.waiting_for = followed->waiting_for;
    return result;
  }
  result.done = false;
  const Error& e = followed.error();
  result.gone = state::has_reason(e, state::reason::k_store_replaced);
  result.failed = e;
  if (result.gone) {
    return result;
  }
  if (e.kind == ErrorKind::interrupted) {
    // What is printed on stdout and the state the message names come from one read: a
    // request interrupted in WAITING_FOR_RESOURCES is shown so on both streams.
    auto now = load_queued_resource(store, recorded.pool, recorded.id);
    if (now) {
      result.qr = std::move(*now);
      result.failed = interrupted_error(recorded.id, result.qr);
    }
    return result;
  }
  refresh();
  return result;
}

} // namespace tpuctl::provision
