// EtcdStore: opening, reads, heartbeats, leases and wait_for_change. commit() lives in
// etcd_commit.cpp.
#include "state/etcd_store.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include <spdlog/spdlog.h>

#include "state/curl_api.hpp"
#include "state/etcd_pages.hpp"
#include "state/etcd_values.hpp"

namespace tpuctl::state {

using etcd::KeyValue;

namespace {

Expected<std::vector<KeyValue>> kvs_of(const Json& range_response) {
  auto kvs = etcd::parse_kvs(range_response);
  if (!kvs) {
    return Error(ErrorKind::failure,
                 "the etcd state store answered a range with keys that are not "
                 "base64: is this etcd's HTTP gateway?",
                 reason::k_unavailable);
  }
  return std::move(*kvs);
}

void sort_records(std::vector<Record>& records) {
  std::sort(records.begin(), records.end(), [](const Record& a, const Record& b) {
    return std::tie(a.key.pool, a.key.id) < std::tie(b.key.pool, b.key.id);
  });
}

} // namespace

EtcdStore::EtcdStore(EtcdOptions options)
    : m_options(std::move(options)), m_keys(m_options.prefix),
      m_client(std::make_unique<etcd::Client>(m_options.client)) {}

Expected<std::unique_ptr<EtcdStore>> EtcdStore::open(EtcdOptions options) {
  if (options.client.endpoints.empty()) {
    return Error(ErrorKind::usage, "the etcd state store needs at least one endpoint",
                 reason::k_invalid);
  }
  if (options.prefix.empty() || options.prefix.back() != '/') {
    options.prefix += '/';
  }
  if (!etcd::curl_api().ok()) {
    return Error(ErrorKind::failure, etcd::curl_api().error, reason::k_unavailable);
  }
  std::unique_ptr<EtcdStore> store(new EtcdStore(std::move(options)));
  TPUCTL_TRY(store->init_schema());
  return store;
}

Status EtcdStore::init_schema() {
  const std::string key = m_keys.schema();
  for (int attempt = 0; attempt < 3; ++attempt) {
    TPUCTL_TRY_ASSIGN(
        Json r, m_client->post("/v3/kv/range", etcd::range_request(key), etcd::Retry::anywhere));
    TPUCTL_TRY_ASSIGN(auto kvs, kvs_of(r));
    if (!kvs.empty()) {
      Json doc = Json::parse(kvs[0].value, nullptr, false);
      if (!doc.is_object() || !doc.contains("schema") || !doc["schema"].is_number_integer()) {
        return Error(ErrorKind::failure,
                     "'" + key +
                         "' in the etcd state store is not a tpuctl schema marker: is the "
                         "prefix in --state shared with another program?",
                     reason::k_unavailable);
      }
      m_schema_version = doc["schema"].get<int>();
      const std::string& seen = m_options.last_seen_cluster_id;
      if (!seen.empty() && (seen != m_client->cluster_id() ||
                            m_client->max_revision() < m_options.last_seen_revision)) {
        spdlog::warn("etcd at {} was reset or replaced since this machine's tpuctl last used it "
                     "(cluster {} at revision {}, now cluster {} at revision {}); it holds "
                     "tpuctl state (restored, or made anew), which is used from now on",
                     m_options.location, seen, m_options.last_seen_revision, m_client->cluster_id(),
                     m_client->max_revision());
      }
      if (m_schema_version == 1 ||
          (m_schema_version == k_etcd_schema_version && doc.value("upgrading", false))) {
        return upgrade_schema();
      }
      return ok();
    }
    // No store here. Unless this command creates one, say so (and, when this machine used a
    // store here before, that it was reset or deleted); creating marks it, unless another
    // tpuctl does so first.
    const std::string lost = what_was_lost();
    if (!m_options.create) {
      if (!lost.empty()) {
        return Error(ErrorKind::failure,
                     "etcd at " + m_options.location + " " + lost +
                         "; restore a backup with 'tpuctl state restore FILE', or start afresh: "
                         "the next command that creates a pool makes a new store there",
                     reason::k_store_replaced);
      }
      return missing_store(m_options.location,
                           " (etcd holds no tpuctl state under prefix '" + m_options.prefix + "')");
    }
    if (!lost.empty()) {
      spdlog::warn("etcd at {} {}; starting a new store there", m_options.location, lost);
    }
    Json txn = etcd::txn_request(
        {etcd::compare_mod_equals(key, 0)},
        {etcd::op_put(etcd::put_request(key, to_text(Json{{"schema", k_etcd_schema_version}})))});
    TPUCTL_TRY(m_client->post("/v3/kv/txn", txn, etcd::Retry::anywhere));
  }
  return Error(ErrorKind::failure,
               "cannot initialise the etcd state store at " + m_options.location,
               reason::k_unavailable);
}

std::string EtcdStore::cluster_id() const {
  return m_client->cluster_id();
}

int64_t EtcdStore::seen_revision() const {
  return m_client->max_revision();
}

std::string EtcdStore::what_was_lost() const {
  const std::string& seen = m_options.last_seen_cluster_id;
  if (seen.empty()) {
    return ""; // never used here from this machine: a new install
  }
  const std::string now = m_client->cluster_id();
  if (now != seen) {
    return "is a new cluster (id " + now + "; this machine's tpuctl last used cluster " + seen +
           " there) that holds no tpuctl state: the etcd cluster was reset or replaced, and "
           "the state it held is gone";
  }
  if (m_client->max_revision() < m_options.last_seen_revision) {
    return "holds no tpuctl state, and its revision (" + std::to_string(m_client->max_revision()) +
           ") is below the " + std::to_string(m_options.last_seen_revision) +
           " this machine's tpuctl saw there: the etcd cluster was reset (restarted with an "
           "empty data directory), and the state it held is gone";
  }
  return "holds no tpuctl state under prefix '" + m_options.prefix +
         "' any more, though this machine's tpuctl used a store there: its keys were deleted";
}

StoreInfo EtcdStore::info() const {
  StoreInfo i;
  i.backend = "etcd";
  i.location = m_options.location;
  i.schema_version = m_schema_version;
  i.supported_schema = k_etcd_schema_version;
  i.writable = m_schema_version <= k_etcd_schema_version;
  i.read_only_because = i.writable ? "" : "its schema is newer than this tpuctl's";
  return i;
}

Status EtcdStore::check_writable() const {
  if (m_held_revision != 0) {
    return Error(ErrorKind::failure,
                 "the etcd state store at " + m_options.location +
                     " cannot be written while its reads are held at a revision",
                 reason::k_invalid);
  }
  if (m_schema_version > k_etcd_schema_version) {
    return Error(ErrorKind::failure,
                 "the etcd state store at " + m_options.location + " has schema version " +
                     std::to_string(m_schema_version) + ", newer than the " +
                     std::to_string(k_etcd_schema_version) +
                     " this tpuctl writes: reads work, writes are refused; upgrade tpuctl",
                 reason::k_schema_too_new);
  }
  return ok();
}

Expected<std::pair<std::vector<Json>, int64_t>>
EtcdStore::read_ranges(const std::vector<Json>& ranges) {
  std::vector<Json> ops;
  for (const auto& r : ranges) {
    ops.push_back(etcd::op_range(at_held_revision(r)));
  }
  TPUCTL_TRY_ASSIGN(Json reply, m_client->post("/v3/kv/txn", etcd::txn_request({}, std::move(ops)),
                                               etcd::Retry::anywhere));
  std::vector<Json> out;
  for (size_t i = 0; i < ranges.size(); ++i) {
    out.push_back(etcd::txn_response_at(reply, i, "response_range"));
  }
  return std::make_pair(std::move(out), etcd::header_revision(reply));
}

Json EtcdStore::at_held_revision(Json range) const {
  if (m_held_revision != 0) {
    range["revision"] = std::to_string(m_held_revision);
  }
  return range;
}

Expected<Json> EtcdStore::read_range(Json range) {
  return m_client->post("/v3/kv/range", at_held_revision(std::move(range)), etcd::Retry::anywhere);
}

Expected<int64_t> EtcdStore::begin_reads() {
  TPUCTL_TRY_ASSIGN(m_held_revision, revision());
  return m_held_revision;
}

void EtcdStore::end_reads() {
  m_held_revision = 0;
}

Expected<std::vector<std::string>> EtcdStore::check_integrity() {
  // An empty AlarmRequest is action GET: every member's raised alarms.
  TPUCTL_TRY_ASSIGN(Json r,
                    m_client->post("/v3/maintenance/alarm", Json::object(), etcd::Retry::anywhere));
  std::vector<std::string> found;
  auto alarms = r.find("alarms");
  if (alarms != r.end() && alarms->is_array()) {
    for (const auto& a : *alarms) {
      std::string kind =
          a.contains("alarm")
              ? (a["alarm"].is_string() ? a["alarm"].get<std::string>() : a["alarm"].dump())
              : "NONE";
      std::string member = a.contains("memberID")
                               ? (a["memberID"].is_string() ? a["memberID"].get<std::string>()
                                                            : a["memberID"].dump())
                               : "?";
      found.push_back("etcd member " + member + " raised alarm " + kind +
                      (kind == "NOSPACE"   ? " (its quota is full: writes are refused until it is "
                                             "compacted, defragmented and the alarm disarmed)"
                       : kind == "CORRUPT" ? " (its data differs from the other members')"
                                           : ""));
    }
  }
  return found;
}

Expected<int64_t> EtcdStore::revision() {
  TPUCTL_TRY_ASSIGN(Json r, m_client->post("/v3/kv/range", etcd::range_request(m_keys.schema()),
                                           etcd::Retry::anywhere));
  return etcd::header_revision(r);
}

Status EtcdStore::ping() {
  TPUCTL_TRY(revision());
  return ok();
}

Expected<std::optional<Record>> EtcdStore::find(const Key& key) {
  TPUCTL_TRY(validate_op(CheckOp{key, k_absent}));
  const bool paged = key.kind == Kind::host;
  const std::string k = paged ? m_keys.host_page_of(key.pool, key.id) : m_keys.record(key);
  TPUCTL_TRY_ASSIGN(Json r, read_range(etcd::range_request(k)));
  saw(etcd::header_revision(r));
  TPUCTL_TRY_ASSIGN(auto kvs, kvs_of(r));
  if (kvs.empty()) {
    return std::optional<Record>{};
  }
  if (paged) {
    TPUCTL_TRY_ASSIGN(auto page, etcd::decode_host_page(kvs[0]));
    auto it = page.find(key.id);
    if (it == page.end()) {
      return std::optional<Record>{};
    }
    return std::optional<Record>(
        Record{key, std::move(it->second.doc), it->second.version, it->second.create_revision, {}});
  }
  TPUCTL_TRY_ASSIGN(Record rec, etcd::decode_record(m_keys, kvs[0]));
  return std::optional<Record>(std::move(rec));
}

Expected<std::vector<Record>> EtcdStore::decode_records(Kind kind,
                                                        const std::vector<KeyValue>& kvs) const {
  std::vector<Record> out;
  for (const auto& kv : kvs) {
    if (kind != Kind::host) {
      TPUCTL_TRY_ASSIGN(Record rec, etcd::decode_record(m_keys, kv));
      out.push_back(std::move(rec));
      continue;
    }
    auto parsed = m_keys.parse(kv.key);
    if (!parsed || parsed->family != "hosts") {
      continue; // not a page of this layout
    }
    TPUCTL_TRY_ASSIGN(auto page, etcd::decode_host_page(kv));
    for (auto& [name, rec] : page) {
      out.push_back(Record{
          host_key(parsed->pool, name), std::move(rec.doc), rec.version, rec.create_revision, {}});
    }
  }
  return out;
}

Expected<std::vector<Claim>> EtcdStore::decode_claims(const std::vector<KeyValue>& kvs) const {
  std::vector<Claim> out;
  const int64_t now = now_ms();
  for (const auto& kv : kvs) {
    auto parsed = m_keys.parse(kv.key);
    if (!parsed || parsed->family != "claims") {
      continue;
    }
    TPUCTL_TRY_ASSIGN(auto page, etcd::decode_claim_page(kv));
    for (auto& [host, c] : page) {
      if (c.live(now)) {
        out.push_back(Claim{parsed->pool, host, std::move(c.owner), c.claimed_at_ms,
                            c.expires_at_ms, c.revision});
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Claim& a, const Claim& b) {
    return std::tie(a.pool, a.host) < std::tie(b.pool, b.host);
  });
  return out;
}

Expected<Listing> EtcdStore::list(Kind kind, const std::string& pool) {
  std::string prefix = m_keys.records_of(kind, pool);
  etcd::RangeOptions opt;
  if (kind != Kind::pool || pool.empty()) {
    opt.range_end = etcd::prefix_end(prefix);
  }
  TPUCTL_TRY_ASSIGN(Json r, read_range(etcd::range_request(prefix, opt)));
  TPUCTL_TRY_ASSIGN(auto kvs, kvs_of(r));
  Listing out;
  out.revision = etcd::header_revision(r);
  saw(out.revision);
  TPUCTL_TRY_ASSIGN(out.records, decode_records(kind, kvs));
  sort_records(out.records);
  return out;
}

Expected<PoolSnapshot> EtcdStore::snapshot(const std::string& pool) {
  TPUCTL_TRY(validate_op(CheckOp{pool_key(pool), k_absent}));
  std::vector<Json> ranges{etcd::range_request(m_keys.record(pool_key(pool)))};
  std::vector<Kind> kinds;
  for (Kind k : all_kinds()) {
    if (k != Kind::pool) {
      kinds.push_back(k);
      std::string p = m_keys.records_of(k, pool);
      ranges.push_back(etcd::range_request(p, {etcd::prefix_end(p)}));
    }
  }
  std::string claims_prefix = m_keys.claim_pages_of(pool);
  ranges.push_back(etcd::range_request(claims_prefix, {etcd::prefix_end(claims_prefix)}));
  TPUCTL_TRY_ASSIGN(auto read, read_ranges(ranges));
  PoolSnapshot snap;
  snap.revision = read.second;
  saw(snap.revision);
  TPUCTL_TRY_ASSIGN(auto pool_kvs, kvs_of(read.first[0]));
  if (pool_kvs.empty()) {
    return Error(ErrorKind::not_found, "pool '" + pool + "' does not exist", reason::k_not_found);
  }
  TPUCTL_TRY_ASSIGN(snap.pool, etcd::decode_record(m_keys, pool_kvs[0]));
  for (size_t i = 1; i <= kinds.size(); ++i) {
    TPUCTL_TRY_ASSIGN(auto kvs, kvs_of(read.first[i]));
    TPUCTL_TRY_ASSIGN(auto records, decode_records(kinds[i - 1], kvs));
    std::move(records.begin(), records.end(), std::back_inserter(snap.records));
  }
  std::sort(snap.records.begin(), snap.records.end(), [](const Record& a, const Record& b) {
    return std::make_tuple(to_string(a.key.kind), std::cref(a.key.id)) <
           std::make_tuple(to_string(b.key.kind), std::cref(b.key.id));
  });
  TPUCTL_TRY_ASSIGN(auto claim_kvs, kvs_of(read.first.back()));
  TPUCTL_TRY_ASSIGN(snap.claims, decode_claims(claim_kvs));
  return snap;
}

Expected<std::vector<Claim>> EtcdStore::claims(const std::string& pool) {
  std::string prefix = m_keys.claim_pages_of(pool);
  TPUCTL_TRY_ASSIGN(Json r, read_range(etcd::range_request(prefix, {etcd::prefix_end(prefix)})));
  saw(etcd::header_revision(r));
  TPUCTL_TRY_ASSIGN(auto kvs, kvs_of(r));
  return decode_claims(kvs);
}

Expected<std::vector<Event>> EtcdStore::events(const EventQuery& q) {
  std::string prefix = m_keys.events_of(q.pool);
  etcd::RangeOptions opt;
  opt.range_end = etcd::prefix_end(prefix);
  opt.min_create_revision = q.after_revision + 1;
  TPUCTL_TRY_ASSIGN(Json r, read_range(etcd::range_request(prefix, opt)));
  saw(etcd::header_revision(r));
  TPUCTL_TRY_ASSIGN(auto kvs, kvs_of(r));
  // Oldest first: by revision, then by the index in the key within one commit (schema 1 wrote
  // one key per event; schema 2 one key per commit and pool, its events in order).
  std::sort(kvs.begin(), kvs.end(), [](const KeyValue& a, const KeyValue& b) {
    auto order = [](const KeyValue& kv) {
      return kv.key.substr(kv.key.rfind('.') == std::string::npos ? 0 : kv.key.rfind('.'));
    };
    return std::make_tuple(a.create_revision, order(a), std::cref(a.key)) <
           std::make_tuple(b.create_revision, order(b), std::cref(b.key));
  });
  std::vector<Event> out;
  for (const auto& kv : kvs) {
    if (kv.create_revision <= q.after_revision) {
      continue;
    }
    TPUCTL_TRY_ASSIGN(auto decoded, etcd::decode_events(m_keys, kv));
    for (auto& e : decoded) {
      if ((q.subject_kind && e.subject_kind != *q.subject_kind) ||
          (!q.subject.empty() && e.subject != q.subject)) {
        continue;
      }
      out.push_back(std::move(e));
      if (q.limit != 0 && out.size() >= q.limit) {
        return out;
      }
    }
  }
  return out;
}

Expected<std::vector<Heartbeat>> EtcdStore::live_heartbeats(const std::string& pool) {
  TPUCTL_TRY(validate_op(CheckOp{pool_key(pool), k_absent}));
  // With the hosts, in one read: a heartbeat counts only for a host that exists and was written
  // after that host was added (removing a host leaves its heartbeat key to its lease).
  std::string prefix = m_keys.heartbeats_of(pool);
  std::string hosts = m_keys.host_pages_of(pool);
  TPUCTL_TRY_ASSIGN(auto read,
                    read_ranges({etcd::range_request(prefix, {etcd::prefix_end(prefix)}),
                                 etcd::range_request(hosts, {etcd::prefix_end(hosts)})}));
  saw(read.second);
  TPUCTL_TRY_ASSIGN(auto kvs, kvs_of(read.first[0]));
  TPUCTL_TRY_ASSIGN(auto host_kvs, kvs_of(read.first[1]));
  TPUCTL_TRY_ASSIGN(auto records, decode_records(Kind::host, host_kvs));
  std::map<std::string, int64_t> added_at; // host -> create revision
  for (const auto& r : records) {
    added_at[r.key.id] = r.create_revision;
  }
  std::vector<Heartbeat> out;
  int64_t now = now_ms();
  for (const auto& kv : kvs) {
    TPUCTL_TRY_ASSIGN(Heartbeat h, etcd::decode_heartbeat(m_keys, kv));
    auto host = added_at.find(h.host);
    if (host != added_at.end() && kv.mod_revision > host->second &&
        h.last_seen_ms + h.ttl_ms > now) {
      out.push_back(std::move(h));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Heartbeat& a, const Heartbeat& b) { return a.host < b.host; });
  return out;
}

Expected<CommitResult> EtcdStore::transact(const TransactFn& fn, const TransactOptions& options) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const int attempts = std::max(1, options.max_attempts);
  auto backoff = options.base_backoff;
  for (int attempt = 1;; ++attempt) {
    m_tracking = true;
    m_first_read = 0;
    auto ops = fn(*this);
    m_tracking = false;
    if (!ops) {
      return std::move(ops).error();
    }
    m_last_view = 0;
    auto result = commit(*ops);
    if (result) {
      return result;
    }
    const Error& e = result.error();
    bool conflict = has_reason(e, reason::k_conflict);
    bool stale = m_first_read != 0 && m_last_view > m_first_read &&
                 (has_reason(e, reason::k_hosts_busy) || has_reason(e, reason::k_not_owner) ||
                  has_reason(e, reason::k_already_exists) || has_reason(e, reason::k_not_found));
    if (!conflict && !stale) {
      return result;
    }
    if (attempt >= attempts) {
      return conflict ? gave_up_after(std::move(result).error(), attempt) : result;
    }
    std::uniform_int_distribution<int64_t> dist(0, std::max<int64_t>(backoff.count(), 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(dist(rng)));
    backoff = std::min(options.max_backoff, backoff * 2);
  }
}

Expected<int64_t> EtcdStore::grant_lease(int64_t ttl_seconds) {
  TPUCTL_TRY_ASSIGN(Json r,
                    m_client->post("/v3/lease/grant", etcd::lease_grant_request(ttl_seconds),
                                   etcd::Retry::anywhere));
  int64_t id = etcd::int64_field(r, "ID");
  if (id == 0) {
    return Error(ErrorKind::failure,
                 "the etcd state store granted no lease: '" + r.value("error", std::string()) + "'",
                 reason::k_unavailable);
  }
  return id;
}

Expected<int64_t> EtcdStore::marker_lease() {
  // Re-granted at half its life, so a marker always outlives the resolution of its commit.
  auto age = std::chrono::steady_clock::now() - m_marker_granted;
  if (m_marker_lease == 0 || age > m_options.marker_ttl / 2) {
    TPUCTL_TRY_ASSIGN(m_marker_lease, grant_lease(m_options.marker_ttl.count()));
    m_marker_granted = std::chrono::steady_clock::now();
  }
  return m_marker_lease;
}

namespace {

// A role names one key: lowercase letters, digits and '-'.
Status check_role(const std::string& role) {
  const bool ok_chars = !role.empty() && std::all_of(role.begin(), role.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
  if (!ok_chars) {
    return Error(ErrorKind::usage, "leadership role '" + role + "' is not [a-z0-9-]+",
                 reason::k_invalid);
  }
  return ok();
}

// The leader's document in a range response; null when the key is absent or unreadable.
Json leader_in(const Json& range_response, int64_t* lease = nullptr) {
  auto kvs = etcd::parse_kvs(range_response);
  if (!kvs || kvs->empty()) {
    return nullptr;
  }
  if (lease != nullptr) {
    *lease = kvs->front().lease;
  }
  Json doc = Json::parse(kvs->front().value, nullptr, false);
  return doc.is_discarded() ? Json(nullptr) : doc;
}

} // namespace

Expected<size_t> EtcdStore::compact_events(const std::string& pool,
                                           const EventRetention& retention) {
  if (!retention.any()) {
    return size_t{0};
  }
  TPUCTL_TRY(check_writable());
  const std::string prefix = m_keys.events_of(pool);
  Json count = etcd::range_request(prefix, {etcd::prefix_end(prefix)});
  count["count_only"] = true;
  TPUCTL_TRY_ASSIGN(Json counted, m_client->post("/v3/kv/range", count, etcd::Retry::anywhere));
  const int64_t total = etcd::int64_field(counted, "count");
  const int64_t over = retention.max_events > 0 ? total - retention.max_events : 0;
  // The oldest: those over the count (at most 2000 a time), and as many more for the age as
  // were appended since the last compaction.
  const int64_t batch =
      std::min<int64_t>(std::max<int64_t>(over, 0), 2000) + compaction_interval(retention);
  Json oldest = etcd::range_request(prefix, {etcd::prefix_end(prefix)});
  oldest["sort_order"] = "ASCEND";
  oldest["sort_target"] = "CREATE";
  oldest["limit"] = std::to_string(batch);
  TPUCTL_TRY_ASSIGN(Json r, m_client->post("/v3/kv/range", oldest, etcd::Retry::anywhere));
  TPUCTL_TRY_ASSIGN(auto kvs, kvs_of(r));
  const int64_t cutoff = retention.max_age_ms > 0 ? now_ms() - retention.max_age_ms : 0;
  std::vector<std::string> doomed;
  for (size_t i = 0; i < kvs.size(); ++i) {
    bool old = false;
    if (cutoff > 0) {
      if (auto events = etcd::decode_events(m_keys, kvs[i]); events && !events->empty()) {
        old = events->back().time_ms < cutoff;
      }
    }
    if (static_cast<int64_t>(i) < over || old) {
      doomed.push_back(kvs[i].key);
    }
  }
  for (size_t at = 0; at < doomed.size(); at += 100) {
    std::vector<Json> deletes;
    for (size_t i = at; i < std::min(doomed.size(), at + 100); ++i) {
      deletes.push_back(etcd::op_delete(etcd::delete_request(doomed[i])));
    }
    // Deleting a deleted key is no change: any member may be asked again.
    TPUCTL_TRY_ASSIGN(Json done, m_client->post("/v3/kv/txn", etcd::txn_request({}, deletes),
                                                etcd::Retry::anywhere));
    (void)done;
  }
  return doomed.size();
}

Expected<StateStore::Leadership> EtcdStore::campaign(const std::string& role, const Json& candidate,
                                                     std::chrono::seconds ttl) {
  TPUCTL_TRY(check_role(role));
  TPUCTL_TRY(check_writable());
  const std::string key = m_keys.leader(role);
  int64_t& held = m_leader_leases[role];
  if (held != 0) {
    // Still the leader while the lease lives and the key is on it.
    auto kept = m_client->post("/v3/lease/keepalive", Json{{"ID", std::to_string(held)}},
                               etcd::Retry::anywhere);
    if (kept) {
      const Json& result = kept->contains("result") ? (*kept)["result"] : *kept;
      if (etcd::int64_field(result, "TTL") > 0) {
        TPUCTL_TRY_ASSIGN(Json r, m_client->post("/v3/kv/range", etcd::range_request(key),
                                                 etcd::Retry::anywhere));
        int64_t on = 0;
        Json doc = leader_in(r, &on);
        if (on == held) {
          return Leadership{true, doc};
        }
      }
    }
    held = 0; // lost: campaign again like anyone
  }
  TPUCTL_TRY_ASSIGN(int64_t lease, grant_lease(ttl.count()));
  Json txn = etcd::txn_request({etcd::compare_mod_equals(key, 0)},
                               {etcd::op_put(etcd::put_request(key, candidate.dump(), lease))},
                               {etcd::op_range(etcd::range_request(key))});
  TPUCTL_TRY_ASSIGN(Json r, m_client->post("/v3/kv/txn", txn, etcd::Retry::anywhere));
  if (etcd::bool_field(r, "succeeded")) {
    held = lease;
    return Leadership{true, candidate};
  }
  // Someone leads: the lease granted for nothing goes at once.
  (void)m_client->post("/v3/lease/revoke", Json{{"ID", std::to_string(lease)}},
                       etcd::Retry::anywhere);
  return Leadership{false, leader_in(etcd::txn_response_at(r, 0, "response_range"))};
}

Expected<Json> EtcdStore::leader(const std::string& role) {
  TPUCTL_TRY(check_role(role));
  TPUCTL_TRY_ASSIGN(Json r, read_range(etcd::range_request(m_keys.leader(role))));
  return leader_in(r);
}

Status EtcdStore::resign(const std::string& role) {
  auto it = m_leader_leases.find(role);
  if (it == m_leader_leases.end() || it->second == 0) {
    return ok();
  }
  const int64_t lease = it->second;
  it->second = 0;
  // Revoking the lease deletes the key on it: the next campaign of another wins at once.
  TPUCTL_TRY_ASSIGN(Json r, m_client->post("/v3/lease/revoke", Json{{"ID", std::to_string(lease)}},
                                           etcd::Retry::anywhere));
  (void)r;
  return ok();
}

Status EtcdStore::put_heartbeat(const std::string& pool, const std::string& host,
                                const Json& payload, std::chrono::seconds ttl) {
  TPUCTL_TRY(validate_op(CheckOp{host_key(pool, host), k_absent})); // the key rules
  if (ttl.count() <= 0 || !payload.is_object()) {
    return Error(ErrorKind::usage,
                 "heartbeat of host '" + host + "' needs a positive ttl and a JSON object payload",
                 reason::k_invalid);
  }
  TPUCTL_TRY(check_writable());
  TPUCTL_TRY_ASSIGN(int64_t lease, grant_lease(ttl.count()));
  std::string value = etcd::encode_heartbeat(payload, now_ms(), ttl.count() * 1000);
  Json txn = etcd::txn_request(
      {etcd::compare_exists(m_keys.record(pool_key(pool)))},
      {etcd::op_put(etcd::put_request(m_keys.heartbeat(pool, host), value, lease))});
  // A heartbeat put twice is the same heartbeat, so any member may be asked again.
  TPUCTL_TRY_ASSIGN(Json r, m_client->post("/v3/kv/txn", txn, etcd::Retry::anywhere));
  if (!etcd::bool_field(r, "succeeded")) {
    return Error(ErrorKind::not_found,
                 "cannot record a heartbeat of host '" + host + "': pool '" + pool +
                     "' does not exist",
                 reason::k_not_found);
  }
  return ok();
}

Expected<int64_t> EtcdStore::wait_for_change(const std::string& pool, int64_t after_revision,
                                             std::chrono::milliseconds timeout) {
  static const std::set<std::string> k_changes{
      "pool", "hosts", "queued_resource", "cluster", "workload", "claims", "event"};
  const std::string& prefix = m_keys.prefix();
  Json create{{"key", etcd::base64_encode(prefix)},
              {"range_end", etcd::base64_encode(etcd::prefix_end(prefix))},
              {"start_revision", std::to_string(std::max<int64_t>(after_revision, 0) + 1)}};
  int64_t found = 0;
  bool went_back = false;
  auto on_result = [&](const Json& result) {
    if (etcd::bool_field(result, "created") && etcd::header_revision(result) < after_revision) {
      // Below a revision already seen: a cluster reset under us, or a member that lags. A
      // linearizable read below tells which.
      went_back = true;
      return true;
    }
    if (etcd::bool_field(result, "canceled")) {
      // History before after_revision was compacted away: say "changed", the caller re-reads.
      found = std::max(etcd::header_revision(result), after_revision + 1);
      return true;
    }
    auto events = result.find("events");
    if (events == result.end() || !events->is_array()) {
      return false;
    }
    for (const auto& ev : *events) {
      auto kv = ev.find("kv");
      if (kv == ev.end()) {
        continue;
      }
      auto decoded = etcd::parse_kv(*kv);
      if (!decoded) {
        continue;
      }
      auto parsed = m_keys.parse(decoded->key);
      if (parsed && k_changes.count(parsed->family) && (pool.empty() || parsed->pool == pool)) {
        found = decoded->mod_revision;
        return true;
      }
    }
    return false;
  };
  TPUCTL_TRY_ASSIGN(auto end, m_client->watch(create, timeout, on_result));
  (void)end;
  if (went_back) {
    TPUCTL_TRY(revision()); // k_store_replaced when the cluster's revision really went back
    return after_revision;  // a lagging member: the caller reads again
  }
  return found != 0 ? found : after_revision;
}

} // namespace tpuctl::state
