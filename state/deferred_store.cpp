#include "state/deferred_store.hpp"

#include <thread>

namespace tpuctl::state {

namespace {

// A commit made by a transact() fn before the store exists: it stops the fn, which then runs
// again inside the real store's transaction.
constexpr std::string_view k_deferred_write = "deferred_write";

Error deferred_write() {
  return Error(ErrorKind::failure, "a write before the store exists",
               std::string(k_deferred_write));
}

} // namespace

DeferredStore::DeferredStore(StoreInfo info, Creator create, Discarder discard)
    : m_info(std::move(info)), m_create(std::move(create)), m_discard(std::move(discard)) {}

Status DeferredStore::create() {
  if (!m_real) {
    TPUCTL_TRY_ASSIGN(m_real, m_create());
    m_real->set_actor(actor(), actor_authenticated());
  }
  return ok();
}

Expected<CommitResult>
DeferredStore::first_write(const std::function<Expected<CommitResult>()>& write) {
  auto discard = [this] {
    m_real.reset();
    if (m_discard) {
      m_discard();
    }
  };
  if (auto created = create(); !created) {
    discard(); // what the creator made before it failed (an empty file, its directories)
    return created.error();
  }
  auto written = write();
  if (!written) {
    discard();
  }
  return written;
}

void DeferredStore::set_actor(std::string actor, bool authenticated) {
  if (m_real) {
    m_real->set_actor(actor, authenticated);
  }
  StateStore::set_actor(std::move(actor), authenticated);
}

StoreInfo DeferredStore::info() const {
  return m_real ? m_real->info() : m_info;
}

Status DeferredStore::ping() {
  return m_real ? m_real->ping() : ok();
}

Expected<std::optional<Record>> DeferredStore::find(const Key& key) {
  if (m_real) {
    return m_real->find(key);
  }
  TPUCTL_TRY(validate_op(CheckOp{key, k_absent}));
  return std::optional<Record>{};
}

Expected<Listing> DeferredStore::list(Kind kind, const std::string& pool) {
  return m_real ? m_real->list(kind, pool) : Listing{};
}

Expected<PoolSnapshot> DeferredStore::snapshot(const std::string& pool) {
  if (m_real) {
    return m_real->snapshot(pool);
  }
  return Error(ErrorKind::not_found, "pool '" + pool + "' does not exist",
               std::string(reason::k_not_found));
}

Expected<std::vector<Claim>> DeferredStore::claims(const std::string& pool) {
  return m_real ? m_real->claims(pool) : std::vector<Claim>{};
}

Expected<std::vector<Event>> DeferredStore::events(const EventQuery& query) {
  return m_real ? m_real->events(query) : std::vector<Event>{};
}

Expected<std::vector<Heartbeat>> DeferredStore::live_heartbeats(const std::string& pool) {
  return m_real ? m_real->live_heartbeats(pool) : std::vector<Heartbeat>{};
}

Expected<int64_t> DeferredStore::wait_for_change(const std::string& pool, int64_t after_revision,
                                                 std::chrono::milliseconds timeout) {
  if (m_real) {
    return m_real->wait_for_change(pool, after_revision, timeout);
  }
  std::this_thread::sleep_for(timeout);
  return after_revision;
}

Expected<CommitResult> DeferredStore::commit(const std::vector<Op>& ops) {
  for (const auto& op : ops) {
    TPUCTL_TRY(validate_op(op)); // a malformed op creates nothing
  }
  if (m_probing) {
    return deferred_write();
  }
  if (m_real) {
    return m_real->commit(ops);
  }
  return first_write([&] { return m_real->commit(ops); });
}

Status DeferredStore::put_heartbeat(const std::string& pool, const std::string& host,
                                    const Json& payload, std::chrono::seconds ttl) {
  if (m_real) {
    return m_real->put_heartbeat(pool, host, payload, ttl);
  }
  return Error(ErrorKind::not_found,
               "cannot record a heartbeat of host '" + host + "': pool '" + pool +
                   "' does not exist",
               std::string(reason::k_not_found));
}

Expected<CommitResult> DeferredStore::transact(const TransactFn& fn,
                                               const TransactOptions& options) {
  if (m_real) {
    return m_real->transact(fn, options);
  }
  if (m_probing) { // nested in a probed fn: part of it
    TPUCTL_TRY_ASSIGN(auto inner, fn(*this));
    if (inner.empty()) {
      return CommitResult{};
    }
    return deferred_write();
  }
  m_probing = true;
  auto ops = fn(*this);
  m_probing = false;
  if (!ops && !has_reason(ops.error(), k_deferred_write)) {
    return ops.error(); // refused on the empty store: nothing is created
  }
  if (ops && ops->empty()) {
    return CommitResult{};
  }
  return first_write([&] { return m_real->transact(fn, options); });
}

Expected<StateStore::Leadership>
DeferredStore::campaign(const std::string& role, const Json& candidate, std::chrono::seconds ttl) {
  return m_real ? m_real->campaign(role, candidate, ttl)
                : StateStore::campaign(role, candidate, ttl);
}

Expected<Json> DeferredStore::leader(const std::string& role) {
  return m_real ? m_real->leader(role) : StateStore::leader(role);
}

Status DeferredStore::resign(const std::string& role) {
  return m_real ? m_real->resign(role) : StateStore::resign(role);
}

Expected<size_t> DeferredStore::compact_events(const std::string& pool,
                                               const EventRetention& retention) {
  return m_real ? m_real->compact_events(pool, retention) : size_t{0};
}

} // namespace tpuctl::state
