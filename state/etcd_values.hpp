// The values the etcd backend stores, to and from the StateStore types. Records are their JSON
// document as is; claims, heartbeats and events are small JSON objects (state/etcd_keys.hpp
// says under which keys). Decoding failures are reason k_unavailable naming the key: the store
// holds something this tpuctl cannot read.
#pragma once

#include <string>

#include "state/etcd_keys.hpp"
#include "state/etcd_wire.hpp"
#include "state/store.hpp"

namespace tpuctl::state::etcd {

// A stored claim value.
struct ClaimValue {
  std::string owner;
  int64_t claimed_at_ms = 0;
  int64_t expires_at_ms = 0; // 0: never
  bool live(int64_t now_ms) const { return expires_at_ms == 0 || expires_at_ms > now_ms; }
};

std::string encode_claim(const ClaimValue& claim);
Expected<ClaimValue> decode_claim(const KeyValue& kv);

// The record stored in `kv`. Errors: k_unavailable for a key outside the layout or a value
// that is not a JSON object.
Expected<Record> decode_record(const KeyLayout& keys, const KeyValue& kv);
// The claim stored in `kv` (its revision is the key's mod_revision).
Expected<Claim> decode_claim_record(const KeyLayout& keys, const KeyValue& kv);

std::string encode_heartbeat(const Json& payload, int64_t last_seen_ms, int64_t ttl_ms);
Expected<Heartbeat> decode_heartbeat(const KeyLayout& keys, const KeyValue& kv);

// An event's value (its pool is in the key, its revision is the key's create_revision).
std::string encode_event(const Event& event, int64_t time_ms);
Expected<Event> decode_event(const KeyLayout& keys, const KeyValue& kv);

} // namespace tpuctl::state::etcd
