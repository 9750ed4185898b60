#include "state/migrate.hpp"

#include <map>

#include "util/strings.hpp"

namespace tpuctl::state {

namespace {

// Commits ops in batches bounded by count and JSON size.
class Batcher {
public:
  Batcher(StateStore& to, const MigrateOptions& options) : m_to(to), m_options(options) {}

  // Adds ops that must land in one commit (when they fit in one). `counted` says whether they
  // count against max_ops_per_commit: host records and claims do not (a store keeps them in
  // pages: any number is a few operations), their bytes do.
  Status add(std::vector<Op> group, size_t bytes, bool counted = true) {
    const size_t weight = counted ? group.size() : 0;
    if (!m_ops.empty() && (m_counted + weight > m_options.max_ops_per_commit ||
                           m_bytes + bytes > m_options.max_bytes_per_commit)) {
      TPUCTL_TRY(flush());
    }
    for (auto& op : group) {
      m_ops.push_back(std::move(op));
      m_counted += counted ? 1 : 0;
      if (m_counted >= m_options.max_ops_per_commit) {
        TPUCTL_TRY(flush());
      }
    }
    m_bytes += bytes;
    return ok();
  }

  Status flush() {
    if (m_ops.empty()) {
      return ok();
    }
    TPUCTL_TRY_ASSIGN(auto r, m_to.commit(m_ops));
    m_revision = r.revision;
    m_ops.clear();
    m_bytes = 0;
    m_counted = 0;
    return ok();
  }

  int64_t revision() const { return m_revision; }

private:
  StateStore& m_to;
  const MigrateOptions& m_options;
  std::vector<Op> m_ops;
  size_t m_bytes = 0;
  size_t m_counted = 0;
  int64_t m_revision = 0;
};

Status check_empty(StateStore& to) {
  TPUCTL_TRY_ASSIGN(auto pools, to.list(Kind::pool, ""));
  TPUCTL_TRY_ASSIGN(auto events, to.events(EventQuery{"", std::nullopt, "", 0, 1}));
  if (pools.records.empty() && events.empty()) {
    return ok();
  }
  std::vector<std::string> names;
  for (const auto& p : pools.records) {
    names.push_back("'" + p.key.pool + "'");
  }
  std::string what = names.empty() ? "events" : "pools " + util::join(names, ", ");
  return Error(ErrorKind::failure,
               "the target state store " + to.info().location + " is not empty (it holds " + what +
                   "): migrate into an empty store, e.g. another etcd prefix "
                   "(etcd://HOST:PORT/NEW-PREFIX) or a new sqlite file",
               std::string(reason::k_already_exists));
}

void count(MigrationReport& report, Kind kind) {
  switch (kind) {
  case Kind::host:
    ++report.hosts;
    break;
  case Kind::queued_resource:
    ++report.queued_resources;
    break;
  case Kind::cluster:
    ++report.clusters;
    break;
  case Kind::workload:
    ++report.workloads;
    break;
  case Kind::pool:
    break;
  }
}

} // namespace

Expected<MigrationReport> migrate_store(StateStore& from, StateStore& to,
                                        const MigrateOptions& options) {
  TPUCTL_TRY(check_empty(to));
  MigrationReport report;
  Batcher batch(to, options);
  TPUCTL_TRY_ASSIGN(auto pools, from.list(Kind::pool, ""));
  const int64_t now = to_unix_ms(options.clock());
  for (const auto& pool : pools.records) {
    const std::string& name = pool.key.pool;
    TPUCTL_TRY_ASSIGN(PoolSnapshot snap, from.snapshot(name));
    TPUCTL_TRY(batch.add({CreateOp{pool.key, pool.doc}}, to_text(pool.doc).size()));
    TPUCTL_TRY(batch.flush()); // the pool before anything in it
    ++report.pools;
    // Hosts first: claims need them.
    for (bool hosts : {true, false}) {
      for (const auto& r : snap.records) {
        if ((r.key.kind == Kind::host) != hosts) {
          continue;
        }
        TPUCTL_TRY(batch.add({CreateOp{r.key, r.doc}}, to_text(r.doc).size(), !hosts));
        count(report, r.key.kind);
      }
      TPUCTL_TRY(batch.flush());
    }
    // One ClaimOp per owner and expiry (claims made together stay together).
    std::map<std::pair<std::string, int64_t>, std::vector<const Claim*>> by_owner;
    for (const auto& c : snap.claims) {
      by_owner[{c.owner, c.expires_at_ms}].push_back(&c);
    }
    for (const auto& [owner_expiry, claims] : by_owner) {
      const auto& [owner, expires] = owner_expiry;
      std::chrono::seconds ttl{0};
      if (expires != 0) {
        if (expires <= now) {
          continue; // lapsed meanwhile
        }
        ttl = std::chrono::seconds((expires - now + 999) / 1000);
      }
      ClaimOp op{name, {}, owner, ttl, claims.front()->claimed_at_ms};
      for (const Claim* c : claims) {
        op.hosts.push_back(c->host);
      }
      report.claims += op.hosts.size();
      TPUCTL_TRY(batch.add({std::move(op)}, 0));
      TPUCTL_TRY(batch.flush()); // a claim of any number of hosts is one commit of its own
    }
  }
  // Events last, oldest first, one target commit per source commit (when it fits), so events
  // that happened together stay together and apart ones stay apart.
  TPUCTL_TRY_ASSIGN(auto events, from.events({}));
  size_t i = 0;
  while (i < events.size()) {
    std::vector<Op> group;
    size_t bytes = 0;
    size_t j = i;
    for (; j < events.size() && events[j].revision == events[i].revision; ++j) {
      Event e = events[j];
      e.revision = 0;
      bytes += to_text(e.detail).size() + e.type.size() + e.subject.size() + 64;
      group.push_back(EventOp{std::move(e)});
    }
    report.events += group.size();
    TPUCTL_TRY(batch.add(std::move(group), bytes));
    TPUCTL_TRY(batch.flush());
    i = j;
  }
  TPUCTL_TRY(batch.flush());
  TPUCTL_TRY_ASSIGN(auto after, to.list(Kind::pool, ""));
  report.target_revision = after.revision;
  return report;
}

} // namespace tpuctl::state
