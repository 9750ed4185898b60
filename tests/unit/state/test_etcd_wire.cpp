// The etcd gateway's JSON shapes and tpuctl's key layout, without a server: the gateway ignores
// misspelled fields silently, so the exact proto names are pinned here.
#include <doctest/doctest.h>

#include "state/etcd_keys.hpp"
#include "state/etcd_pages.hpp"
#include "state/etcd_values.hpp"
#include "state/etcd_wire.hpp"

using namespace tpuctl::state;
using namespace tpuctl::state::etcd;

TEST_CASE("etcd::base64_encode and base64_decode") {
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("/tpuctl/v1/hosts/h1") == "L3RwdWN0bC92MS9ob3N0cy9oMQ==");
  CHECK(base64_encode(std::string("\xff\x00\x80", 3)) == "/wCA");
  CHECK(base64_decode("L3RwdWN0bC92MS9ob3N0cy9oMQ==") == "/tpuctl/v1/hosts/h1");
  CHECK(base64_decode("Zm8") == "fo"); // padding optional
  CHECK(base64_decode(base64_encode(std::string("\0a\xfe", 3))) == std::string("\0a\xfe", 3));
  CHECK(!base64_decode("a b").has_value());
}

TEST_CASE("etcd::int64_field reads strings, numbers and absent fields") {
  Json j = Json::parse(R"({"revision":"7","n":5,"id":"9541411634832032166","neg":"-3"})");
  CHECK(int64_field(j, "revision") == 7);
  CHECK(int64_field(j, "n") == 5);
  CHECK(int64_field(j, "missing") == 0);
  CHECK(int64_field(j, "neg") == -3);
  // A uint64 member ID above INT64_MAX keeps its bits, so two reads compare equal and non-zero.
  CHECK(int64_field(j, "id") != 0);
  CHECK(int64_field(j, "id") == int64_field(j, "id"));
  CHECK(!bool_field(Json::parse(R"({"header":{}})"), "succeeded"));
  CHECK(bool_field(Json::parse(R"({"succeeded":true})"), "succeeded"));
}

TEST_CASE("etcd request builders use the exact proto field names") {
  CHECK(prefix_end("/tpuctl/v1/host/") == "/tpuctl/v1/host0");
  CHECK(range_request("/a").dump() == R"({"key":"L2E="})");
  CHECK(range_request("/a/", {"/a0", true, 9}).dump() ==
        R"({"key":"L2Ev","keys_only":true,"min_create_revision":"9","range_end":"L2Ew"})");
  CHECK(put_request("/k", "v", 42).dump() == R"({"key":"L2s=","lease":"42","value":"dg=="})");
  CHECK(put_request("/k", "v").dump() == R"({"key":"L2s=","value":"dg=="})");
  CHECK(compare_mod_equals("/k", 0).dump() ==
        R"({"key":"L2s=","mod_revision":"0","result":"EQUAL","target":"MOD"})");
  CHECK(compare_mod_below("/a/", "/a0", 8).dump() ==
        R"({"key":"L2Ev","mod_revision":"8","range_end":"L2Ew","result":"LESS","target":"MOD"})");
  CHECK(compare_exists("/k").dump() ==
        R"({"key":"L2s=","result":"GREATER","target":"VERSION","version":"0"})");
  CHECK(lease_grant_request(30).dump() == R"({"TTL":"30"})");
  Json txn = txn_request({compare_mod_equals("/k", 3)}, {op_put(put_request("/k", "v"))},
                         {op_range(range_request("/k"))});
  CHECK(txn["compare"].size() == 1);
  CHECK(txn["success"][0].contains("request_put"));
  CHECK(txn["failure"][0].contains("request_range"));
  CHECK(op_delete(delete_request("/a/", "/a0")).dump() ==
        R"({"request_delete_range":{"key":"L2Ev","range_end":"L2Ew"}})");
}

TEST_CASE("etcd::parse_kvs decodes a RangeResponse and treats absent fields as zero") {
  Json r = Json::parse(R"({"header":{"revision":"3"},"kvs":[{"key":"L2s=","create_revision":"2",
      "mod_revision":"3","version":"2","value":"dg==","lease":"7"}],"count":"1"})");
  auto kvs = parse_kvs(r);
  REQUIRE(kvs);
  REQUIRE(kvs->size() == 1);
  CHECK((*kvs)[0].key == "/k");
  CHECK((*kvs)[0].value == "v");
  CHECK((*kvs)[0].create_revision == 2);
  CHECK((*kvs)[0].mod_revision == 3);
  CHECK((*kvs)[0].lease == 7);
  CHECK(header_revision(r) == 3);
  CHECK(parse_kvs(Json::parse(R"({"header":{}})"))->empty()); // a missing key: no "kvs"
  CHECK(!parse_kvs(Json::parse(R"({"kvs":[{"key":"%%"}]})")).has_value());
}

TEST_CASE("etcd::KeyLayout names and parses every family") {
  KeyLayout k("/tpuctl/v1/");
  CHECK(k.record(pool_key("p")) == "/tpuctl/v1/pool/p");
  CHECK(k.record(queued_resource_key("p", "q")) == "/tpuctl/v1/queued_resource/p/q");
  CHECK(k.records_of(Kind::pool, "") == "/tpuctl/v1/pool/");
  CHECK(k.records_of(Kind::host, "p") == "/tpuctl/v1/hosts/p/");
  CHECK(k.records_of(Kind::workload, "") == "/tpuctl/v1/workload/");
  CHECK(k.host_page("p", 3) == "/tpuctl/v1/hosts/p/03");
  CHECK(k.host_page_of("p", "h1") == k.host_page("p", page_of("h1")));
  CHECK(k.claim_page("p", 15) == "/tpuctl/v1/claims/p/15");
  CHECK(k.claim_page_of("p", "h1") == k.claim_page("p", page_of("h1")));
  CHECK(k.claim_pages_of("") == "/tpuctl/v1/claims/");
  CHECK(k.event("p", "abc", 3) == "/tpuctl/v1/event/p/abc.0003");
  CHECK(k.marker("abc") == "/tpuctl/v1/commit/abc");
  CHECK(k.legacy_of("host", "p") == "/tpuctl/v1/host/p/");
  CHECK(k.parse_record("/tpuctl/v1/pool/p") == pool_key("p"));
  CHECK(k.parse_record("/tpuctl/v1/workload/p/w") == record_key(Kind::workload, "p", "w"));
  // Host records are in pages, never one key each: neither a page nor a schema-1 host key
  // is a record key.
  CHECK(!k.parse_record("/tpuctl/v1/hosts/p/03").has_value());
  CHECK(!k.parse_record("/tpuctl/v1/host/p/h1").has_value());
  CHECK(!k.parse_record("/tpuctl/v1/claims/p/01").has_value());
  CHECK(!k.parse_record("/other/pool/p").has_value());
  CHECK(!k.parse("/tpuctl/v1/hosts/p/01/extra").has_value());
  auto c = k.parse("/tpuctl/v1/claims/p/07");
  REQUIRE(c);
  CHECK(c->family == "claims");
  CHECK(c->pool == "p");
  CHECK(c->rest == "07");
}

TEST_CASE("etcd values: heartbeats, events and schema-1 claims decode") {
  KeyLayout k("/x/");
  KeyValue kv{k.legacy_of("claim", "p") + "h1",
              R"({"owner":"qr-a","claimed_at_ms":1000,"expires_at_ms":31000})",
              5,
              6,
              1,
              0};
  auto claim = decode_claim(kv);
  REQUIRE(claim);
  CHECK(claim->owner == "qr-a");
  CHECK(claim->expires_at_ms == 31000);
  Event e{0,
          77,
          "p",
          Kind::queued_resource,
          "q",
          "STATE_CHANGED",
          "A",
          "B",
          Initiator::service,
          {{"reason", "x"}},
          ""};
  Event f = e;
  f.type = "SECOND";
  KeyValue ev{k.event("p", "n", 0), encode_events({e, f}), 9, 9, 1, 0};
  auto back = decode_events(k, ev);
  REQUIRE(back);
  REQUIRE(back->size() == 2);
  CHECK((*back)[0].revision == 9);
  CHECK((*back)[0].time_ms == 77);
  CHECK((*back)[0].pool == "p");
  CHECK((*back)[0].initiator == Initiator::service);
  CHECK((*back)[0].detail["reason"] == "x");
  CHECK((*back)[1].type == "SECOND");
  // A schema-1 event key holds one event as the whole value.
  KeyValue old{k.event("p", "n", 1), R"({"time_ms":5,"type":"CREATED","subject":"q"})", 4, 4, 1, 0};
  auto one = decode_events(k, old);
  REQUIRE(one);
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].type == "CREATED");
  CHECK((*one)[0].revision == 4);
  KeyValue bad{k.legacy_of("claim", "p") + "h1", "not json", 1, 1, 1, 0};
  auto unreadable = decode_claim(bad);
  REQUIRE(!unreadable);
  CHECK(unreadable.error().reason == reason::k_unavailable);
}
