// EtcdStore::commit: read what the ops depend on, apply them to that view with SQLite's rules,
// write the result in one txn guarded by compares on everything read, retry on a lost compare,
// and resolve a txn whose reply was lost through its commit marker (see etcd_store.hpp).
//
// The view is a map of Slots, one per key an op looks at or writes. A slot remembers the
// mod_revision it had when read (0 = absent) and whether a decision depended on it
// ("consulted"); every consulted slot becomes a `mod_revision == read` compare. Host existence
// for a claim comes from one keys-only range of the pool's hosts, guarded by the pool's hostset
// key (rewritten by every host create and remove), so a claim of N hosts costs N + 1 compares
// (the claim keys and the hostset), not 2N.
#include <random>
#include <set>
#include <thread>

#include "state/etcd_store.hpp"
#include "state/etcd_values.hpp"
#include "util/strings.hpp"

namespace tpuctl::state {

using etcd::KeyValue;

namespace {

Error make(ErrorKind kind, std::string message, std::string_view why) {
  return Error(kind, std::move(message), std::string(why));
}

std::string in_quotes(const std::string& s) {
  return "'" + s + "'";
}

std::string random_nonce() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

constexpr int64_t k_written_here = -2; // the version of a key this commit already wrote

enum class Outcome { applied, not_applied };

struct Slot {
  bool known = false;     // read from the store (or known absent from a complete range)
  bool consulted = false; // a decision depended on it: its mod_revision is compared
  bool blind = false;     // written without being read (a heartbeat delete, the hostset)
  bool existed = false;   // when read
  int64_t read_mod = 0;   // mod_revision when read; 0 when absent
  bool exists = false;    // in the view, after the ops so far
  std::string value;
  bool dirty = false;    // written by this commit
  int64_t lease_ttl = 0; // seconds; a put on a lease of this ttl
};

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
  std::map<std::string, std::set<std::string>> hosts_present; // pool -> hosts (keys-only read)
  std::map<std::string, int64_t> claims_read_at;              // pool -> revision of its claims
  std::vector<std::string> wiped_prefixes;                    // delete-ranges of removed pools
  std::vector<std::string> wiped_pools;
  std::vector<std::pair<std::string, std::string>> event_puts; // key, value
  int64_t read_revision = 0;

  // ---- step 1: reads ----
  struct Reads {
    std::set<std::string> keys;
    std::set<std::string> host_pools;
    std::set<std::string> claim_pools;
  };

  Reads reads_of(const std::vector<Op>& ops) const {
    Reads r;
    for (const auto& op : ops) {
      if (auto* c = std::get_if<CreateOp>(&op)) {
        r.keys.insert(keys.record(c->key));
        if (c->key.kind != Kind::pool) {
          r.keys.insert(keys.record(pool_key(c->key.pool)));
        }
      } else if (auto* u = std::get_if<UpdateOp>(&op)) {
        r.keys.insert(keys.record(u->key));
      } else if (auto* k = std::get_if<CheckOp>(&op)) {
        r.keys.insert(keys.record(k->key));
      } else if (auto* d = std::get_if<RemoveOp>(&op)) {
        r.keys.insert(keys.record(d->key));
        if (d->key.kind == Kind::pool) {
          r.claim_pools.insert(d->key.pool);
        } else if (d->key.kind == Kind::host) {
          r.keys.insert(keys.claim(d->key.pool, d->key.id));
        }
      } else if (auto* cl = std::get_if<ClaimOp>(&op)) {
        r.host_pools.insert(cl->pool);
        r.claim_pools.insert(cl->pool);
      } else if (auto* rl = std::get_if<ReleaseOp>(&op)) {
        r.claim_pools.insert(rl->pool);
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

  Status read(const std::vector<Op>& ops) {
    Reads r = reads_of(ops);
    // Units of ranges that must be read at one revision (a pool's hostset and host keys).
    struct Unit {
      std::vector<Json> ranges;
      std::function<Status(const std::vector<Json>&, int64_t)> take;
    };
    std::vector<Unit> units;
    for (const auto& pool : r.host_pools) {
      std::string hs = keys.hostset(pool);
      std::string hp = keys.records_of(Kind::host, pool);
      etcd::RangeOptions ko{etcd::prefix_end(hp), true, 0};
      units.push_back({{etcd::range_request(hs), etcd::range_request(hp, ko)},
                       [this, pool, hs](const std::vector<Json>& res, int64_t) -> Status {
                         TPUCTL_TRY_ASSIGN(auto hset, kvs(res[0]));
                         fill(hs, hset);
                         TPUCTL_TRY_ASSIGN(auto hosts, kvs(res[1]));
                         auto& present = hosts_present[pool];
                         for (const auto& kv : hosts) {
                           if (auto p = keys.parse(kv.key)) {
                             present.insert(p->rest);
                           }
                         }
                         return ok();
                       }});
    }
    for (const auto& pool : r.claim_pools) {
      std::string cp = keys.claims_of(pool);
      units.push_back({{etcd::range_request(cp, {etcd::prefix_end(cp)})},
                       [this, pool](const std::vector<Json>& res, int64_t rev) -> Status {
                         TPUCTL_TRY_ASSIGN(auto claims, kvs(res[0]));
                         for (const auto& kv : claims) {
                           fill(kv.key, {kv});
                         }
                         claims_read_at[pool] = rev;
                         return ok();
                       }});
    }
    for (const auto& key : r.keys) {
      units.push_back({{etcd::range_request(key)},
                       [this, key](const std::vector<Json>& res, int64_t) -> Status {
                         TPUCTL_TRY_ASSIGN(auto found, kvs(res[0]));
                         fill(key, found);
                         return ok();
                       }});
    }
    // As few read txns as the op limit allows, never splitting a unit.
    size_t i = 0;
    while (i < units.size()) {
      std::vector<Json> ranges;
      size_t j = i;
      while (j < units.size() && (ranges.empty() || ranges.size() + units[j].ranges.size() <=
                                                        store.m_options.max_txn_ops)) {
        ranges.insert(ranges.end(), units[j].ranges.begin(), units[j].ranges.end());
        ++j;
      }
      TPUCTL_TRY_ASSIGN(auto got, store.read_ranges(ranges));
      read_revision = std::max(read_revision, got.second);
      size_t at = 0;
      for (size_t u = i; u < j; ++u) {
        std::vector<Json> mine(got.first.begin() + static_cast<long>(at),
                               got.first.begin() + static_cast<long>(at + units[u].ranges.size()));
        at += units[u].ranges.size();
        TPUCTL_TRY(units[u].take(mine, got.second));
      }
      i = j;
    }
    return ok();
  }

  static Expected<std::vector<KeyValue>> kvs(const Json& response) {
    auto out = etcd::parse_kvs(response);
    if (!out) {
      return make(ErrorKind::failure, "the etcd state store answered with keys that are not base64",
                  reason::k_unavailable);
    }
    return std::move(*out);
  }

  // ---- step 2: the ops, applied to the view ----
  Slot& slot(const std::string& key) { return slots[key]; }

  Slot& claim_slot(const std::string& pool, const std::string& host) {
    Slot& s = slots[keys.claim(pool, host)];
    if (!s.known && claims_read_at.count(pool)) {
      s.known = true; // the pool's claims were read whole: this one is absent
    }
    return s;
  }

  bool host_exists(const std::string& pool, const std::string& host) {
    auto it = slots.find(keys.record(host_key(pool, host)));
    if (it != slots.end() && (it->second.known || it->second.dirty)) {
      return it->second.exists;
    }
    auto p = hosts_present.find(pool);
    return p != hosts_present.end() && p->second.count(host) > 0;
  }

  // The live claim in `s`, if any. `consult`: guard the decision with a compare on this key
  // (a pool removal guards all its claims with one range compare instead).
  Expected<std::optional<etcd::ClaimValue>> live_claim(const std::string& key, Slot& s,
                                                       bool consult = true) {
    s.consulted = s.consulted || (consult && !s.dirty);
    if (!s.exists) {
      return std::optional<etcd::ClaimValue>{};
    }
    TPUCTL_TRY_ASSIGN(auto c, etcd::decode_claim(KeyValue{key, s.value, 0, 0, 0, 0}));
    if (!c.live(now)) {
      return std::optional<etcd::ClaimValue>{};
    }
    return std::optional<etcd::ClaimValue>(c);
  }

  void write(Slot& s, std::string value, int64_t lease_ttl = 0) {
    s.exists = true;
    s.dirty = true;
    s.value = std::move(value);
    s.lease_ttl = lease_ttl;
  }
  void erase(Slot& s) {
    s.exists = false;
    s.dirty = true;
    s.value.clear();
  }
  void touch_hostset(const std::string& pool) {
    Slot& s = slots[keys.hostset(pool)];
    if (!s.known) {
      s.blind = true;
    }
    write(s, nonce);
  }

  Status apply(const CreateOp& op) {
    if (op.key.kind != Kind::pool) {
      Slot& p = slot(keys.record(pool_key(op.key.pool)));
      p.consulted = p.consulted || !p.dirty;
      if (!p.exists) {
        return make(ErrorKind::not_found,
                    "cannot create " + describe(op.key) + ": pool '" + op.key.pool +
                        "' does not exist",
                    reason::k_not_found);
      }
    }
    Slot& s = slot(keys.record(op.key));
    s.consulted = s.consulted || !s.dirty;
    if (s.exists) {
      return make(ErrorKind::failure, describe(op.key) + " already exists",
                  reason::k_already_exists);
    }
    write(s, to_text(op.doc));
    if (op.key.kind == Kind::host) {
      touch_hostset(op.key.pool);
    }
    return ok();
  }

  Status apply(const UpdateOp& op) {
    Slot& s = slot(keys.record(op.key));
    s.consulted = s.consulted || !s.dirty;
    TPUCTL_TRY(check_expected(op.key, s, op.expected_version));
    write(s, to_text(op.doc));
    return ok();
  }

  Status apply(const CheckOp& op) {
    Slot& s = slot(keys.record(op.key));
    s.consulted = s.consulted || !s.dirty;
    return check_expected(op.key, s, op.expected_version);
  }

  Status busy_claims_block_removal(const Key& key) {
    std::vector<std::string> busy;
    std::string prefix =
        key.kind == Kind::pool ? keys.claims_of(key.pool) : keys.claim(key.pool, key.id);
    if (key.kind == Kind::host) {
      claim_slot(key.pool, key.id);
    }
    for (auto it = slots.lower_bound(prefix); it != slots.end(); ++it) {
      if (!util::starts_with(it->first, prefix)) {
        break;
      }
      if (key.kind == Kind::host && it->first != prefix) {
        continue;
      }
      TPUCTL_TRY_ASSIGN(auto c, live_claim(it->first, it->second, key.kind == Kind::host));
      if (c) {
        busy.push_back(in_quotes(it->first.substr(it->first.rfind('/') + 1)) + " is claimed by " +
                       in_quotes(c->owner));
      }
    }
    if (!busy.empty()) {
      return make(ErrorKind::failure,
                  "cannot remove " + describe(key) + ": " + util::join(busy, ", ") +
                      "; release or drain the claims first",
                  reason::k_hosts_busy);
    }
    return ok();
  }

  Status apply(const RemoveOp& op) {
    Slot& s = slot(keys.record(op.key));
    s.consulted = s.consulted || !s.dirty;
    TPUCTL_TRY(check_expected(op.key, s, op.expected_version));
    if (op.key.kind == Kind::pool || op.key.kind == Kind::host) {
      TPUCTL_TRY(busy_claims_block_removal(op.key));
    }
    erase(slot(keys.record(op.key)));
    if (op.key.kind == Kind::host) {
      Slot& c = claim_slot(op.key.pool, op.key.id);
      if (c.exists) {
        erase(c); // an expired provisional claim
      }
      Slot& hb = slot(keys.heartbeat(op.key.pool, op.key.id));
      hb.blind = true;
      erase(hb);
      touch_hostset(op.key.pool);
    } else if (op.key.kind == Kind::pool) {
      wipe_pool(op.key.pool);
    }
    return ok();
  }

  void wipe_pool(const std::string& pool) {
    std::vector<std::string> prefixes;
    for (Kind k : all_kinds()) {
      if (k != Kind::pool) {
        prefixes.push_back(keys.records_of(k, pool));
      }
    }
    for (const auto& p : {keys.claims_of(pool), keys.heartbeats_of(pool), keys.events_of(pool)}) {
      prefixes.push_back(p);
    }
    for (const auto& p : prefixes) {
      for (auto it = slots.lower_bound(p); it != slots.end() && util::starts_with(it->first, p);
           ++it) {
        it->second.exists = false;
        it->second.dirty = false; // the range delete covers it
      }
      wiped_prefixes.push_back(p);
    }
    hosts_present.erase(pool);
    Slot& hs = slot(keys.hostset(pool));
    if (!hs.known) {
      hs.blind = true;
    }
    erase(hs);
    wiped_pools.push_back(pool);
    // Events of the pool queued earlier in this commit go with it.
    std::string ep = keys.events_of(pool);
    std::erase_if(event_puts, [&](const auto& e) { return util::starts_with(e.first, ep); });
  }

  Status apply(const ClaimOp& op) {
    std::vector<std::string> missing, busy;
    Slot& hs = slot(keys.hostset(op.pool));
    hs.consulted = hs.consulted || !hs.dirty;
    for (const auto& host : op.hosts) {
      if (!host_exists(op.pool, host)) {
        missing.push_back(in_quotes(host));
        continue;
      }
      std::string key = keys.claim(op.pool, host);
      TPUCTL_TRY_ASSIGN(auto c, live_claim(key, claim_slot(op.pool, host)));
      if (c) {
        busy.push_back(in_quotes(host) + " is claimed by " + in_quotes(c->owner));
      }
    }
    TPUCTL_TRY(check_claimable(op, missing, busy));
    etcd::ClaimValue v{op.owner, op.claimed_at_ms != 0 ? op.claimed_at_ms : now, 0};
    if (op.ttl.count() > 0) {
      v.expires_at_ms = now + static_cast<int64_t>(op.ttl.count()) * 1000;
    }
    for (const auto& host : op.hosts) {
      write(claim_slot(op.pool, host), etcd::encode_claim(v), op.ttl.count());
    }
    return ok();
  }

  Status apply(const ReleaseOp& op) {
    std::vector<std::string> problems;
    for (const auto& host : op.hosts) {
      std::string key = keys.claim(op.pool, host);
      TPUCTL_TRY_ASSIGN(auto c, live_claim(key, claim_slot(op.pool, host)));
      if (!c) {
        problems.push_back(in_quotes(host) + " is not claimed");
      } else if (c->owner != op.owner) {
        problems.push_back(in_quotes(host) + " is claimed by " + in_quotes(c->owner));
      }
    }
    if (!problems.empty()) {
      return make(ErrorKind::failure,
                  "cannot release hosts in pool '" + op.pool + "' for '" + op.owner +
                      "': " + util::join(problems, ", "),
                  reason::k_not_owner);
    }
    for (const auto& host : op.hosts) {
      erase(claim_slot(op.pool, host));
    }
    return ok();
  }

  Status apply(const EventOp& op) {
    const Event& e = op.event;
    event_puts.emplace_back(keys.event(e.pool, nonce, event_puts.size()),
                            etcd::encode_event(e, e.time_ms != 0 ? e.time_ms : now));
    return ok();
  }

  bool writes_anything() const {
    if (!event_puts.empty() || !wiped_prefixes.empty()) {
      return true;
    }
    for (const auto& [key, s] : slots) {
      if (s.dirty) {
        return true;
      }
    }
    return false;
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

  // Builds the txn; `lease_for(ttl)` gives the lease of provisional claims.
  Expected<Json> build(int64_t marker_lease,
                       const std::function<Expected<int64_t>(int64_t)>& lease_for) {
    std::string marker = keys.marker(nonce);
    std::vector<Json> compares{etcd::compare_mod_equals(marker, 0)};
    std::vector<Json> success;
    for (const auto& [key, s] : slots) {
      if (s.consulted) { // an unread slot was taken as absent: mod_revision 0 guards that
        compares.push_back(etcd::compare_mod_equals(key, s.read_mod));
      }
    }
    for (const auto& pool : wiped_pools) {
      std::string cp = keys.claims_of(pool);
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
          return make(ErrorKind::usage,
                      "a commit that removes a pool cannot also write into it ('" + key +
                          "'): commit those ops separately",
                      reason::k_invalid);
        }
        int64_t lease = 0;
        if (s.lease_ttl > 0) {
          TPUCTL_TRY_ASSIGN(lease, lease_for(s.lease_ttl));
        }
        success.push_back(etcd::op_put(etcd::put_request(key, s.value, lease)));
      } else if (!wiped && (s.existed || s.blind || !s.known)) {
        success.push_back(etcd::op_delete(etcd::delete_request(key)));
      }
    }
    for (const auto& p : wiped_prefixes) {
      success.push_back(etcd::op_delete(etcd::delete_request(p, etcd::prefix_end(p))));
    }
    for (const auto& [key, value] : event_puts) {
      if (wiped_prefix_of(key)) {
        return make(ErrorKind::usage,
                    "a commit that removes a pool cannot also record an event in it: commit the "
                    "event separately",
                    reason::k_invalid);
      }
      success.push_back(etcd::op_put(etcd::put_request(key, value)));
    }
    success.push_back(etcd::op_put(etcd::put_request(marker, "applied", marker_lease)));
    const size_t limit = store.m_options.max_txn_ops;
    if (compares.size() > limit || success.size() > limit) {
      return make(ErrorKind::usage,
                  "this change needs one etcd transaction of " + std::to_string(compares.size()) +
                      " compares and " + std::to_string(success.size()) +
                      " writes, above the store's limit of " + std::to_string(limit) +
                      " operations each (etcd's --max-txn-ops): claim or change fewer hosts at "
                      "once (a slice can have at most " +
                      std::to_string(limit - 3) +
                      " hosts), or raise --max-txn-ops on every etcd member and "
                      "TPUCTL_ETCD_MAX_TXN_OPS",
                  reason::k_invalid);
    }
    return etcd::txn_request(std::move(compares), std::move(success));
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
    return make(ErrorKind::failure,
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
  std::map<int64_t, int64_t> claim_leases; // ttl -> lease, kept across attempts
  auto revoke_leases = [&] {
    for (const auto& [ttl, id] : claim_leases) {
      (void)m_client->post("/v3/lease/revoke", Json{{"ID", std::to_string(id)}},
                           etcd::Retry::anywhere);
    }
  };
  auto lease_for = [&](int64_t ttl) -> Expected<int64_t> {
    auto it = claim_leases.find(ttl);
    if (it != claim_leases.end()) {
      return it->second;
    }
    TPUCTL_TRY_ASSIGN(int64_t id, grant_lease(ttl));
    claim_leases[ttl] = id;
    return id;
  };
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const int attempts = std::max(1, m_options.max_commit_attempts);
  std::chrono::milliseconds backoff{5};
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    Internals in(*this, now_ms());
    TPUCTL_TRY(in.read(ops));
    m_last_view = in.read_revision;
    for (const auto& op : ops) {
      Status st = std::visit([&](const auto& o) { return in.apply(o); }, op);
      if (!st) {
        revoke_leases();
        return std::move(st).error();
      }
    }
    if (!in.writes_anything()) {
      return CommitResult{in.read_revision}; // checks only: they held at that revision
    }
    TPUCTL_TRY_ASSIGN(int64_t marker, marker_lease());
    auto txn = in.build(marker, lease_for);
    if (!txn) {
      revoke_leases();
      return std::move(txn).error();
    }
    std::string body = txn->dump();
    if (body.size() > m_options.max_request_bytes) {
      revoke_leases();
      return make(ErrorKind::usage,
                  "this change is " + std::to_string(body.size()) +
                      " bytes as one etcd transaction, above the store's limit of " +
                      std::to_string(m_options.max_request_bytes) +
                      " (etcd's --max-request-bytes): change fewer or smaller records at once",
                  reason::k_invalid);
    }
    auto reply = m_client->post("/v3/kv/txn", *txn, etcd::Retry::unsent_only);
    Outcome outcome = Outcome::not_applied;
    int64_t revision = 0;
    if (reply) {
      if (etcd::bool_field(*reply, "succeeded")) {
        return CommitResult{etcd::header_revision(*reply)};
      }
      // A compare failed: the view changed since it was read. Read again.
    } else if (has_reason(reply.error(), etcd::k_lease_not_found)) {
      m_marker_lease = 0; // a lease expired (a long pause): grant new ones and go again
      claim_leases.clear();
    } else if (has_reason(reply.error(), etcd::k_outcome_unknown)) {
      auto resolved = Internals::resolve(*this, in.nonce, reply.error());
      if (!resolved) {
        return std::move(resolved).error(); // leases stay: the claims may have been made
      }
      std::tie(outcome, revision) = *resolved;
      if (outcome == Outcome::applied) {
        return CommitResult{revision};
      }
    } else {
      revoke_leases();
      return std::move(reply).error();
    }
    std::uniform_int_distribution<int64_t> dist(0, backoff.count());
    std::this_thread::sleep_for(std::chrono::milliseconds(dist(rng)));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  revoke_leases();
  return make(ErrorKind::failure,
              "the etcd state store kept changing while this change was being written (" +
                  std::to_string(attempts) +
                  " attempts): other tpuctl processes are busy with the same pool; retry",
              reason::k_conflict);
}

} // namespace tpuctl::state
