// The scheduler's pass, on a simulated pool: every due transition, the queue order, preemption
// and the anti-starvation rule (provision/queue/scheduler.hpp), with the clock under test control.
#include <doctest/doctest.h>

#include "provision/queue/scheduler.hpp"
#include "tests/unit/provision/queue/scheduler_sim.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;
using tpuctl::test::contains;
using tpuctl::test::k_t0;
using tpuctl::test::Sim;

TEST_SUITE_BEGIN("provision");

TEST_CASE("scheduler: a request that fits goes ACCEPTED -> WAITING_FOR_RESOURCES -> "
          "PROVISIONING in one pass, with its hosts claimed in worker order") {
  Sim sim("v5e", "4x8"); // 2x4 hosts of 2x2 chips
  sim.add("a", "v5litepod-16");
  auto plan = sim.pass(k_t0 + 10);
  const auto& a = sim.get("a");
  CHECK(a.state == QrState::provisioning);
  REQUIRE(a.history.size() == 3);
  CHECK(a.history[1].to == QrState::waiting_for_resources);
  CHECK(a.history[2].to == QrState::provisioning);
  CHECK(a.history[2].initiator == state::Initiator::service);
  REQUIRE(a.nodes.size() == 1);
  REQUIRE(a.nodes[0].workers.size() == 4);
  for (int w = 0; w < 4; ++w) {
    CHECK(a.nodes[0].workers[static_cast<size_t>(w)].worker == w);
  }
  // Worker 0 is the block's origin and worker 1 its x neighbour (x fastest).
  const auto& w0 = a.nodes[0].workers[0].position;
  const auto& w1 = a.nodes[0].workers[1].position;
  CHECK(w1[0] == w0[0] + 1);
  CHECK(w1[1] == w0[1]);
  CHECK(a.nodes[0].workers[0].address.rfind("10.0.0.", 0) == 0);
  REQUIRE(plan.claims.size() == 1);
  CHECK(plan.claims[0].second.size() == 4);
  CHECK(sim.claimed_by("a") == 4);
}

TEST_CASE("scheduler: a second request fills the pool, a third waits with the grid's reason and "
          "is placed once the first is deleted") {
  Sim sim("v5e", "4x8");
  sim.add("a", "v5litepod-16");
  sim.add("b", "v5litepod-16");
  sim.add("c", "v5litepod-16");
  sim.pass(k_t0);
  CHECK(sim.get("a").state == QrState::provisioning);
  CHECK(sim.get("b").state == QrState::provisioning);
  CHECK(sim.get("c").state == QrState::waiting_for_resources);
  CHECK(contains(sim.get("c").pending_reason, "2x2"));
  CHECK(contains(sim.get("c").pending_reason, "claimed by"));
  sim.pass(k_t0 + 1000); // nothing changes while the pool is full
  CHECK(sim.get("c").state == QrState::waiting_for_resources);
  sim.remove("a");
  sim.pass(k_t0 + 2000);
  CHECK(sim.get("c").state == QrState::provisioning);
  CHECK(sim.claimed_by("c") == 4);
}

TEST_CASE("scheduler: valid-until fails a waiting request exactly when it passes") {
  Sim sim("v5e", "4x8");
  sim.add("big", "v5litepod-32");
  auto& w = sim.add("late", "v5litepod-16");
  w.valid_until_ms = k_t0 + 5000;
  sim.pass(k_t0);
  CHECK(sim.get("late").state == QrState::waiting_for_resources);
  sim.pass(k_t0 + 4999);
  CHECK(sim.get("late").state == QrState::waiting_for_resources);
  sim.pass(k_t0 + 5000);
  const auto& late = sim.get("late");
  CHECK(late.state == QrState::failed);
  REQUIRE(late.error);
  CHECK(late.error->code == "EXPIRED");
  CHECK(late.history.back().initiator == state::Initiator::service);
  CHECK(late.history.back().time_ms == k_t0 + 5000);
}

TEST_CASE("scheduler: valid-after holds a request back until its time") {
  Sim sim("v5e", "4x8");
  auto& q = sim.add("later", "v5litepod-16");
  q.valid_after_ms = k_t0 + 60'000;
  sim.pass(k_t0);
  CHECK(sim.get("later").state == QrState::waiting_for_resources);
  CHECK(contains(sim.get("later").pending_reason, "valid-after"));
  CHECK(sim.claimed_by("later") == 0);
  sim.pass(k_t0 + 60'000);
  CHECK(sim.get("later").state == QrState::provisioning);
}

TEST_CASE("scheduler: max-run-duration suspends an ACTIVE slice (initiator SERVICE) on time") {
  Sim sim("v5e", "4x8");
  auto& q = sim.add("flex", "v5litepod-16", Tier::flex_start);
  q.max_run_duration_ms = 30'000;
  sim.pass(k_t0);
  sim.activate("flex", k_t0 + 1000);
  sim.pass(k_t0 + 30'999);
  CHECK(sim.get("flex").state == QrState::active);
  sim.pass(k_t0 + 31'000);
  CHECK(sim.get("flex").state == QrState::suspending);
  CHECK(sim.get("flex").state_initiator == state::Initiator::service);
  CHECK(contains(sim.get("flex").history.back().reason, "max-run-duration"));
}

TEST_CASE("scheduler: a reserved request preempts a spot slice that is in its way, and only it") {
  Sim sim("v5e", "4x8");
  sim.add("spot1", "v5litepod-16", Tier::spot);
  sim.add("std1", "v5litepod-16", Tier::standard);
  sim.pass(k_t0);
  sim.activate("spot1", k_t0 + 1);
  sim.activate("std1", k_t0 + 1);
  sim.add("res", "v5litepod-16", Tier::reserved);
  sim.pass(k_t0 + 100);
  CHECK(sim.get("spot1").state == QrState::suspending);
  CHECK(sim.get("spot1").state_initiator == state::Initiator::service);
  CHECK(contains(sim.get("spot1").history.back().reason, "preempted by 'res'"));
  CHECK(sim.get("std1").state == QrState::active);
  CHECK(sim.get("res").state == QrState::waiting_for_resources);
  CHECK(contains(sim.get("res").pending_reason, "preempting 'spot1'"));
  // Until the spot slice has released its hosts, nothing changes and nobody else takes them.
  sim.add("other", "v5litepod-16", Tier::standard);
  sim.pass(k_t0 + 200);
  CHECK(sim.get("other").state == QrState::waiting_for_resources);
  transition(sim.get("spot1"), QrState::suspended, state::Initiator::service, k_t0 + 300, "");
  sim.release("spot1");
  sim.pass(k_t0 + 400);
  CHECK(sim.get("res").state == QrState::provisioning);
  CHECK(sim.get("other").state == QrState::waiting_for_resources);
}

TEST_CASE("scheduler: a preempted --on-preemption requeue slice goes back to the queue in its "
          "place once SUSPENDED, and is placed again when capacity returns") {
  Sim sim("v5e", "4x8");
  auto& spot = sim.add("spot1", "v5litepod-16", Tier::spot);
  spot.on_preemption = OnPreemption::requeue;
  sim.add("plain", "v5litepod-16", Tier::spot); // gcloud's behaviour: stays SUSPENDED
  sim.pass(k_t0);
  sim.activate("spot1", k_t0 + 1);
  sim.activate("plain", k_t0 + 1);
  sim.add("res", "v5litepod-32", Tier::reserved); // needs the whole pool
  sim.pass(k_t0 + 100);
  REQUIRE(sim.get("spot1").state == QrState::suspending);
  CHECK(sim.get("spot1").requeue);
  REQUIRE(sim.get("plain").state == QrState::suspending);
  CHECK_FALSE(sim.get("plain").requeue);
  // The driver stops both and releases their hosts: SUSPENDED, as the driver records it.
  for (const char* id : {"spot1", "plain"}) {
    transition(sim.get(id), QrState::suspended, state::Initiator::service, k_t0 + 200,
               sim.get(id).history.back().reason);
    sim.get(id).nodes.clear();
    sim.release(id);
  }
  sim.pass(k_t0 + 300);
  const QueuedResource& requeued = sim.get("spot1");
  CHECK(requeued.state == QrState::waiting_for_resources);
  CHECK(requeued.state_initiator == state::Initiator::service);
  CHECK_FALSE(requeued.requeue);
  CHECK(contains(requeued.history.back().reason, "requeued after: preempted by 'res'"));
  CHECK(sim.get("plain").state == QrState::suspended);
  CHECK(sim.get("res").state == QrState::provisioning);
  // A later spot request does not pass it: arrival order holds within the tier.
  sim.add("late", "v5litepod-16", Tier::spot);
  sim.activate("res", k_t0 + 400);
  sim.pass(k_t0 + 500);
  CHECK(sim.get("spot1").state == QrState::waiting_for_resources);
  sim.remove("res");
  sim.pass(k_t0 + 600);
  CHECK(sim.get("spot1").state == QrState::provisioning);
  CHECK(sim.claimed_by("spot1") == 4);
}

TEST_CASE("scheduler: spot never preempts spot, and standard never preempts standard") {
  Sim sim("v5e", "4x8");
  sim.add("s1", "v5litepod-32", Tier::spot);
  sim.pass(k_t0);
  sim.activate("s1", k_t0);
  sim.add("s2", "v5litepod-16", Tier::spot);
  sim.pass(k_t0 + 1);
  CHECK(sim.get("s1").state == QrState::active);
  CHECK(sim.get("s2").state == QrState::waiting_for_resources);

  Sim std_sim("v5e", "4x8");
  std_sim.add("a", "v5litepod-32", Tier::standard);
  std_sim.pass(k_t0);
  std_sim.activate("a", k_t0);
  std_sim.add("b", "v5litepod-16", Tier::reserved);
  std_sim.pass(k_t0 + 1);
  CHECK(std_sim.get("a").state == QrState::active);
  CHECK(std_sim.get("b").state == QrState::waiting_for_resources);
}

TEST_CASE("scheduler: the queue is tier first, then arrival") {
  Sim sim("v5e", "4x8");
  sim.add("blocker", "v5litepod-32");
  sim.pass(k_t0);
  sim.add("spot-first", "v5litepod-16", Tier::spot);
  sim.add("std-second", "v5litepod-16", Tier::standard);
  sim.add("res-third", "v5litepod-16", Tier::reserved);
  sim.pass(k_t0 + 1);
  sim.remove("blocker");
  sim.pass(k_t0 + 2); // room for two of the three
  CHECK(sim.get("res-third").state == QrState::provisioning);
  CHECK(sim.get("std-second").state == QrState::provisioning);
  CHECK(sim.get("spot-first").state == QrState::waiting_for_resources);
}

TEST_CASE("scheduler: small requests pass a blocked large one only until it has waited the "
          "bound at the head of its tier") {
  Sim sim("v5e", "4x8");
  sim.add("half", "v5litepod-16"); // 4 of the 8 hosts, for a long time
  sim.pass(k_t0);
  sim.add("big", "v5litepod-32", Tier::standard, k_t0 + 1); // needs all 8 hosts
  sim.add("small1", "v5litepod-4", Tier::standard, k_t0 + 2);
  sim.pass(k_t0 + 10);
  CHECK(sim.get("big").state == QrState::waiting_for_resources);
  CHECK(sim.get("small1").state == QrState::provisioning); // backfill while big is young

  const int64_t bound = SchedulerPolicy{}.head_wait_bound.count();
  sim.add("small2", "v5litepod-4", Tier::standard, k_t0 + 20);
  sim.pass(k_t0 + 10 + bound);
  CHECK(sim.get("small2").state == QrState::waiting_for_resources);
  CHECK(contains(sim.get("small2").pending_reason, "queued behind 'big'"));
  // A higher tier is not held back by it.
  sim.add("res", "v5litepod-4", Tier::reserved, k_t0 + 30);
  sim.pass(k_t0 + 20 + bound);
  CHECK(sim.get("res").state == QrState::provisioning);
  // Once the hosts free up, big goes first.
  sim.remove("half");
  sim.remove("small1");
  sim.remove("res");
  sim.pass(k_t0 + 30 + bound);
  CHECK(sim.get("big").state == QrState::provisioning);
  CHECK(sim.get("small2").state == QrState::waiting_for_resources);
}

TEST_CASE("scheduler: a request of a type the pool cannot hold fails instead of blocking") {
  Sim sim("v5e", "4x8");
  sim.add("bad", "v4-8");
  sim.add("good", "v5litepod-16");
  sim.pass(k_t0);
  CHECK(sim.get("bad").state == QrState::failed);
  REQUIRE(sim.get("bad").error);
  CHECK(sim.get("bad").error->code == "INVALID");
  CHECK(sim.get("good").state == QrState::provisioning);
}

TEST_CASE("scheduler: --node-count places all nodes or none, named PREFIX-i") {
  Sim sim("v5e", "4x8");
  auto& q = sim.add("ms", "v5litepod-16");
  q.node_ids = {"ms-0", "ms-1"};
  auto& r = sim.add("ms3", "v5litepod-16");
  r.node_ids = {"x-0", "x-1", "x-2"};
  sim.pass(k_t0);
  REQUIRE(sim.get("ms").nodes.size() == 2);
  CHECK(sim.get("ms").nodes[1].id == "ms-1");
  CHECK(sim.get("ms3").state == QrState::waiting_for_resources);
  CHECK(sim.claimed_by("ms3") == 0);
}
