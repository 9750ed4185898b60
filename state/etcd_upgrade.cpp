// Moving an etcd store written by schema 1 (one key per host, per claim, and a hostset key per
// pool) to schema 2's pages (state/etcd_pages.hpp), when a tpuctl that writes schema 2 opens it.
//
//  1. meta/schema goes from {"schema":1} to {"schema":2,"upgrading":true} (compare-and-swap).
//     tpuctl binaries that know only schema 1 now open the store read-only.
//  2. Each pool, in one txn: its schema-1 host and claim keys are folded into its pages (keeping
//     every version and create revision; lapsed provisional claims are dropped) and deleted,
//     guarded by compares on what was read. A pool already moved has nothing to fold.
//  3. meta/schema becomes {"schema":2}.
// Any tpuctl that opens the store while it says "upgrading" (another one doing it, or one that
// died half-way) runs the same steps; they are idempotent. Processes of an older tpuctl that
// were already running when step 1 happened must be stopped first: they would go on writing
// schema-1 keys, which nothing reads any more.
#include "state/etcd_pages.hpp"
#include "state/etcd_store.hpp"
#include "state/etcd_values.hpp"

namespace tpuctl::state {

namespace {

Error failed(const std::string& why) {
  return Error(ErrorKind::failure, "cannot upgrade the etcd state store to schema 2: " + why,
               std::string(reason::k_unavailable));
}

} // namespace

Status EtcdStore::swap_schema(const etcd::KeyValue& current, const Json& next) {
  Json txn = etcd::txn_request({etcd::compare_mod_equals(m_keys.schema(), current.mod_revision)},
                               {etcd::op_put(etcd::put_request(m_keys.schema(), to_text(next)))});
  TPUCTL_TRY(m_client->post("/v3/kv/txn", txn, etcd::Retry::unsent_only));
  return ok(); // lost the race: another tpuctl moved it on; the caller reads it again
}

Status EtcdStore::upgrade_pool(const std::string& pool) {
  const std::string old_hosts = m_keys.legacy_of("host", pool);
  const std::string old_claims = m_keys.legacy_of("claim", pool);
  const std::string hostset = m_keys.prefix() + "hostset/" + pool;
  const std::string pages = m_keys.host_pages_of(pool);
  const std::string claim_pages = m_keys.claim_pages_of(pool);
  for (int attempt = 0; attempt < 20; ++attempt) {
    TPUCTL_TRY_ASSIGN(
        auto read, read_ranges({etcd::range_request(old_hosts, {etcd::prefix_end(old_hosts)}),
                                etcd::range_request(old_claims, {etcd::prefix_end(old_claims)}),
                                etcd::range_request(pages, {etcd::prefix_end(pages)}),
                                etcd::range_request(claim_pages, {etcd::prefix_end(claim_pages)}),
                                etcd::range_request(hostset)}));
    std::vector<std::vector<etcd::KeyValue>> kvs;
    for (const auto& r : read.first) {
      auto parsed = etcd::parse_kvs(r);
      if (!parsed) {
        return failed("the store answered with keys that are not base64");
      }
      kvs.push_back(std::move(*parsed));
    }
    if (kvs[0].empty() && kvs[1].empty() && kvs[4].empty()) {
      return ok(); // nothing of schema 1 left in this pool
    }
    std::map<std::string, etcd::HostPage> host_pages;
    std::map<std::string, etcd::ClaimPage> claims;
    for (const auto& kv : kvs[2]) {
      TPUCTL_TRY_ASSIGN(host_pages[kv.key], etcd::decode_host_page(kv));
    }
    for (const auto& kv : kvs[3]) {
      TPUCTL_TRY_ASSIGN(claims[kv.key], etcd::decode_claim_page(kv));
    }
    for (const auto& kv : kvs[0]) {
      auto parsed = m_keys.parse(kv.key);
      Json doc = Json::parse(kv.value, nullptr, false);
      if (!parsed || !doc.is_object()) {
        return failed("host key '" + kv.key + "' does not hold a host record");
      }
      host_pages[m_keys.host_page_of(pool, parsed->rest)][parsed->rest] =
          etcd::PagedRecord{std::move(doc), kv.mod_revision, kv.create_revision};
    }
    const int64_t now = now_ms();
    for (const auto& kv : kvs[1]) {
      auto parsed = m_keys.parse(kv.key);
      TPUCTL_TRY_ASSIGN(auto c, etcd::decode_claim(kv));
      if (!parsed) {
        return failed("claim key '" + kv.key + "' is not a claim");
      }
      if (c.live(now)) {
        claims[m_keys.claim_page_of(pool, parsed->rest)][parsed->rest] =
            etcd::PagedClaim{c.owner, c.claimed_at_ms, c.expires_at_ms, kv.mod_revision};
      }
    }
    const int64_t below = read.second + 1;
    std::vector<Json> compares{
        etcd::compare_mod_below(old_hosts, etcd::prefix_end(old_hosts), below),
        etcd::compare_mod_below(old_claims, etcd::prefix_end(old_claims), below),
        etcd::compare_mod_below(pages, etcd::prefix_end(pages), below),
        etcd::compare_mod_below(claim_pages, etcd::prefix_end(claim_pages), below),
        etcd::compare_mod_equals(hostset, kvs[4].empty() ? 0 : kvs[4][0].mod_revision)};
    std::vector<Json> writes;
    for (const auto& [key, page] : host_pages) {
      writes.push_back(etcd::op_put(etcd::put_request(key, etcd::encode_host_page(page))));
    }
    for (const auto& [key, page] : claims) {
      if (!page.empty()) {
        writes.push_back(etcd::op_put(etcd::put_request(key, etcd::encode_claim_page(page))));
      }
    }
    writes.push_back(etcd::op_delete(etcd::delete_request(old_hosts, etcd::prefix_end(old_hosts))));
    writes.push_back(
        etcd::op_delete(etcd::delete_request(old_claims, etcd::prefix_end(old_claims))));
    writes.push_back(etcd::op_delete(etcd::delete_request(hostset)));
    TPUCTL_TRY_ASSIGN(Json reply, m_client->post("/v3/kv/txn", etcd::txn_request(compares, writes),
                                                 etcd::Retry::unsent_only));
    if (etcd::bool_field(reply, "succeeded")) {
      return ok();
    }
  }
  return failed("pool '" + pool + "' kept changing; stop the other tpuctl processes and retry");
}

Status EtcdStore::upgrade_schema() {
  for (int round = 0; round < 10; ++round) {
    TPUCTL_TRY_ASSIGN(Json r, m_client->post("/v3/kv/range", etcd::range_request(m_keys.schema()),
                                             etcd::Retry::anywhere));
    auto kvs = etcd::parse_kvs(r);
    if (!kvs || kvs->empty()) {
      return failed("its schema marker vanished");
    }
    const etcd::KeyValue& marker = (*kvs)[0];
    Json doc = Json::parse(marker.value, nullptr, false);
    int schema = doc.is_object() ? doc.value("schema", 0) : 0;
    bool upgrading = doc.is_object() && doc.value("upgrading", false);
    if (schema == 1) {
      TPUCTL_TRY(swap_schema(marker, Json{{"schema", 2}, {"upgrading", true}}));
      continue;
    }
    if (schema != 2) {
      m_schema_version = schema;
      return ok();
    }
    if (upgrading) {
      std::string pools = m_keys.records_of(Kind::pool, "");
      TPUCTL_TRY_ASSIGN(Json listed,
                        m_client->post("/v3/kv/range",
                                       etcd::range_request(pools, {etcd::prefix_end(pools), true}),
                                       etcd::Retry::anywhere));
      auto pool_kvs = etcd::parse_kvs(listed);
      if (!pool_kvs) {
        return failed("the store answered with keys that are not base64");
      }
      for (const auto& kv : *pool_kvs) {
        if (auto parsed = m_keys.parse(kv.key)) {
          TPUCTL_TRY(upgrade_pool(parsed->pool));
        }
      }
      TPUCTL_TRY(swap_schema(marker, Json{{"schema", 2}}));
      continue;
    }
    m_schema_version = 2;
    return ok();
  }
  return failed("its schema marker kept changing");
}

} // namespace tpuctl::state
