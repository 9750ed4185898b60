// A simulated pool for the scheduler's unit tests (test_scheduler.cpp, test_quota.cpp): free
// hosts at every position, the requests the scheduler sees, and one pass applied the way
// reconcile commits it, with the clock under the test's control.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "provision/queue/scheduler.hpp"

namespace tpuctl::test {

using namespace tpuctl::provision;

constexpr int64_t k_t0 = 1'800'000'000'000; // a fixed "now" in unix ms

// A pool with a free host at every position, and the requests the scheduler sees.
struct Sim {
  PoolView view;
  std::vector<QueuedResource> qrs;
  int64_t revision = 1;

  Sim(const std::string& generation, const std::string& shape) {
    auto layout = make_pool_layout(generation, 4, shape);
    REQUIRE(layout);
    view.info.name = "p";
    view.info.layout = *layout;
    view.grid = HostGrid(*layout);
    for (int i = 0; i < layout->capacity(); ++i) {
      HostEntry h;
      h.name = "h" + std::to_string(i);
      h.address = "10.0.0." + std::to_string(i + 1);
      h.coords = position_of(*layout, i);
      GridCell& c = view.grid.at(h.coords);
      c.state = CellState::free;
      c.host = h.name;
      view.hosts.push_back(h);
    }
    view.grid.refresh();
  }

  QueuedResource& add(const std::string& id, const std::string& type, Tier tier = Tier::standard,
                      int64_t now = k_t0) {
    QueuedResource q;
    q.id = id;
    q.pool = "p";
    q.uid = "u" + id;
    q.accelerator_type = type;
    q.node_ids = {id};
    q.tier = tier;
    q.created_at_ms = now;
    transition(q, QrState::accepted, state::Initiator::user, now, "created");
    q.create_revision = revision++;
    qrs.push_back(q);
    return qrs.back();
  }

  QueuedResource& get(const std::string& id) {
    for (auto& q : qrs) {
      if (q.id == id) {
        return q;
      }
    }
    FAIL("no request " << id);
    return qrs.front();
  }

  // One pass, applied the way reconcile commits it.
  SchedulePlan pass(int64_t now) {
    SchedulePlan plan = schedule(view, qrs, now);
    for (const auto& c : plan.changed) {
      get(c.id) = c;
    }
    for (const auto& [id, hosts] : plan.claims) {
      for (auto& cell : const_cast<std::vector<GridCell>&>(view.grid.cells())) {
        if (std::find(hosts.begin(), hosts.end(), cell.host) != hosts.end()) {
          CHECK_MESSAGE(cell.state == CellState::free, "host " << cell.host << " claimed twice");
          cell.state = CellState::claimed;
          cell.owner = id;
        }
      }
    }
    view.grid.refresh();
    return plan;
  }

  // What a driver does at the end: ACTIVE, or hosts released (SUSPENDED / deleted).
  void activate(const std::string& id, int64_t now) {
    transition(get(id), QrState::active, state::Initiator::service, now, "ok");
  }
  void release(const std::string& id) {
    for (auto& cell : const_cast<std::vector<GridCell>&>(view.grid.cells())) {
      if (cell.owner == id) {
        cell.state = CellState::free;
        cell.owner.clear();
      }
    }
    view.grid.refresh();
  }
  void remove(const std::string& id) {
    release(id);
    qrs.erase(std::remove_if(qrs.begin(), qrs.end(), [&](auto& q) { return q.id == id; }),
              qrs.end());
  }
  int claimed_by(const std::string& id) const {
    int n = 0;
    for (const auto& c : view.grid.cells()) {
      n += c.state == CellState::claimed && c.owner == id;
    }
    return n;
  }
};

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace tpuctl::test
