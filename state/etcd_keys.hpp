// Where the etcd backend keeps each thing, under one prefix (default "/tpuctl/v1/"):
//
//   meta/schema                        {"schema":2}; a newer value makes this tpuctl read-only
//   pool/<pool>                        a pool record
//   <kind>/<pool>/<id>                 queued_resource, cluster and workload records, one key each
//   hosts/<pool>/<NN>                  host page NN (00..15): the host records of the pool whose
//                                      names hash to NN (state/etcd_pages.hpp)
//   claims/<pool>/<NN>                 claim page NN: the claims on those hosts
//   heartbeat/<pool>/<host>            {"payload","last_seen_ms","ttl_ms"}, on a lease of ttl
//   event/<pool>/<commit nonce>.<n>    the events one commit recorded in the pool; its revision
//                                      is the key's create_revision
//   commit/<nonce>                     "applied" (or "aborted"): the marker every commit writes
//                                      so that a commit whose reply was lost can be resolved
//   leader/<role>                      the leader's document, on its lease (StateStore::campaign)
//
// Schema 1 kept one key per host (host/<pool>/<id>), per claim (claim/<pool>/<host>) and a
// hostset/<pool> key; state/etcd_upgrade.cpp moves such a store to pages when it is opened.
//
// Pool names and ids never contain '/', so "<family>/<pool>/" is exactly one pool's keys of that
// family. Each family has its own top-level segment, so listing one kind across every pool is
// one range, and removing a pool is one delete-range per family.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "state/store.hpp"

namespace tpuctl::state::etcd {

// A key split back into its parts.
struct ParsedKey {
  std::string family; // "pool", "queued_resource", ..., "hosts", "claims", "heartbeat", ...
  std::string pool;   // empty for meta and commit
  std::string rest;   // the id, page number, host or event name; empty for pool keys
};

class KeyLayout {
public:
  // `prefix` must end in '/'.
  explicit KeyLayout(std::string prefix) : m_prefix(std::move(prefix)) {}

  const std::string& prefix() const { return m_prefix; }
  std::string schema() const { return m_prefix + "meta/schema"; }
  // The key of a one-key record (every kind but Kind::host, whose records live in pages).
  std::string record(const Key& key) const;
  // The range prefix of `kind`'s keys in `pool` (every pool when empty): for Kind::host the
  // host pages. For Kind::pool and a non-empty pool this is the pool's own key.
  std::string records_of(Kind kind, const std::string& pool) const;
  // Host page `page` of `pool`, and the page `host` lives in.
  std::string host_page(const std::string& pool, int page) const;
  std::string host_page_of(const std::string& pool, const std::string& host) const;
  std::string host_pages_of(const std::string& pool) const { return family_of("hosts", pool); }
  std::string claim_page(const std::string& pool, int page) const;
  std::string claim_page_of(const std::string& pool, const std::string& host) const;
  std::string claim_pages_of(const std::string& pool) const { return family_of("claims", pool); }
  std::string heartbeat(const std::string& pool, const std::string& host) const;
  std::string heartbeats_of(const std::string& pool) const { return family_of("heartbeat", pool); }
  std::string event(const std::string& pool, const std::string& nonce, size_t index) const;
  std::string events_of(const std::string& pool) const { return family_of("event", pool); }
  std::string marker(const std::string& nonce) const { return m_prefix + "commit/" + nonce; }
  // leader/<role>: the leader of a role, on its etcd lease (StateStore::campaign).
  std::string leader(const std::string& role) const { return m_prefix + "leader/" + role; }
  // Schema 1's families ("host", "claim", "hostset"), for the upgrade.
  std::string legacy_of(std::string_view family, const std::string& pool) const {
    return family_of(family, pool);
  }

  // Splits a key under the prefix; nullopt for keys outside it or not of this layout.
  std::optional<ParsedKey> parse(std::string_view key) const;
  // The one-key record a record key names; nullopt for every other key (pages included).
  std::optional<Key> parse_record(std::string_view key) const;

private:
  std::string family_of(std::string_view family, const std::string& pool) const;
  std::string m_prefix;
};

} // namespace tpuctl::state::etcd
