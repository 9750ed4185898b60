// `tpuctl controller run`: the one process that carries a shared pool on when its pool says the
// SSH work is the controller's (pool/ssh_work.hpp), and an optional babysitter otherwise.
//
// Several controllers may run against one etcd store (on two machines, for one to survive the
// other); they elect one leader through an etcd lease (StateStore::campaign). A thread of its own,
// on a connection of its own, keeps the leader's lease alive every third of its TTL, so a leader
// busy provisioning a 256-host slice for minutes stays the leader, and one that dies (SIGKILL,
// a power cut) loses it one TTL later by itself. The others stand by, campaigning at the same
// pace, and the first to find the key gone leads: it carries on what the dead leader had in hand
// as any driver takes over a dead one's lease (provision/queue/reconcile.hpp: the driver lease
// names the dead process, whose leftovers on the workers are stopped first). Only the leader
// drives: standing by costs one small etcd request a TTL/3.
//
// The leader drives every pool's requests that need a driver, as `tpuctl controller drive` does,
// and starts the monitors of the workloads of controller pools (launcher.hpp), which act for it
// through TPUCTL_CONTROLLER_LEADER: a monitor started by the leader checks once, at its start,
// that the variable names the live leadership and that its store user is the leader's
// (acting_for_controller), so on an authenticating store nobody else's process can pass for the
// controller's. A store without elections (SQLite: one machine's file) has no controller pools:
// there every controller drives, as before.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "provision/controller/launcher.hpp"
#include "provision/slice/driver.hpp"
#include "remote/ssh_types.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

struct ControllerOptions {
  DriveOptions drive;
  Launcher launcher; // for the monitors it starts
  std::string pool;  // empty: every pool
  std::chrono::milliseconds interval{2000};
  std::chrono::seconds leadership_ttl{5};
  bool once = false; // one pass (after the first campaign), then return
  // "leading (controller ...)", "standing by: ... leads"; may be empty.
  std::function<void(const std::string&)> progress;
  // A second connection to the store, for the thread that keeps the leadership: the loop's own is
  // busy while it drives. Required on a store with elections.
  std::function<Expected<std::unique_ptr<state::StateStore>>()> open_store;
};

struct ControllerResult {
  int carried = 0;    // requests carried to their next state
  bool led = false;   // it led at some point (always, on a store without elections)
  std::string leader; // the leader's id when it returned (this one's when it led)
};

// Campaigns, and while leading drives and starts monitors every `interval`, until `cancel`
// (resigning at once, so a standby leads at its next campaign) or after one pass with `once`.
// Errors: the store's.
Expected<ControllerResult> run_controller(state::StateStore& store, const ControllerOptions& o,
                                          const remote::CancelToken* cancel);

// Whether this process acts for the elected controller: TPUCTL_CONTROLLER_LEADER names the live
// leader's id and the store's actor is the leader's (a monitor the controller started).
bool acting_for_controller(state::StateStore& store);

} // namespace tpuctl::provision
