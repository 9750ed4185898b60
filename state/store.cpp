#include "state/store.hpp"

#include <algorithm>
#include <cstdio>
#include <pwd.h>
#include <random>
#include <set>
#include <thread>
#include <unistd.h>

#include "util/strings.hpp"

namespace tpuctl::state {

namespace {

constexpr size_t k_max_name_bytes = 253;

struct KindName {
  Kind kind;
  std::string_view name;
  std::string_view display;
};

constexpr KindName k_kind_names[] = {
    {Kind::pool, "pool", "pool"},
    {Kind::host, "host", "host"},
    {Kind::queued_resource, "queued_resource", "queued resource"},
    {Kind::cluster, "cluster", "cluster"},
    {Kind::workload, "workload", "workload"},
};

Error invalid(std::string message) {
  return Error(ErrorKind::usage, std::move(message), std::string(reason::k_invalid));
}

// Checks one name or id: non-empty, bounded, no '/', no control characters.
Status check_name(std::string_view what, const std::string& value) {
  if (value.empty()) {
    return invalid(std::string(what) + " is empty: every state key needs a non-empty name");
  }
  if (value.size() > k_max_name_bytes) {
    return invalid(std::string(what) + " '" + value.substr(0, 40) + "...' is " +
                   std::to_string(value.size()) + " bytes long: the limit is " +
                   std::to_string(k_max_name_bytes));
  }
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if (c == '/' || u < 0x20 || u == 0x7f) {
      return invalid(std::string(what) + " '" + value +
                     "' contains '/' or a control character: state keys cannot hold them");
    }
  }
  return ok();
}

Status check_key(const Key& key) {
  TPUCTL_TRY(check_name("pool name", key.pool));
  if (key.kind == Kind::pool) {
    if (!key.id.empty()) {
      return invalid("pool key '" + key.pool + "' has id '" + key.id +
                     "': a pool is addressed by its name alone");
    }
    return ok();
  }
  return check_name(std::string(display_name(key.kind)) + " id", key.id);
}

Status check_doc(const Key& key, const Json& doc) {
  if (!doc.is_object()) {
    return invalid("the document of " + describe(key) + " is a JSON " + doc.type_name() +
                   ": records must be JSON objects");
  }
  return ok();
}

Status check_version(const Key& key, int64_t v, bool absent_allowed) {
  if (v < k_any_version || (!absent_allowed && v == k_absent)) {
    return invalid("expected version " + std::to_string(v) + " for " + describe(key) +
                   " is not valid: use a version read from the store or k_any_version");
  }
  return ok();
}

Status check_hosts(const std::string& pool, const std::vector<std::string>& hosts,
                   const std::string& owner) {
  TPUCTL_TRY(check_name("pool name", pool));
  TPUCTL_TRY(check_name("claim owner", owner));
  if (hosts.empty()) {
    return invalid("no hosts given to claim or release in pool '" + pool + "'");
  }
  std::set<std::string> seen;
  for (const auto& h : hosts) {
    TPUCTL_TRY(check_name("host name", h));
    if (!seen.insert(h).second) {
      return invalid("host '" + h + "' is named twice in one claim or release in pool '" + pool +
                     "'");
    }
  }
  return ok();
}

} // namespace

bool has_reason(const Error& error, std::string_view why) {
  return error.reason == why;
}

bool is_permanent_refusal(const Error& error) {
  return has_reason(error, reason::k_invalid);
}

std::string to_text(const Json& doc) {
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string_view to_string(Kind kind) {
  for (const auto& k : k_kind_names) {
    if (k.kind == kind) {
      return k.name;
    }
  }
  return "unknown";
}

std::string_view display_name(Kind kind) {
  for (const auto& k : k_kind_names) {
    if (k.kind == kind) {
      return k.display;
    }
  }
  return "unknown";
}

std::optional<Kind> parse_kind(std::string_view name) {
  for (const auto& k : k_kind_names) {
    if (k.name == name) {
      return k.kind;
    }
  }
  return std::nullopt;
}

const std::vector<Kind>& all_kinds() {
  static const std::vector<Kind> k_all = [] {
    std::vector<Kind> v;
    for (const auto& k : k_kind_names) {
      v.push_back(k.kind);
    }
    return v;
  }();
  return k_all;
}

Key pool_key(std::string pool) {
  return Key{Kind::pool, std::move(pool), ""};
}
Key host_key(std::string pool, std::string host) {
  return Key{Kind::host, std::move(pool), std::move(host)};
}
Key queued_resource_key(std::string pool, std::string id) {
  return Key{Kind::queued_resource, std::move(pool), std::move(id)};
}
Key record_key(Kind kind, std::string pool, std::string id) {
  return Key{kind, std::move(pool), std::move(id)};
}

std::string describe(const Key& key) {
  if (key.kind == Kind::pool) {
    return "pool '" + key.pool + "'";
  }
  return std::string(display_name(key.kind)) + " '" + key.id + "' in pool '" + key.pool + "'";
}

std::string local_actor() {
  std::string user;
  if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_name != nullptr) {
    user = pw->pw_name;
  } else {
    user = "uid-" + std::to_string(::geteuid());
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof host, "localhost");
  }
  return user + "@" + host;
}

std::string_view to_string(Initiator initiator) {
  return initiator == Initiator::service ? "SERVICE" : "USER";
}

std::optional<Initiator> parse_initiator(std::string_view text) {
  if (text == "USER") {
    return Initiator::user;
  }
  if (text == "SERVICE") {
    return Initiator::service;
  }
  return std::nullopt;
}

Clock system_clock() {
  return [] { return std::chrono::system_clock::now(); };
}

int64_t to_unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

Status validate_op(const Op& op) {
  struct Visitor {
    Status operator()(const CreateOp& o) const {
      TPUCTL_TRY(check_key(o.key));
      return check_doc(o.key, o.doc);
    }
    Status operator()(const UpdateOp& o) const {
      TPUCTL_TRY(check_key(o.key));
      TPUCTL_TRY(check_version(o.key, o.expected_version, false));
      return check_doc(o.key, o.doc);
    }
    Status operator()(const RemoveOp& o) const {
      TPUCTL_TRY(check_key(o.key));
      return check_version(o.key, o.expected_version, false);
    }
    Status operator()(const CheckOp& o) const {
      TPUCTL_TRY(check_key(o.key));
      return check_version(o.key, o.expected_version, true);
    }
    Status operator()(const ClaimOp& o) const {
      TPUCTL_TRY(check_hosts(o.pool, o.hosts, o.owner));
      if (o.ttl.count() < 0) {
        return invalid("claim ttl " + std::to_string(o.ttl.count()) + "s is negative");
      }
      return ok();
    }
    Status operator()(const ReleaseOp& o) const { return check_hosts(o.pool, o.hosts, o.owner); }
    Status operator()(const EventOp& o) const {
      const Event& e = o.event;
      TPUCTL_TRY(check_name("event pool", e.pool));
      TPUCTL_TRY(check_name("event subject", e.subject));
      if (e.type.empty()) {
        return invalid("event on '" + e.subject + "' in pool '" + e.pool + "' has no type");
      }
      if (!e.detail.is_object()) {
        return invalid("event detail on '" + e.subject + "' must be a JSON object");
      }
      return ok();
    }
  };
  return std::visit(Visitor{}, op);
}

Expected<CommitResult> StateStore::transact(const TransactFn& fn, const TransactOptions& options) {
  return optimistic_transact(*this, fn, options);
}

Expected<int64_t> StateStore::begin_reads() {
  return Error(ErrorKind::failure,
               "the state store " + info().location + " cannot hold its reads at one revision",
               std::string(reason::k_unsupported));
}

namespace {

Error no_elections(const StoreInfo& info) {
  return Error(ErrorKind::usage,
               "the state store " + info.location +
                   " holds no elections (one machine's file): a controller leads a pool on an "
                   "etcd store (--state etcd://HOST:PORT)",
               std::string(reason::k_unsupported));
}

} // namespace

Expected<StateStore::Leadership> StateStore::campaign(const std::string&, const Json&,
                                                      std::chrono::seconds) {
  return no_elections(info());
}

Expected<Json> StateStore::leader(const std::string&) {
  return no_elections(info());
}

Status StateStore::resign(const std::string&) {
  return ok();
}

Error missing_store(const std::string& location, const std::string& detail) {
  return Error(ErrorKind::not_found,
               "state store " + location + " does not exist" + detail +
                   ", and this command does not create one: create a pool to start it "
                   "('tpuctl pool create', 'tpuctl pool local-up'), restore a backup ('tpuctl "
                   "state restore FILE'), or name an existing store with --state",
               std::string(reason::k_no_store));
}

Error gave_up_after(Error conflict, int attempts) {
  conflict.message += " (gave up after " + std::to_string(attempts) +
                      " attempts: other tpuctl processes keep changing it)";
  return conflict;
}

Expected<CommitResult> optimistic_transact(StateStore& store, const StateStore::TransactFn& fn,
                                           const TransactOptions& options) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  int attempts = std::max(1, options.max_attempts);
  auto backoff = options.base_backoff;
  for (int attempt = 1;; ++attempt) {
    TPUCTL_TRY_ASSIGN(auto ops, fn(store));
    auto result = store.commit(ops);
    if (result || !has_reason(result.error(), reason::k_conflict)) {
      return result;
    }
    if (attempt >= attempts) {
      return gave_up_after(std::move(result).error(), attempt);
    }
    // Full jitter: sleep a uniform time in [0, backoff], then double backoff up to the cap.
    std::uniform_int_distribution<int64_t> dist(0, std::max<int64_t>(backoff.count(), 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(dist(rng)));
    backoff = std::min(options.max_backoff, backoff * 2);
  }
}

Expected<Record> StateStore::get(const Key& key) {
  TPUCTL_TRY_ASSIGN(auto found, find(key));
  if (!found) {
    return Error(ErrorKind::not_found, describe(key) + " does not exist",
                 std::string(reason::k_not_found));
  }
  return std::move(*found);
}

Expected<CommitResult> StateStore::create(const Key& key, Json doc) {
  return commit({CreateOp{key, std::move(doc)}});
}

Expected<CommitResult> StateStore::update(const Key& key, Json doc, int64_t expected_version) {
  return commit({UpdateOp{key, std::move(doc), expected_version}});
}

Expected<CommitResult> StateStore::remove(const Key& key, int64_t expected_version) {
  return commit({RemoveOp{key, expected_version}});
}

Expected<CommitResult> StateStore::claim_hosts(const std::string& pool,
                                               std::vector<std::string> hosts,
                                               const std::string& owner) {
  return commit({ClaimOp{pool, std::move(hosts), owner, std::chrono::seconds(0)}});
}

Expected<CommitResult> StateStore::release_hosts(const std::string& pool,
                                                 std::vector<std::string> hosts,
                                                 const std::string& owner) {
  return commit({ReleaseOp{pool, std::move(hosts), owner}});
}

Expected<std::vector<Claim>> StateStore::claims_of(const std::string& pool,
                                                   const std::string& owner) {
  TPUCTL_TRY_ASSIGN(auto all, claims(pool));
  std::vector<Claim> mine;
  std::copy_if(all.begin(), all.end(), std::back_inserter(mine),
               [&](const Claim& c) { return c.owner == owner; });
  return mine;
}

Expected<CommitResult> StateStore::release_all(const std::string& pool, const std::string& owner) {
  // A release of hosts that another process released meanwhile fails k_not_owner; re-reading
  // and retrying settles it, so map that to a conflict for the transact loop.
  TransactFn fn = [&](StateStore& s) -> Expected<std::vector<Op>> {
    TPUCTL_TRY_ASSIGN(auto mine, s.claims_of(pool, owner));
    if (mine.empty()) {
      return std::vector<Op>{};
    }
    ReleaseOp release{pool, {}, owner};
    for (const auto& c : mine) {
      release.hosts.push_back(c.host);
    }
    return std::vector<Op>{release};
  };
  for (int attempt = 0;; ++attempt) {
    auto r = transact(fn);
    if (r || !has_reason(r.error(), reason::k_not_owner) || attempt >= 3) {
      return r;
    }
  }
}

Status check_claimable(const ClaimOp& op, const std::vector<std::string>& missing,
                       const std::vector<std::string>& busy) {
  std::string what = "cannot claim hosts in pool '" + op.pool + "' for '" + op.owner + "': ";
  if (!missing.empty()) {
    return Error(ErrorKind::not_found,
                 what + "no such host " + util::join(missing, ", ") +
                     " (add hosts with 'tpuctl pool add-hosts')",
                 std::string(reason::k_not_found));
  }
  if (!busy.empty()) {
    return Error(ErrorKind::capacity, what + util::join(busy, ", "),
                 std::string(reason::k_hosts_busy));
  }
  return ok();
}

Status check_expected_version(const Key& key, std::optional<int64_t> current, int64_t expected) {
  if (expected == k_absent) {
    if (current) {
      return Error(ErrorKind::failure,
                   describe(key) + " exists (version " + std::to_string(*current) +
                       ") but was expected to be absent: another tpuctl created it; retry",
                   std::string(reason::k_conflict));
    }
    return ok();
  }
  if (!current) {
    return Error(ErrorKind::not_found, describe(key) + " does not exist",
                 std::string(reason::k_not_found));
  }
  if (expected != k_any_version && *current != expected) {
    return Error(ErrorKind::failure,
                 describe(key) + " was changed by another tpuctl (version " +
                     std::to_string(*current) + ", expected " + std::to_string(expected) +
                     "); read it again and retry",
                 std::string(reason::k_conflict));
  }
  return ok();
}

} // namespace tpuctl::state
