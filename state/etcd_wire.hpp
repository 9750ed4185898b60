// The JSON shapes of etcd v3's HTTP gateway (the /v3/ paths of etcd 3.4+), built and parsed in
// one place because the gateway forgives nothing and reports nothing:
//
//  * key, value and range_end are base64 (bytes fields); anything else is a 400.
//  * int64 fields (revisions, lease IDs, TTLs, counts) come back as JSON strings; the server
//    accepts strings on input too, so every builder here writes strings.
//  * zero, false and empty fields are omitted from replies: a failed txn has no "succeeded", a
//    missing key no "kvs", a PUT watch event no "type". Readers treat absent as 0/false/empty.
//  * unknown or misspelled field names are silently ignored ("ttl" instead of "TTL" grants the
//    minimum TTL), so the builders use the exact proto names and tests pin them.
// Verified against Debian's etcd 3.4.23 (../shared/reference/state-store.md section 3).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/base64.hpp"

namespace tpuctl::state::etcd {

using Json = nlohmann::json;

// Standard base64 (util/base64.hpp): etcd's gateway sends bytes fields padded.
using util::base64_decode;
using util::base64_encode;

// The int64 field `name` of `object`, written as a string or a number; 0 when absent or not a
// number (the gateway omits zero values). A uint64 above INT64_MAX (member IDs) keeps its bits.
int64_t int64_field(const Json& object, std::string_view name);
// The boolean field `name`; false when absent.
bool bool_field(const Json& object, std::string_view name);

// The range_end that makes [prefix, range_end) every key starting with `prefix`: the prefix with
// its last byte incremented ("/a/" -> "/a0"). Precondition: prefix is non-empty and its last
// byte is not 0xff (tpuctl's prefixes end in '/').
std::string prefix_end(std::string_view prefix);

// One mvccpb.KeyValue, decoded.
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

// Decodes one "kv" object; nullopt when its key or value is not base64.
std::optional<KeyValue> parse_kv(const Json& kv);
// The "kvs" of a RangeResponse (none when absent); nullopt when one does not decode.
std::optional<std::vector<KeyValue>> parse_kvs(const Json& range_response);
// header.revision of a response.
int64_t header_revision(const Json& response);

// ---- request builders (bodies of /v3/kv/range, put, deleterange, txn; lease grant) ----
struct RangeOptions {
  std::string range_end; // empty: the single key
  bool keys_only = false;
  int64_t min_create_revision = 0; // 0: no filter
};
Json range_request(std::string_view key, const RangeOptions& options = {});
Json put_request(std::string_view key, std::string_view value, int64_t lease = 0);
Json delete_request(std::string_view key, std::string_view range_end = "");

// Txn ops: {"request_range": ...}, {"request_put": ...}, {"request_delete_range": ...}.
Json op_range(Json range);
Json op_put(Json put);
Json op_delete(Json del);

// Compares. `mod_revision_equals(k, 0)` holds when the key is absent.
Json compare_mod_equals(std::string_view key, int64_t mod_revision);
// Every key in [key, range_end) has mod_revision < `below` (true for an empty range).
Json compare_mod_below(std::string_view key, std::string_view range_end, int64_t below);
// The key exists (version > 0).
Json compare_exists(std::string_view key);

Json txn_request(std::vector<Json> compares, std::vector<Json> success,
                 std::vector<Json> failure = {});
// The response of op `index` of a TxnResponse's "responses" ("response_range", ...); an empty
// object when absent.
Json txn_response_at(const Json& txn_response, size_t index, std::string_view which);

Json lease_grant_request(int64_t ttl_seconds);

} // namespace tpuctl::state::etcd
