// The etcd backend's host and claim pages: round trips, the lazy revisions, the factoring of
// common fields, grouping of claims, the hash spread, and the size of a 2,304-host pool.
#include <set>

#include <doctest/doctest.h>

#include "state/etcd_pages.hpp"
#include "tests/support/pod_hosts.hpp"

using namespace tpuctl;
using namespace tpuctl::state;
using namespace tpuctl::state::etcd;

using tpuctl::test::pod_host_doc;

TEST_CASE("etcd pages: a host page round-trips docs, and zero revisions become the page's") {
  HostPage page;
  page["a"] = PagedRecord{pod_host_doc(1), 0, 0};     // written by the commit that writes the page
  page["b"] = PagedRecord{pod_host_doc(2), 40, 12};   // left alone by it: its own numbers
  page["c"] = PagedRecord{{{"only", "field"}}, 0, 7}; // updated by it, created earlier
  KeyValue kv{"/x/hosts/p/01", encode_host_page(page), 3, 55, 9, 0};
  auto back = decode_host_page(kv);
  REQUIRE(back);
  REQUIRE(back->size() == 3);
  CHECK(back->at("a").doc == pod_host_doc(1));
  CHECK(back->at("a").version == 55);
  CHECK(back->at("a").create_revision == 55);
  CHECK(back->at("b").doc == pod_host_doc(2));
  CHECK(back->at("b").version == 40);
  CHECK(back->at("b").create_revision == 12);
  CHECK(back->at("c").doc == Json{{"only", "field"}});
  CHECK(back->at("c").version == 55);
  CHECK(back->at("c").create_revision == 7);
}

TEST_CASE("etcd pages: fields every host of a page shares are stored once") {
  HostPage page;
  for (int i = 0; i < 100; ++i) {
    page["h" + std::to_string(i)] = PagedRecord{pod_host_doc(i), 0, 0};
  }
  std::string text = encode_host_page(page);
  Json stored = Json::parse(text);
  CHECK(stored["common"].contains("identity_file"));
  CHECK(stored["common"].contains("port"));
  CHECK(!stored["common"].contains("address")); // differs per host
  CHECK(!stored["hosts"]["h5"]["d"].contains("identity_file"));
  size_t whole = 0;
  for (const auto& [name, rec] : page) {
    whole += to_text(rec.doc).size();
  }
  CHECK(text.size() * 2 < whole); // less than half of the records written out one by one
  auto back = decode_host_page(KeyValue{"/x/hosts/p/00", text, 1, 2, 1, 0});
  REQUIRE(back);
  for (const auto& [name, rec] : page) {
    CHECK(back->at(name).doc == rec.doc);
  }
}

TEST_CASE("etcd pages: a field only some hosts have is never factored out") {
  HostPage page;
  page["a"] = PagedRecord{{{"x", 1}, {"y", 2}}, 0, 0};
  page["b"] = PagedRecord{{{"x", 1}}, 0, 0};
  auto back = decode_host_page(KeyValue{"/x/hosts/p/00", encode_host_page(page), 1, 2, 1, 0});
  REQUIRE(back);
  CHECK(back->at("a").doc == Json{{"x", 1}, {"y", 2}});
  CHECK(back->at("b").doc == Json{{"x", 1}});
}

TEST_CASE("etcd pages: claims group by owner and keep time, expiry and revision") {
  ClaimPage page;
  for (int i = 0; i < 50; ++i) {
    page["h" + std::to_string(i)] = PagedClaim{"qr-big", 1000, 0, 0};
  }
  page["x"] = PagedClaim{"drain:maintenance", 2000, 0, 31};
  page["y"] = PagedClaim{"qr-p", 3000, 33000, 0};
  std::string text = encode_claim_page(page);
  CHECK(Json::parse(text)["groups"].size() == 3);
  auto back = decode_claim_page(KeyValue{"/x/claims/p/04", text, 1, 90, 1, 0});
  REQUIRE(back);
  REQUIRE(back->size() == 52);
  CHECK(back->at("h7").owner == "qr-big");
  CHECK(back->at("h7").revision == 90);
  CHECK(back->at("x").revision == 31);
  CHECK(back->at("x").claimed_at_ms == 2000);
  CHECK(back->at("y").expires_at_ms == 33000);
  CHECK(!back->at("y").live(33000));
  CHECK(back->at("y").live(32999));
}

TEST_CASE("etcd pages: what is not a page is refused naming the key") {
  for (std::string bad : {"not json", "[]", R"({"hosts":[]})", R"({"hosts":{"a":{"v":1}}})",
                          R"({"hosts":{"a":{"d":{},"v":-3}}})", R"({"hosts":{},"common":5})"}) {
    auto r = decode_host_page(KeyValue{"/x/hosts/p/02", bad, 1, 1, 1, 0});
    REQUIRE_MESSAGE(!r, bad);
    CHECK(r.error().reason == reason::k_unavailable);
    CHECK(r.error().message.find("'/x/hosts/p/02'") != std::string::npos);
  }
  for (std::string bad :
       {"{}", R"({"groups":[{"hosts":["a"]}]})", R"({"groups":[{"owner":"","hosts":["a"]}]})",
        R"({"groups":[{"owner":"o","hosts":[1]}]})",
        R"({"groups":[{"owner":"o","hosts":["a"]},{"owner":"p","hosts":["a"]}]})",
        R"({"groups":[{"owner":"o","at":"x","hosts":["a"]}]})"}) {
    auto r = decode_claim_page(KeyValue{"/x/claims/p/02", bad, 1, 1, 1, 0});
    REQUIRE_MESSAGE(!r, bad);
    CHECK(r.error().reason == reason::k_unavailable);
  }
}

TEST_CASE("etcd pages: 2,304 hosts spread over every page, and a whole pod fits one request") {
  std::vector<int> per_page(k_pages_per_pool, 0);
  std::vector<HostPage> pages(k_pages_per_pool);
  std::vector<ClaimPage> claims(k_pages_per_pool);
  for (int i = 0; i < 2304; ++i) {
    Json doc = pod_host_doc(i);
    std::string name = doc["name"];
    int p = page_of(name);
    REQUIRE(p >= 0);
    REQUIRE(p < k_pages_per_pool);
    ++per_page[static_cast<size_t>(p)];
    pages[static_cast<size_t>(p)][name] = PagedRecord{doc, 0, 0};
    claims[static_cast<size_t>(p)][name] = PagedClaim{"tpu7x-pod", 1795593625852, 0, 0};
  }
  for (int n : per_page) {
    CHECK(n > 2304 / k_pages_per_pool / 2); // no page holds less than half its share
    CHECK(n < 2304 / k_pages_per_pool * 2);
  }
  size_t host_bytes = 0, claim_bytes = 0;
  for (int p = 0; p < k_pages_per_pool; ++p) {
    host_bytes += encode_host_page(pages[static_cast<size_t>(p)]).size();
    claim_bytes += encode_claim_page(claims[static_cast<size_t>(p)]).size();
  }
  MESSAGE("2,304 hosts: host pages " << host_bytes << " bytes, claim pages " << claim_bytes
                                     << " bytes");
  CHECK(host_bytes + claim_bytes < 1536 * 1024 / 2); // under half of etcd's default request
  CHECK(claim_bytes < 64 * 1024);
}
