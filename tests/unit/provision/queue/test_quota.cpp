// Project quotas in the scheduler's pass (provision/queue/quota.hpp): guaranteed requests wait
// within their project's quota without holding other projects back, spot requests borrow idle
// chips and are preempted first, a spot request within its quota reclaims what others borrow,
// and projects contending in one tier are served by fair share.
#include <doctest/doctest.h>

#include "provision/queue/quota.hpp"
#include "tests/unit/provision/queue/scheduler_sim.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;
using tpuctl::test::contains;
using tpuctl::test::k_t0;
using tpuctl::test::Sim;

TEST_SUITE_BEGIN("provision");

namespace {

// v5e 4x8: 8 hosts of 4 chips; v5litepod-4 takes one host.
QueuedResource& add(Sim& sim, const std::string& id, const std::string& project,
                    Tier tier = Tier::standard, const std::string& type = "v5litepod-4") {
  QueuedResource& q = sim.add(id, type, tier);
  q.project = project;
  return q;
}

void activate_all(Sim& sim, int64_t now) {
  for (auto& q : sim.qrs) {
    if (q.state == QrState::provisioning) {
      sim.activate(q.id, now);
    }
  }
}

} // namespace

TEST_CASE("quota: a guaranteed request over its project's quota waits with the quota and its "
          "users as reason, other projects pass it, and it is placed once room is made") {
  Sim sim("v5e", "4x8");
  sim.view.info.quotas = {{"ml", 8}};
  add(sim, "a", "ml");
  add(sim, "b", "ml");
  add(sim, "c", "ml");
  add(sim, "x", "infra"); // no quota: unlimited, and later than c
  sim.pass(k_t0);
  CHECK(sim.get("a").state == QrState::provisioning);
  CHECK(sim.get("b").state == QrState::provisioning);
  CHECK(sim.get("x").state == QrState::provisioning);
  const QueuedResource& c = sim.get("c");
  CHECK(c.state == QrState::waiting_for_resources);
  CHECK(contains(c.pending_reason, "over quota: project 'ml' has a quota of 8 chips"));
  CHECK(contains(c.pending_reason, "'a' 4, 'b' 4"));
  // Free hosts do not help it; its own project's room does.
  sim.pass(k_t0 + 10);
  CHECK(sim.get("c").state == QrState::waiting_for_resources);
  sim.remove("a");
  sim.pass(k_t0 + 20);
  CHECK(sim.get("c").state == QrState::provisioning);
  // A request bigger than the whole quota waits saying so (create refuses it: see below).
  add(sim, "big", "ml", Tier::standard, "v5litepod-16");
  sim.pass(k_t0 + 30);
  CHECK(contains(sim.get("big").pending_reason, "this request needs 16"));
  CHECK(contains(sim.get("big").pending_reason, "raises the quota"));
}

TEST_CASE("quota: a request that needs more than its project's whole quota is refused at create, "
          "a spot one is not (it borrows), a project without a quota is unlimited") {
  PoolInfo pool;
  pool.name = "p";
  pool.quotas = {{"ml", 8}, {"zero", 0}};
  QueuedResource q;
  q.id = "q";
  q.accelerator_type = "v5litepod-16";
  q.node_ids = {"q"};
  q.project = "ml";
  auto refused = check_quota_can_fit(pool, q);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().kind == ErrorKind::capacity);
  CHECK(contains(refused.error().message, "needs 16 chips, more than project 'ml''s whole quota "
                                          "of 8 in pool 'p'"));
  CHECK(contains(refused.error().message, "tpuctl pool quota set ml --chips 16"));
  q.accelerator_type = "v5litepod-8";
  CHECK(check_quota_can_fit(pool, q));
  q.project = "zero";
  CHECK_FALSE(check_quota_can_fit(pool, q));
  q.tier = Tier::spot;
  CHECK(check_quota_can_fit(pool, q));
  q.tier = Tier::standard;
  q.project = "other";
  CHECK(check_quota_can_fit(pool, q));
}

TEST_CASE("quota: spot borrows idle chips beyond its quota; a guaranteed request of another "
          "project takes the borrowed hosts first, not a spot slice within its quota") {
  Sim sim("v5e", "4x8");
  sim.view.info.quotas = {{"ml", 8}, {"infra", 24}};
  for (const char* id : {"m1", "m2", "m3", "m4"}) {
    add(sim, id, "ml", Tier::spot); // m1, m2 within ml's 8 chips; m3, m4 borrow
  }
  for (const char* id : {"i1", "i2", "i3", "i4"}) {
    add(sim, id, "infra", Tier::spot); // within infra's 24
  }
  sim.pass(k_t0);
  activate_all(sim, k_t0 + 1);
  CHECK(borrowing(sim.qrs, sim.view.info.quotas) == std::set<std::string>{"m3", "m4"});
  add(sim, "need", "infra"); // the pool is full
  sim.pass(k_t0 + 2);
  std::vector<std::string> preempted;
  for (const auto& q : sim.qrs) {
    if (q.state == QrState::suspending) {
      preempted.push_back(q.id);
      CHECK(contains(q.history.back().reason, "preempted by 'need'"));
      CHECK(contains(q.history.back().reason, "borrowed beyond its quota"));
      CHECK(contains(sim.get("need").pending_reason,
                     std::string(1, '\'').append(q.id).append("' (borrowing)")));
    }
  }
  REQUIRE(preempted.size() == 1);
  CHECK((preempted[0] == "m3" || preempted[0] == "m4"));
}

TEST_CASE("quota: a spot request within its project's quota reclaims chips other projects "
          "borrow; beyond its own quota it waits like any spot request") {
  Sim sim("v5e", "4x8");
  sim.view.info.quotas = {{"ml", 8}, {"infra", 4}};
  for (int i = 0; i < 8; ++i) {
    add(sim, std::string(1, 'm').append(std::to_string(i)), "ml", Tier::spot); // 6 borrow
  }
  sim.pass(k_t0);
  activate_all(sim, k_t0 + 1);
  add(sim, "i1", "infra", Tier::spot);
  sim.pass(k_t0 + 2);
  int suspending = 0;
  for (const auto& q : sim.qrs) {
    if (q.state == QrState::suspending) {
      ++suspending;
      CHECK(q.project == "ml");
      CHECK(contains(q.history.back().reason, "reclaiming the chips project 'ml' borrowed"));
    }
  }
  CHECK(suspending == 1);
  CHECK(sim.get("m0").state == QrState::active); // within ml's quota: never reclaimed
  CHECK(sim.get("m1").state == QrState::active);
  // A second infra spot request would take infra beyond its 4 chips: no reclaim for it.
  for (auto& q : sim.qrs) {
    if (q.state == QrState::suspending) {
      transition(q, QrState::suspended, state::Initiator::service, k_t0 + 3, "");
      sim.release(q.id);
    }
  }
  sim.pass(k_t0 + 4);
  CHECK(sim.get("i1").state == QrState::provisioning);
  activate_all(sim, k_t0 + 5);
  add(sim, "i2", "infra", Tier::spot);
  sim.pass(k_t0 + 6);
  CHECK(sim.get("i2").state == QrState::waiting_for_resources);
  int active = 0;
  for (const auto& q : sim.qrs) {
    active += q.state == QrState::active ? 1 : 0;
  }
  CHECK(active == 8);
}

TEST_CASE("quota: projects contending in one tier are served by fair share, not arrival alone, "
          "and the pending reason shows the shares") {
  Sim sim("v5e", "4x8");
  sim.view.info.quotas = {{"ml", 16}, {"infra", 16}};
  add(sim, "blocker", "other", Tier::standard, "v5litepod-32"); // the whole pool, for now
  sim.pass(k_t0);
  for (const char* id : {"m1", "m2", "m3", "m4"}) {
    add(sim, id, "ml"); // ml asked first
  }
  for (const char* id : {"i1", "i2", "i3", "i4"}) {
    add(sim, id, "infra");
  }
  sim.pass(k_t0 + 1);
  CHECK(contains(sim.get("i4").pending_reason,
                 "fair share in tier standard: infra 0.00, ml 0.00 (the lowest is served first)"));
  sim.remove("blocker"); // 8 hosts: arrival alone would give ml four of the first four
  sim.view.info.quotas["infra"] = 32;
  add(sim, "late", "infra", Tier::standard, "v5litepod-16"); // after i4: no room is left
  sim.pass(k_t0 + 2);
  int ml = 0, infra = 0;
  for (const auto& q : sim.qrs) {
    if (q.state == QrState::provisioning) {
      (q.project == "ml" ? ml : infra) += 1;
    }
  }
  // Eight single-host requests on eight hosts: each project got four, in turns.
  CHECK(ml == 4);
  CHECK(infra == 4);
  CHECK(sim.get("late").state == QrState::waiting_for_resources);
  // The shares as the pass left them: infra 16 of 32 chips, ml 16 of 16.
  CHECK(
      contains(sim.get("late").pending_reason,
               "; fair share in tier standard: infra 0.50, ml 1.00 (the lowest is served first)"));
}

TEST_CASE("quota: fair share alternates projects when the free hosts cannot take everyone") {
  Sim sim("v5e", "4x8");
  add(sim, "blocker", "other", Tier::standard, "v5litepod-16"); // half the pool
  sim.pass(k_t0);
  sim.activate("blocker", k_t0);
  for (const char* id : {"m1", "m2", "m3", "m4"}) {
    add(sim, id, "ml");
  }
  for (const char* id : {"i1", "i2", "i3", "i4"}) {
    add(sim, id, "infra");
  }
  sim.pass(k_t0 + 1);
  // No quotas: shares are of the pool's 32 chips. Four free hosts went two and two, the
  // earliest of each project first.
  CHECK(sim.get("m1").state == QrState::provisioning);
  CHECK(sim.get("m2").state == QrState::provisioning);
  CHECK(sim.get("i1").state == QrState::provisioning);
  CHECK(sim.get("i2").state == QrState::provisioning);
  CHECK(sim.get("m3").state == QrState::waiting_for_resources);
  CHECK(sim.get("i3").state == QrState::waiting_for_resources);
}
