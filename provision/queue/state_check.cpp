#include "provision/queue/state_check.hpp"

#include <algorithm>
#include <map>

#include "provision/pool/pools.hpp"
#include "provision/queue/queued_resource.hpp"

namespace tpuctl::provision {

namespace {

std::string qr_name(const std::string& id) {
  return "queued resource '" + id + "'";
}

} // namespace

std::vector<Finding> check_pool_snapshot(const state::PoolSnapshot& snap) {
  const std::string& pool = snap.pool.key.pool;
  std::vector<Finding> out;
  auto add = [&](std::string subject, std::string problem) {
    out.push_back(Finding{pool, std::move(subject), std::move(problem)});
  };
  if (!snap.pool.unreadable.empty()) {
    add("pool '" + pool + "'", snap.pool.unreadable);
  }
  std::map<std::string, HostEntry> hosts;
  std::map<std::string, QueuedResource> requests;
  for (const auto& r : snap.records) {
    const std::string subject =
        std::string(state::display_name(r.key.kind)) + " '" + r.key.id + "'";
    if (!r.unreadable.empty()) {
      add(subject, r.unreadable);
      continue;
    }
    if (r.key.kind == state::Kind::host) {
      auto h = host_from_json(r.doc);
      if (!h) {
        add(subject, "cannot be read: " + h.error().message);
        continue;
      }
      h->version = r.version;
      hosts[r.key.id] = std::move(*h);
    } else if (r.key.kind == state::Kind::queued_resource) {
      auto q = qr_from_record(r);
      if (!q) {
        add(subject, "cannot be read: " + q.error().message);
        continue;
      }
      requests[r.key.id] = std::move(*q);
    }
  }
  // Claims: who holds each host, and whether that holder may.
  std::map<std::string, const state::Claim*> claim_of;
  for (const auto& c : snap.claims) {
    const std::string host = "host '" + c.host + "'";
    if (!claim_of.emplace(c.host, &c).second) {
      add(host, "is claimed twice (by '" + claim_of[c.host]->owner + "' and '" + c.owner + "')");
      continue;
    }
    auto q = requests.find(c.owner);
    if (q == requests.end()) {
      add(host, "is claimed by " + qr_name(c.owner) + ", which does not exist");
      continue;
    }
    auto workers = hosts_of(q->second);
    if (!holds_hosts(q->second.state)) {
      add(host, "is claimed by " + qr_name(c.owner) + ", which is " +
                    std::string(to_string(q->second.state)) + " and holds no hosts");
    } else if (std::find(workers.begin(), workers.end(), c.host) == workers.end()) {
      add(host, "is claimed by " + qr_name(c.owner) + ", which has no worker on it");
    }
    auto h = hosts.find(c.host);
    if (h != hosts.end() && !h->second.drain_reason.empty() && c.revision > h->second.version) {
      add(host, "was claimed by " + qr_name(c.owner) + " after it was drained ('" +
                    h->second.drain_reason + "'): a drained host is never placed");
    }
  }
  // Workers: every host of a request that holds hosts is the pool's, its alone, and claimed.
  std::map<std::string, std::string> worker_of; // host -> request
  for (const auto& [id, q] : requests) {
    if (!holds_hosts(q.state)) {
      continue;
    }
    for (const auto& host : hosts_of(q)) {
      const std::string subject = "host '" + host + "'";
      if (auto [it, fresh] = worker_of.emplace(host, id); !fresh) {
        add(subject, "is a worker of both " + qr_name(it->second) + " and " + qr_name(id) +
                         " (claimed twice)");
      }
      if (hosts.count(host) == 0) {
        add(qr_name(id), "has a worker on host '" + host + "', which is not in the pool");
        continue;
      }
      auto c = claim_of.find(host);
      if (q.state == QrState::deleting) {
        continue; // its claims go as it is deleted
      }
      if (c == claim_of.end()) {
        add(qr_name(id), "is " + std::string(to_string(q.state)) + " with a worker on host '" +
                             host + "', which nothing claims");
      } else if (c->second->owner != id) {
        add(qr_name(id), "is " + std::string(to_string(q.state)) + " with a worker on host '" +
                             host + "', which '" + c->second->owner + "' claims");
      }
    }
  }
  return out;
}

Expected<std::vector<Finding>>
check_snapshots(state::StateStore& store, const std::string& pool,
                const std::function<std::vector<Finding>(const state::PoolSnapshot&)>& check) {
  std::vector<std::string> names;
  if (!pool.empty()) {
    names.push_back(pool);
  } else {
    TPUCTL_TRY_ASSIGN(auto pools, store.list(state::Kind::pool, ""));
    for (const auto& p : pools.records) {
      names.push_back(p.key.pool);
    }
  }
  std::vector<Finding> out;
  for (const auto& name : names) {
    TPUCTL_TRY_ASSIGN(auto snap, store.snapshot(name));
    auto found = check(snap);
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

} // namespace tpuctl::provision
