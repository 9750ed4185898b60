// What the etcd backend reads from etcd's HTTP gateway: a response's JSON (header revision, the
// "kvs" of a range, the responses of a txn), base64 fields, int64 fields written as strings,
// and the stored values decoded into records, host and claim pages, heartbeats and events
// (state/etcd_wire, etcd_keys, etcd_values, etcd_pages). Input: a response body. Properties:
// base64 round-trips both ways; a decoded key-value written back the gateway's way decodes to
// the same; a key a record or heartbeat decodes from is the key KeyLayout names for it; a page
// that decodes encodes and decodes again to the same records and claims, every revision
// resolved (none is 0).
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "state/etcd_keys.hpp"
#include "state/etcd_pages.hpp"
#include "state/etcd_values.hpp"
#include "state/etcd_wire.hpp"

using namespace tpuctl;
using namespace tpuctl::state;
using namespace tpuctl::state::etcd;

namespace {

void check_kv(const KeyLayout& keys, const KeyValue& kv) {
  // Written back as the gateway writes it (bytes in base64, int64 as strings), it reads the same.
  const Json again_json = {{"key", base64_encode(kv.key)},
                           {"value", base64_encode(kv.value)},
                           {"create_revision", std::to_string(kv.create_revision)},
                           {"mod_revision", std::to_string(kv.mod_revision)},
                           {"version", std::to_string(kv.version)},
                           {"lease", std::to_string(kv.lease)}};
  auto again = parse_kv(again_json);
  FUZZ_CHECK(again && again->key == kv.key && again->value == kv.value &&
                 again->create_revision == kv.create_revision &&
                 again->mod_revision == kv.mod_revision && again->version == kv.version &&
                 again->lease == kv.lease,
             "kv " + again_json.dump());
  if (auto r = decode_record(keys, kv)) {
    FUZZ_CHECK(keys.record(r->key) == kv.key, "record key " + kv.key);
    FUZZ_CHECK(r->doc.is_object() && r->version == kv.mod_revision, "record " + kv.key);
  }
  if (auto page = decode_host_page(kv)) {
    auto again =
        decode_host_page(KeyValue{kv.key, encode_host_page(*page), 0, kv.mod_revision, 0, 0});
    FUZZ_CHECK(again && again->size() == page->size(), "host page " + kv.key);
    for (const auto& [name, rec] : *page) {
      FUZZ_CHECK(rec.doc.is_object() && (kv.mod_revision == 0 || rec.version != 0),
                 "host page entry " + name);
      FUZZ_CHECK(again->count(name) && again->at(name).doc == rec.doc &&
                     again->at(name).version == rec.version &&
                     again->at(name).create_revision == rec.create_revision,
                 "host page round trip " + name);
    }
  }
  if (auto page = decode_claim_page(kv)) {
    auto again =
        decode_claim_page(KeyValue{kv.key, encode_claim_page(*page), 0, kv.mod_revision, 0, 0});
    FUZZ_CHECK(again && again->size() == page->size(), "claim page " + kv.key);
    for (const auto& [host, c] : *page) {
      FUZZ_CHECK(!c.owner.empty() && again->count(host) && again->at(host).owner == c.owner &&
                     again->at(host).revision == c.revision &&
                     again->at(host).expires_at_ms == c.expires_at_ms,
                 "claim page round trip " + host);
    }
  }
  if (auto h = decode_heartbeat(keys, kv)) {
    FUZZ_CHECK(keys.heartbeat(h->pool, h->host) == kv.key && h->payload.is_object(),
               "heartbeat " + kv.key);
  }
  if (auto events = decode_events(keys, kv)) {
    for (const auto& e : *events) {
      FUZZ_CHECK(e.detail.is_object() && e.revision == kv.create_revision, "event " + kv.key);
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) {
    return 0;
  }
  const std::string text = fuzz::text_of(data, size);
  if (auto bytes = base64_decode(text)) {
    auto again = base64_decode(base64_encode(*bytes));
    FUZZ_CHECK(again == bytes, "base64 of " + text);
  }
  FUZZ_CHECK(base64_decode(base64_encode(text)) == text, "base64 round trip");

  const Json doc = Json::parse(text, nullptr, false);
  if (doc.is_discarded()) {
    return 0;
  }
  const KeyLayout keys("/tpuctl/v1/");
  (void)header_revision(doc);
  (void)int64_field(doc, "count");
  (void)bool_field(doc, "succeeded");
  if (auto kvs = parse_kvs(doc)) {
    for (const auto& kv : *kvs) {
      check_kv(keys, kv);
    }
  }
  for (size_t i = 0; i < 4; ++i) {
    const Json range = txn_response_at(doc, i, "response_range");
    if (auto kvs = parse_kvs(range)) {
      for (const auto& kv : *kvs) {
        check_kv(keys, kv);
      }
    }
  }
  return 0;
}
