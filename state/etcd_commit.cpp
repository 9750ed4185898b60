// EtcdStore::commit: read what the ops depend on, apply them to that view with SQLite's rules,
// write the result in one txn guarded by compares on everything read, retry on a lost compare,
// and resolve a txn whose reply was lost through its commit marker (see etcd_store.hpp).
//
// The view holds two kinds of slots. A Slot is one-key record (a pool, queued resource, cluster
// or workload); a PageSlot is a host page or a claim page (state/etcd_pages.hpp), decoded. Each
// remembers the mod_revision it had when read (0 = absent) and whether a decision depended on
// it ("consulted"); every consulted slot becomes one `mod_revision == read` compare. A claim of
// N hosts thus costs one compare per host page and per claim page it touches (at most 2 x 16),
// whatever N is, and the same txn rewrites those pages: all or nothing, never a host twice.
#include <random>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "state/etcd_pages.hpp"
#include "state/etcd_store.hpp"
#include "state/etcd_values.hpp"
#include "util/strings.hpp"

namespace tpuctl::state {

using etcd::KeyValue;

namespace {

std::string in_quotes(const std::string& s) {
  return "'" + s + "'";
}

std::string random_nonce() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

constexpr int64_t k_written_here = -2; // the version of a record this commit already wrote

// Headroom under --max-request-bytes for what the estimate does not count (protobuf framing of
// the txn, the compares' fields).
constexpr size_t k_request_slack = 4096;

enum class Outcome { applied, not_applied };

// A one-key record.
struct Slot {
  bool known = false;     // read from the store
  bool consulted = false; // a decision depended on it: its mod_revision is compared
  bool existed = false;   // when read
  int64_t read_mod = 0;   // mod_revision when read; 0 when absent
  bool exists = false;    // in the view, after the ops so far
  std::string value;
  bool dirty = false; // written by this commit
};

// A host page or a claim page.
template <typename Page>
struct PageSlot {
  bool known = false;
  bool consulted = false;
  bool existed = false;
  int64_t read_mod = 0;
  Page page;
  bool dirty = false;
  void consult() { consulted = true; }
};
using HostSlot = PageSlot<etcd::HostPage>;
using ClaimSlot = PageSlot<etcd::ClaimPage>;

// Checks a record's version against an op's expectation (the rules and words of SQLite's).
Status check_expected(const Key& key, const Slot& s, int64_t expected) {
  std::optional<int64_t> current;
  if (s.exists) {
    current = s.dirty ? k_written_here : s.read_mod;
  }
  return check_expected_version(key, current, expected);
}

} // namespace

// The commit machinery, with access to the store's client and options.
struct EtcdStore::Internals {
  Internals(EtcdStore& s, int64_t now_ms)
      : store(s), keys(s.m_keys), now(now_ms), nonce(random_nonce()) {}

  EtcdStore& store;
  const etcd::KeyLayout& keys;
  int64_t now;
  std::string nonce;

  std::map<std::string, Slot> slots;
  std::map<std::string, HostSlot> host_pages;
  std::map<std::string, ClaimSlot> claim_pages;
  std::map<std::string, int64_t> claims_read_at; // pool -> revision its claim pages were read at
  std::vector<std::string> wiped_prefixes;       // delete-ranges of removed pools
  std::vector<std::string> wiped_pools;
  std::map<std::string, std::vector<Event>> events; // pool -> events, in order
  int64_t read_revision = 0;

  // ---- step 1: reads ----
  struct Reads {
    std::set<std::string> keys;        // one-key records
    std::set<std::string> host_pages;  // page keys
    std::set<std::string> claim_pages; // page keys
    std::set<std::string> claim_pools; // every claim page of the pool (a pool removal)
  };

  Reads reads_of(const std::vector<Op>& ops) const {
    Reads r;
    auto record = [&](const Key& key) {
      if (key.kind == Kind::host) {
        r.host_pages.insert(keys.host_page_of(key.pool, key.id));
      } else {
        r.keys.insert(keys.record(key));
      }
    };
    for (const auto& op : ops) {
      if (auto* c = std::get_if<CreateOp>(&op)) {
        record(c->key);
        if (c->key.kind != Kind::pool) {
          r.keys.insert(keys.record(pool_key(c->key.pool)));
        }
      } else if (auto* u = std::get_if<UpdateOp>(&op)) {
        record(u->key);
      } else if (auto* k = std::get_if<CheckOp>(&op)) {
        record(k->key);
      } else if (auto* d = std::get_if<RemoveOp>(&op)) {
        record(d->key);
        if (d->key.kind == Kind::pool) {
          r.keys.insert(keys.record(d->key));
          r.claim_pools.insert(d->key.pool);
        } else if (d->key.kind == Kind::host) {
          r.claim_pages.insert(keys.claim_page_of(d->key.pool, d->key.id));
        }
      } else if (auto* cl = std::get_if<ClaimOp>(&op)) {
        for (const auto& h : cl->hosts) {
          r.host_pages.insert(keys.host_page_of(cl->pool, h));
          r.claim_pages.insert(keys.claim_page_of(cl->pool, h));
        }
      } else if (auto* rl = std::get_if<ReleaseOp>(&op)) {
        for (const auto& h : rl->hosts) {
          r.claim_pages.insert(keys.claim_page_of(rl->pool, h));
        }
      }
    }
    return r;
  }

  void fill(const std::string& key, const std::vector<KeyValue>& kvs) {
    Slot& s = slots[key];
    if (s.known) {
      return;
    }
    s.known = true;
    if (!kvs.empty()) {
      s.existed = s.exists = true;
      s.read_mod = kvs[0].mod_revision;
      s.value = kvs[0].value;
    }
  }

  template <typename Slots, typename Decode>
  Status fill_page(Slots& pages, const std::string& key, const KeyValue* kv, Decode decode) {
    auto& s = pages[key];
    if (s.known) {
      return ok();
    }
    s.known = true;
    if (kv) {
      TPUCTL_TRY_ASSIGN(s.page, decode(*kv));
      s.existed = true;
      s.read_mod = kv->mod_revision;
    }
    return ok();
  }

  Status fill_host_page(const std::string& key, const std::vector<KeyValue>& kvs) {
    return fill_page(host_pages, key, kvs.empty() ? nullptr : &kvs[0], etcd::decode_host_page);
  }
  Status fill_claim_page(const std::string& key, const KeyValue* kv) {
    return fill_page(claim_pages, key, kv, etcd::decode_claim_page);
  }

  Status read(const std::vector<Op>& ops) {
    Reads r = reads_of(ops);
    struct Unit {
      Json range;
      std::function<Status(const Json&, int64_t)> take;
    };
    std::vector<Unit> units;
    for (const auto& pool : r.claim_pools) {
      std::string cp = keys.claim_pages_of(pool);
      units.push_back({etcd::range_request(cp, {etcd::prefix_end(cp)}),
                       [this, pool](const Json& res, int64_t rev) -> Status {
                         TPUCTL_TRY_ASSIGN(auto found, kvs(res));
                         std::map<std::string, const KeyValue*> by_key;
                         for (const auto& kv : found) {
                           by_key[kv.key] = &kv;
                         }
                         for (int p = 0; p < etcd::k_pages_per_pool; ++p) {
                           std::string key = keys.claim_page(pool, p);
                           auto it = by_key.find(key);
                           TPUCTL_TRY(
                               fill_claim_page(key, it == by_key.end() ? nullptr : it->second));
                         }
                         claims_read_at[pool] = rev;
                         return ok();
                       }});
    }
    for (const auto& key : r.claim_pages) {
      units.push_back({etcd::range_request(key), [this, key](const Json& res, int64_t) -> Status {
                         TPUCTL_TRY_ASSIGN(auto found, kvs(res));
                         return fill_claim_page(key, found.empty() ? nullptr : &found[0]);
                       }});
    }
    for (const auto& key : r.host_pages) {
      units.push_back({etcd::range_request(key), [this, key](const Json& res, int64_t) -> Status {
                         TPUCTL_TRY_ASSIGN(auto found, kvs(res));
                         return fill_host_page(key, found);
                       }});
    }
    for (const auto& key : r.keys) {
      units.push_back({etcd::range_request(key), [this, key](const Json& res, int64_t) -> Status {
                         TPUCTL_TRY_ASSIGN(auto found, kvs(res));
                         fill(key, found);
                         return ok();
                       }});
    }
    // As few read txns as the op limit allows.
    const size_t limit = std::max<size_t>(1, store.m_options.max_txn_ops);
    for (size_t i = 0; i < units.size(); i += limit) {
      size_t j = std::min(units.size(), i + limit);
      std::vector<Json> ranges;
      for (size_t u = i; u < j; ++u) {
        ranges.push_back(units[u].range);
      }
      TPUCTL_TRY_ASSIGN(auto got, store.read_ranges(ranges));
      read_revision = std::max(read_revision, got.second);
      for (size_t u = i; u < j; ++u) {
        TPUCTL_TRY(units[u].take(got.first[u - i], got.second));
      }
    }
    return ok();
  }

  static Expected<std::vector<KeyValue>> kvs(const Json& response) {
    auto out = etcd::parse_kvs(response);
    if (!out) {
      return Error(ErrorKind::failure,
                   "the etcd state store answered with keys that are not base64",
                   reason::k_unavailable);
    }
    return std::move(*out);
  }

  // ---- step 2: the ops, applied to the view ----
  Slot& slot(const std::string& key) { return slots[key]; }
  HostSlot& host_page(const std::string& pool, const std::string& host) {
    return host_pages[keys.host_page_of(pool, host)];
  }
  ClaimSlot& claim_page(const std::string& pool, const std::string& host) {
    return claim_pages[keys.claim_page_of(pool, host)];
  }

  // The live claim on `host`, if any (its page is consulted).
  const etcd::PagedClaim* live_claim(const std::string& pool, const std::string& host) {
    ClaimSlot& cs = claim_page(pool, host);
    cs.consult();
    auto it = cs.page.find(host);
    return it != cs.page.end() && it->second.live(now) ? &it->second : nullptr;
  }

  void write(Slot& s, std::string value) {
    s.exists = true;
    s.dirty = true;
    s.value = std::move(value);
  }
  void erase(Slot& s) {
    s.exists = false;
    s.dirty = true;
    s.value.clear();
  }

  Status pool_must_exist(const Key& key) {
    Slot& p = slot(keys.record(pool_key(key.pool)));
    p.consulted = p.consulted || !p.dirty;
    if (!p.exists) {
      return Error(ErrorKind::not_found,
                   "cannot create " + describe(key) + ": pool '" + key.pool + "' does not exist",
                   reason::k_not_found);
    }
    return ok();
  }

  // A host record's version for check_expected_version: nullopt when absent.
  static std::optional<int64_t> current_version(const HostSlot& hs, const std::string& host) {
    auto it = hs.page.find(host);
    if (it == hs.page.end()) {
      return std::nullopt;
    }
    return it->second.version == 0 ? k_written_here : it->second.version;
  }

  Status apply(const CreateOp& op) {
    if (op.key.kind != Kind::pool) {
      TPUCTL_TRY(pool_must_exist(op.key));
    }
    if (op.key.kind == Kind::host) {
      HostSlot& hs = host_page(op.key.pool, op.key.id);
      hs.consult();
      if (hs.page.count(op.key.id)) {
        return Error(ErrorKind::failure, describe(op.key) + " already exists",
                     reason::k_already_exists);
      }
      hs.page[op.key.id] = etcd::PagedRecord{op.doc, 0, 0};
      hs.dirty = true;
      return ok();
    }
    Slot& s = slot(keys.record(op.key));
    s.consulted = s.consulted || !s.dirty;
    if (s.exists) {
      return Error(ErrorKind::failure, describe(op.key) + " already exists",
                   reason::k_already_exists);
    }
    write(s, to_text(op.doc));
    return ok();
  }

  Status apply(const UpdateOp& op) {
    if (op.key.kind == Kind::host) {
      HostSlot& hs = host_page(op.key.pool, op.key.id);
      hs.consult();
      TPUCTL_TRY(
          check_expected_version(op.key, current_version(hs, op.key.id), op.expected_version));
      auto& rec = hs.page[op.key.id];
      rec.doc = op.doc;
      rec.version = 0;
      hs.dirty = true;
      return ok();
    }
    Slot& s = slot(keys.record(op.key));
    s.consulted = s.consulted || !s.dirty;
    TPUCTL_TRY(check_expected(op.key, s, op.expected_version));
    write(s, to_text(op.doc));
    return ok();
  }

  Status apply(const CheckOp& op) {
    if (op.key.kind == Kind::host) {
      HostSlot& hs = host_page(op.key.pool, op.key.id);
      hs.consult();
      return check_expected_version(op.key, current_version(hs, op.key.id), op.expected_version);
    }
    Slot& s = slot(keys.record(op.key));
    s.consulted = s.consulted || !s.dirty;
    return check_expected(op.key, s, op.expected_version);
  }

  Status refuse_removal(const Key& key, const std::vector<std::string>& busy) {
    return Error(ErrorKind::failure,
                 "cannot remove " + describe(key) + ": " + util::join(busy, ", ") +
                     "; release or drain the claims first",
                 reason::k_hosts_busy);
  }

  Status apply(const RemoveOp& op) {
    if (op.key.kind == Kind::host) {
      HostSlot& hs = host_page(op.key.pool, op.key.id);
      hs.consult();
      TPUCTL_TRY(
          check_expected_version(op.key, current_version(hs, op.key.id), op.expected_version));
      if (const auto* c = live_claim(op.key.pool, op.key.id)) {
        return refuse_removal(op.key,
                              {in_quotes(op.key.id) + " is claimed by " + in_quotes(c->owner)});
      }
      hs.page.erase(op.key.id);
      hs.dirty = true;
      ClaimSlot& cs = claim_page(op.key.pool, op.key.id);
      if (cs.page.erase(op.key.id)) { // an expired provisional claim
        cs.dirty = true;
      }
      return ok();
    }
    Slot& s = slot(keys.record(op.key));
    s.consulted = s.consulted || !s.dirty;
    TPUCTL_TRY(check_expected(op.key, s, op.expected_version));
    if (op.key.kind == Kind::pool) {
      std::vector<std::string> busy;
      for (int p = 0; p < etcd::k_pages_per_pool; ++p) {
        const ClaimSlot& cs = claim_pages[keys.claim_page(op.key.pool, p)];
        for (const auto& [host, c] : cs.page) {
          if (c.live(now)) {
            busy.push_back(in_quotes(host) + " is claimed by " + in_quotes(c.owner));
          }
        }
      }
      if (!busy.empty()) {
        std::sort(busy.begin(), busy.end());
        return refuse_removal(op.key, busy);
      }
      erase(s);
      wipe_pool(op.key.pool);
      return ok();
    }
    erase(s);
    return ok();
  }

  void wipe_pool(const std::string& pool) {
    std::vector<std::string> prefixes;
    for (Kind k : all_kinds()) {
      if (k != Kind::pool) {
        prefixes.push_back(keys.records_of(k, pool));
      }
    }
    for (const auto& p :
         {keys.claim_pages_of(pool), keys.heartbeats_of(pool), keys.events_of(pool)}) {
      prefixes.push_back(p);
    }
    auto forget = [&](auto& map, const std::string& p, auto clear) {
      for (auto it = map.lower_bound(p); it != map.end() && util::starts_with(it->first, p); ++it) {
        clear(it->second);
        it->second.dirty = false; // the range delete covers it
      }
    };
    for (const auto& p : prefixes) {
      forget(slots, p, [](Slot& s) { s.exists = false; });
      forget(host_pages, p, [](HostSlot& s) { s.page.clear(); });
      forget(claim_pages, p, [](ClaimSlot& s) { s.page.clear(); });
      wiped_prefixes.push_back(p);
    }
    wiped_pools.push_back(pool);
    events.erase(pool); // events of the pool queued earlier in this commit go with it
  }

  Status apply(const ClaimOp& op) {
    std::vector<std::string> missing, busy;
    for (const auto& host : op.hosts) {
      HostSlot& hs = host_page(op.pool, host);
      hs.consult();
      if (!hs.page.count(host)) {
        missing.push_back(in_quotes(host));
        continue;
      }
      if (const auto* c = live_claim(op.pool, host)) {
        busy.push_back(in_quotes(host) + " is claimed by " + in_quotes(c->owner));
      }
    }
    TPUCTL_TRY(check_claimable(op, missing, busy));
    etcd::PagedClaim claim{op.owner, op.claimed_at_ms != 0 ? op.claimed_at_ms : now, 0, 0};
    if (op.ttl.count() > 0) {
      claim.expires_at_ms = now + static_cast<int64_t>(op.ttl.count()) * 1000;
    }
    for (const auto& host : op.hosts) {
      ClaimSlot& cs = claim_page(op.pool, host);
      cs.page[host] = claim;
      cs.dirty = true;
    }
    return ok();
  }

  Status apply(const ReleaseOp& op) {
    std::vector<std::string> problems;
    for (const auto& host : op.hosts) {
      const auto* c = live_claim(op.pool, host);
      if (!c) {
        problems.push_back(in_quotes(host) + " is not claimed");
      } else if (c->owner != op.owner) {
        problems.push_back(in_quotes(host) + " is claimed by " + in_quotes(c->owner));
      }
    }
    if (!problems.empty()) {
      return Error(ErrorKind::failure,
                   "cannot release hosts in pool '" + op.pool + "' for '" + op.owner +
                       "': " + util::join(problems, ", "),
                   reason::k_not_owner);
    }
    for (const auto& host : op.hosts) {
      ClaimSlot& cs = claim_page(op.pool, host);
      cs.page.erase(host);
      cs.dirty = true;
    }
    return ok();
  }

  Status apply(const EventOp& op) {
    Event e = op.event;
    if (e.time_ms == 0) {
      e.time_ms = now;
    }
    if (e.actor.empty()) {
      e.actor = store.actor();
    }
    events[e.pool].push_back(std::move(e));
    return ok();
  }

  bool writes_anything() const {
    if (!events.empty() || !wiped_prefixes.empty()) {
      return true;
    }
    auto any_dirty = [](const auto& map) {
      return std::any_of(map.begin(), map.end(), [](const auto& kv) { return kv.second.dirty; });
    };
    return any_dirty(slots) || any_dirty(host_pages) || any_dirty(claim_pages);
  }

  // ---- step 3: the txn ----
  const std::string* wiped_prefix_of(const std::string& key) const {
    for (const auto& p : wiped_prefixes) {
      if (util::starts_with(key, p)) {
        return &p;
      }
    }
    return nullptr;
  }

  static Error writes_into_removed_pool(const std::string& key) {
    return Error(ErrorKind::usage,
                 "a commit that removes a pool cannot also write into it ('" + key +
                     "'): commit those ops separately",
                 reason::k_invalid);
  }

  // The txn, and the bytes etcd will count for it.
  struct Built {
    Json txn;
    size_t bytes = 0;
    size_t compares = 0;
    size_t writes = 0;
  };

  Expected<Built> build(int64_t marker_lease) {
    Built out;
    std::string marker = keys.marker(nonce);
    std::vector<Json> compares{etcd::compare_mod_equals(marker, 0)};
    std::vector<Json> success;
    auto put = [&](const std::string& key, const std::string& value, int64_t lease = 0) {
      out.bytes += etcd::request_bytes(key, value);
      success.push_back(etcd::op_put(etcd::put_request(key, value, lease)));
    };
    auto del = [&](const std::string& key, const std::string& end = "") {
      out.bytes += etcd::request_bytes(key, end);
      success.push_back(etcd::op_delete(etcd::delete_request(key, end)));
    };
    auto compare = [&](const std::string& key, int64_t mod) {
      out.bytes += etcd::request_bytes(key, "");
      compares.push_back(etcd::compare_mod_equals(key, mod));
    };
    for (const auto& [key, s] : slots) {
      if (s.consulted) { // an absent slot was read as absent: mod_revision 0 guards that
        compare(key, s.read_mod);
      }
    }
    for (const auto& [key, s] : host_pages) {
      if (s.consulted) {
        compare(key, s.read_mod);
      }
    }
    for (const auto& [key, s] : claim_pages) {
      if (s.consulted) {
        compare(key, s.read_mod);
      }
    }
    for (const auto& pool : wiped_pools) {
      std::string cp = keys.claim_pages_of(pool);
      auto at = claims_read_at.find(pool);
      compares.push_back(etcd::compare_mod_below(
          cp, etcd::prefix_end(cp), (at == claims_read_at.end() ? read_revision : at->second) + 1));
    }
    for (const auto& [key, s] : slots) {
      if (!s.dirty) {
        continue;
      }
      const std::string* wiped = wiped_prefix_of(key);
      if (s.exists) {
        if (wiped) {
          return writes_into_removed_pool(key);
        }
        put(key, s.value);
      } else if (!wiped && s.existed) {
        del(key);
      }
    }
    for (const auto& [key, s] : host_pages) {
      if (!s.dirty) {
        continue;
      }
      if (wiped_prefix_of(key)) {
        return writes_into_removed_pool(key);
      }
      if (!s.page.empty()) {
        put(key, etcd::encode_host_page(s.page));
      } else if (s.existed) {
        del(key);
      }
    }
    for (auto& [key, s] : claim_pages) {
      if (!s.dirty) {
        continue;
      }
      if (wiped_prefix_of(key)) {
        return writes_into_removed_pool(key);
      }
      std::erase_if(s.page, [&](const auto& c) { return !c.second.live(now); }); // lapsed
      if (!s.page.empty()) {
        put(key, etcd::encode_claim_page(s.page));
      } else if (s.existed) {
        del(key);
      }
    }
    for (const auto& p : wiped_prefixes) {
      del(p, etcd::prefix_end(p));
    }
    for (const auto& [pool, list] : events) {
      std::string key = keys.event(pool, nonce, 0);
      if (wiped_prefix_of(key)) {
        return Error(ErrorKind::usage,
                     "a commit that removes a pool cannot also record an event in it: commit the "
                     "event separately",
                     reason::k_invalid);
      }
      put(key, etcd::encode_events(list));
    }
    put(marker, "applied", marker_lease);
    out.compares = compares.size();
    out.writes = success.size();
    out.txn = etcd::txn_request(std::move(compares), std::move(success));
    return out;
  }

  // Refuses a txn above etcd's limits, naming the numbers and what to do.
  Status check_limits(const Built& b) const {
    const size_t ops = store.m_options.max_txn_ops;
    if (b.compares > ops || b.writes > ops) {
      return Error(ErrorKind::usage,
                   "this change needs one etcd transaction of " + std::to_string(b.compares) +
                       " compares and " + std::to_string(b.writes) +
                       " writes, above the store's limit of " + std::to_string(ops) +
                       " operations each (etcd's --max-txn-ops): change fewer records at once, "
                       "or raise --max-txn-ops on every etcd member and TPUCTL_ETCD_MAX_TXN_OPS",
                   reason::k_invalid);
    }
    const size_t bytes = store.m_options.max_request_bytes;
    if (b.bytes + k_request_slack > bytes) {
      return Error(ErrorKind::usage,
                   "this change is " + std::to_string(b.bytes) +
                       " bytes as one etcd transaction, above the store's limit of " +
                       std::to_string(bytes) + " (etcd's --max-request-bytes, less " +
                       std::to_string(k_request_slack) +
                       " of framing): change fewer or smaller records at once, or raise "
                       "--max-request-bytes on every etcd member and "
                       "TPUCTL_ETCD_MAX_REQUEST_BYTES",
                   reason::k_invalid);
    }
    return ok();
  }

  // ---- unknown outcomes ----
  // Settles commit `nonce` whose txn got no definite answer (`first`): writes "aborted" to its
  // marker if the marker is still absent, so the txn can never apply later, or reads the
  // marker. Asks again (any member) for up to twice the request timeout. Errors: k_unavailable
  // saying the outcome is unknown.
  static Expected<std::pair<Outcome, int64_t>> resolve(EtcdStore& store, const std::string& nonce,
                                                       const Error& first) {
    std::string marker = store.m_keys.marker(nonce);
    Json fence = etcd::txn_request({etcd::compare_mod_equals(marker, 0)},
                                   {etcd::op_put(etcd::put_request(marker, "aborted"))},
                                   {etcd::op_range(etcd::range_request(marker))});
    const auto deadline =
        std::chrono::steady_clock::now() + 2 * store.m_options.client.request_timeout;
    Error last = first;
    for (;;) {
      auto r = store.m_client->post("/v3/kv/txn", fence, etcd::Retry::unsent_only);
      if (r) {
        if (etcd::bool_field(*r, "succeeded")) {
          return std::make_pair(Outcome::not_applied, int64_t{0});
        }
        auto found = etcd::parse_kvs(etcd::txn_response_at(*r, 0, "response_range"));
        if (found && !found->empty() && (*found)[0].value == "applied") {
          return std::make_pair(Outcome::applied, (*found)[0].mod_revision);
        }
        return std::make_pair(Outcome::not_applied, int64_t{0}); // an earlier fence of ours
      }
      last = r.error();
      if ((!has_reason(last, etcd::k_outcome_unknown) &&
           !has_reason(last, reason::k_unavailable)) ||
          std::chrono::steady_clock::now() >= deadline) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return Error(ErrorKind::failure,
                 "the etcd state store did not confirm whether this change was applied (" +
                     first.message + ") and could not be asked again (" + last.message +
                     "): its outcome is unknown; look at the state (tpuctl qr list, tpuctl pool "
                     "describe) once the store is reachable, then retry if it is missing",
                 reason::k_unavailable);
  }
};

Expected<CommitResult> EtcdStore::commit(const std::vector<Op>& ops) {
  for (const auto& op : ops) {
    TPUCTL_TRY(validate_op(op));
  }
  TPUCTL_TRY(check_writable());
  if (ops.empty()) {
    TPUCTL_TRY_ASSIGN(int64_t rev, revision());
    return CommitResult{rev};
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const int attempts = std::max(1, m_options.max_commit_attempts);
  std::chrono::milliseconds backoff{5};
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    Internals in(*this, now_ms());
    TPUCTL_TRY(in.read(ops));
    m_last_view = in.read_revision;
    for (const auto& op : ops) {
      TPUCTL_TRY(std::visit([&](const auto& o) { return in.apply(o); }, op));
    }
    if (!in.writes_anything()) {
      return CommitResult{in.read_revision}; // checks only: they held at that revision
    }
    TPUCTL_TRY_ASSIGN(int64_t marker, marker_lease());
    TPUCTL_TRY_ASSIGN(auto built, in.build(marker));
    TPUCTL_TRY(in.check_limits(built));
    auto reply = m_client->post("/v3/kv/txn", built.txn, etcd::Retry::unsent_only);
    if (reply) {
      if (etcd::bool_field(*reply, "succeeded")) {
        const int64_t rev = etcd::header_revision(*reply);
        if (compaction_due(rev, event_retention())) {
          // The logs this commit appended to keep their retention; best effort, after it.
          for (const auto& [pool, list] : in.events) {
            if (auto removed = compact_events(pool, event_retention()); !removed) {
              spdlog::warn("events of pool '{}' were not compacted: {}", pool,
                           removed.error().message);
            }
          }
        }
        return CommitResult{rev};
      }
      // A compare failed: the view changed since it was read. Read again.
    } else if (has_reason(reply.error(), etcd::k_lease_not_found)) {
      m_marker_lease = 0; // the marker lease expired (a long pause): grant a new one, go again
    } else if (has_reason(reply.error(), etcd::k_outcome_unknown)) {
      TPUCTL_TRY_ASSIGN(auto resolved, Internals::resolve(*this, in.nonce, reply.error()));
      if (resolved.first == Outcome::applied) {
        return CommitResult{resolved.second};
      }
    } else {
      return std::move(reply).error();
    }
    std::uniform_int_distribution<int64_t> dist(0, backoff.count());
    std::this_thread::sleep_for(std::chrono::milliseconds(dist(rng)));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  return Error(ErrorKind::failure,
               "the etcd state store kept changing while this change was being written (" +
                   std::to_string(attempts) +
                   " attempts): other tpuctl processes are busy with the same pool; retry",
               reason::k_conflict);
}

} // namespace tpuctl::state
