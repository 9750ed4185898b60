// A store that does not exist yet, opened by a command that may create one (open_store with
// OpenOptions::create): until something is written it answers as an empty store and creates
// nothing (no directory, no file, no etcd key), so a command that fails on bad input, or only
// reads, leaves no store behind. The first write creates the real store and everything from then
// on goes to it. That first write is all or nothing: when creating the store or the write fails
// (a full disk), the store just created is discarded again, so a failed creating command leaves
// no store (not even an empty or half-written one) behind; and a transact() whose fn writes
// through nested commits (state restore) runs as one transaction of the real store.
#pragma once

#include <functional>
#include <memory>

#include "state/store.hpp"

namespace tpuctl::state {

class DeferredStore final : public StateStore {
public:
  // Creates the real store (called at most once, on the first write).
  using Creator = std::function<Expected<std::unique_ptr<StateStore>>()>;
  // Removes what the creator made, after the real store was closed (best effort; it must leave
  // a store that holds anything alone).
  using Discarder = std::function<void()>;
  // `info`: what info() says until the store exists (its backend and location).
  DeferredStore(StoreInfo info, Creator create, Discarder discard = {});

  StoreInfo info() const override;
  Status ping() override;
  void set_actor(std::string actor, bool authenticated) override;
  // Reads before the first write see an empty store: no records, claims, events or heartbeats;
  // snapshot() fails not_found as for any missing pool.
  Expected<std::optional<Record>> find(const Key& key) override;
  Expected<Listing> list(Kind kind, const std::string& pool) override;
  Expected<PoolSnapshot> snapshot(const std::string& pool) override;
  Expected<std::vector<Claim>> claims(const std::string& pool) override;
  Expected<std::vector<Event>> events(const EventQuery& query) override;
  Expected<std::vector<Heartbeat>> live_heartbeats(const std::string& pool) override;
  // Before the first write: waits out `timeout` (nothing can change a store nobody created).
  Expected<int64_t> wait_for_change(const std::string& pool, int64_t after_revision,
                                    std::chrono::milliseconds timeout) override;
  // Creates the store, then commits there. Errors: the creator's, then commit()'s.
  Expected<CommitResult> commit(const std::vector<Op>& ops) override;
  // A heartbeat names a pool, which an empty store lacks: not_found, creating nothing.
  Status put_heartbeat(const std::string& pool, const std::string& host, const Json& payload,
                       std::chrono::seconds ttl) override;
  // Runs fn on the empty store first: its errors, or no ops, create nothing. Otherwise creates
  // the store and runs the real transact (fn runs again there, on what the store holds by then).
  Expected<CommitResult> transact(const TransactFn& fn,
                                  const TransactOptions& options = {}) override;

  // The real store's, once it exists; before that, none (StateStore's default).
  Expected<Leadership> campaign(const std::string& role, const Json& candidate,
                                std::chrono::seconds ttl) override;
  Expected<Json> leader(const std::string& role) override;
  Status resign(const std::string& role) override;
  Expected<size_t> compact_events(const std::string& pool,
                                  const EventRetention& retention) override;

  bool created() const { return m_real != nullptr; }

private:
  Status create();
  // The first write: creates the store, runs `write` there, and discards the store again when
  // either fails.
  Expected<CommitResult> first_write(const std::function<Expected<CommitResult>()>& write);

  StoreInfo m_info;
  Creator m_create;
  Discarder m_discard;
  std::unique_ptr<StateStore> m_real;
  bool m_probing = false; // running a transact() fn on the empty store: commits are deferred
};

} // namespace tpuctl::state
