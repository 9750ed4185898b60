// The values the etcd backend stores, to and from the StateStore types. Records are their JSON
// document as is; heartbeats and events are small JSON objects (state/etcd_keys.hpp says under
// which keys); host records and claims live in pages (state/etcd_pages.hpp). Decoding failures are
// reason k_unavailable naming the key: the store holds something this tpuctl cannot read.
#pragma once

#include <string>
#include <vector>

#include "state/etcd_keys.hpp"
#include "state/etcd_wire.hpp"
#include "state/store.hpp"

namespace tpuctl::state::etcd {

// The error for a stored value this tpuctl cannot read: k_unavailable naming `key` and `why`.
Error unreadable(const std::string& key, const std::string& why);

// A claim as schema 1 stored it, one key per host (read by the upgrade to pages).
struct ClaimValue {
  std::string owner;
  int64_t claimed_at_ms = 0;
  int64_t expires_at_ms = 0; // 0: never
  bool live(int64_t now_ms) const { return expires_at_ms == 0 || expires_at_ms > now_ms; }
};

Expected<ClaimValue> decode_claim(const KeyValue& kv);

// The record stored in `kv`; a value that is not a JSON object gives a record with
// Record::unreadable set. Errors: k_unavailable for a key outside the layout.
Expected<Record> decode_record(const KeyLayout& keys, const KeyValue& kv);

std::string encode_heartbeat(const Json& payload, int64_t last_seen_ms, int64_t ttl_ms);
Expected<Heartbeat> decode_heartbeat(const KeyLayout& keys, const KeyValue& kv);

// The events one commit recorded in one pool, as one value: {"events":[...]}, in order. Each
// event's time_ms must be set. (Their pool is in the key, their revision is the key's
// create_revision.)
std::string encode_events(const std::vector<Event>& events);
// The events in `kv`, in the order they were recorded; schema 1's one-event values too.
Expected<std::vector<Event>> decode_events(const KeyLayout& keys, const KeyValue& kv);

} // namespace tpuctl::state::etcd
