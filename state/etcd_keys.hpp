// Where the etcd backend keeps each thing, under one prefix (default "/tpuctl/v1/"):
//
//   meta/schema                        {"schema":1}; a newer value makes this tpuctl read-only
//   pool/<pool>                        a pool record
//   <kind>/<pool>/<id>                 host, queued_resource, cluster, workload records
//   hostset/<pool>                     rewritten by every commit that adds or removes a host of
//                                      the pool, so a claim guards "these hosts exist" with one
//                                      compare instead of one per host
//   claim/<pool>/<host>                {"owner","claimed_at_ms","expires_at_ms"}; existence is
//                                      the lock; provisional claims carry an etcd lease
//   heartbeat/<pool>/<host>            {"payload","last_seen_ms","ttl_ms"}, on a lease of ttl
//   event/<pool>/<commit nonce>.<n>    one event; its revision is the key's create_revision
//   commit/<nonce>                     "applied" (or "aborted"): the marker every commit writes
//                                      so that a commit whose reply was lost can be resolved
//
// Pool names and ids never contain '/', so "<kind>/<pool>/" is exactly one pool's records. Each
// family has its own top-level segment, so listing one kind across every pool is one range, and
// removing a pool is one delete-range per family.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "state/store.hpp"

namespace tpuctl::state::etcd {

// A key split back into its parts.
struct ParsedKey {
  std::string family; // "pool", "host", ..., "claim", "heartbeat", "event", "hostset", "commit"
  std::string pool;   // empty for meta and commit
  std::string rest;   // the id, host or event name; empty for pool and hostset keys
};

class KeyLayout {
public:
  // `prefix` must end in '/'.
  explicit KeyLayout(std::string prefix) : m_prefix(std::move(prefix)) {}

  const std::string& prefix() const { return m_prefix; }
  std::string schema() const { return m_prefix + "meta/schema"; }
  std::string record(const Key& key) const;
  // The range prefix of `kind`'s records in `pool` (every pool when empty). For Kind::pool and a
  // non-empty pool this is the pool's own key (a range of one key).
  std::string records_of(Kind kind, const std::string& pool) const;
  std::string hostset(const std::string& pool) const { return m_prefix + "hostset/" + pool; }
  std::string claim(const std::string& pool, const std::string& host) const;
  std::string claims_of(const std::string& pool) const { return family_of("claim", pool); }
  std::string heartbeat(const std::string& pool, const std::string& host) const;
  std::string heartbeats_of(const std::string& pool) const { return family_of("heartbeat", pool); }
  std::string event(const std::string& pool, const std::string& nonce, size_t index) const;
  std::string events_of(const std::string& pool) const { return family_of("event", pool); }
  std::string marker(const std::string& nonce) const { return m_prefix + "commit/" + nonce; }

  // Splits a key under the prefix; nullopt for keys outside it or not of this layout.
  std::optional<ParsedKey> parse(std::string_view key) const;
  // The record a record key names; nullopt for every other key.
  std::optional<Key> parse_record(std::string_view key) const;

private:
  std::string family_of(std::string_view family, const std::string& pool) const;
  std::string m_prefix;
};

} // namespace tpuctl::state::etcd
