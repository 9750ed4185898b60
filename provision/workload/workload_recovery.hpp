// Workloads that survive: a lost host repaired, a preempted cluster resumed.
//
// A workload runs on its cluster's queued resource. Two things take the slices away under it:
//   * a worker is LOST (its host gone, its supervisor gone, no heartbeat) while the workload has
//     repairs left: the monitor repairs the slice, as GKE node auto-repair and JobSet do
//     together. It drains the lost hosts (the reason names the workload and the time), then
//     places only the slice that held them again (node_repair.hpp: same shape and topology
//     rules as any request, on free hosts; spares are simply free hosts, the drained ones are
//     never placed), provisions just it, and the request stays ACTIVE: its other slices, and
//     other workloads on them, are untouched. When that slice cannot be placed or provisioned,
//     the whole request goes back instead: suspended with the requeue mark (its processes
//     stopped on every host that answers, its hosts released), put back in the queue in its old
//     place by the scheduler, placed and provisioned again; while nothing fits, the request
//     waits, and the workload with it, its reason visible, until hosts free up or the
//     workload's --timeout passes.
//   * the cluster is preempted: a requeue cluster (cluster create's default) comes back the same
//     way once capacity returns; a suspend one ends the workload FAILED, naming the preemption.
// Meanwhile the workload is RECOVERING. Once its slices are back (the repaired slice ready, or
// the request ACTIVE since after the attempt that broke), every worker starts the next attempt
// together, with the new worker environment (new hosts, TPUCTL_WORKLOAD_ATTEMPT + 1). Neither a
// repair (counted in repairs, bounded by --max-repairs) nor a preemption uses up a restart: they
// are not the workload's failure.
//
// The monitor records what it is about to do before doing it (RECOVERING with the repair still
// to carry out), and every step checks what is already done (a drained host, a request already
// suspending), so a monitor killed in the middle of a repair is finished by the next one, which
// any workload command starts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "provision/queue/queued_resource.hpp"
#include "provision/workload/workload.hpp"
#include "provision/workload/workload_ops.hpp"
#include "provision/workload/workload_remote.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

class WorkerWatch;

// How the cluster's request stands against the workload's current attempt.
enum class SliceStatus {
  intact,      // ACTIVE since before the attempt started
  coming_back, // being suspended to be requeued, queued, provisioned, or ACTIVE again since
  gone,        // suspended for good, failed, being deleted or missing
};
struct SliceCheck {
  SliceStatus status = SliceStatus::intact;
  std::string why; // coming_back and gone: what happened to it, for people
  std::optional<QueuedResource> qr;
  std::vector<std::string> deleted_nodes; // gone: the workload's slices deleted from the request
  bool repairing = false; // coming_back: one of its slices is being placed again in place
};
// Errors: the store's.
Expected<SliceCheck> check_slices(state::StateStore& store, const Workload& wl);

// The record change that starts a recovery at `now_ms`: RECOVERING, the current attempt's
// running time lost, its workers STOPPED (LOST ones stay LOST), and, when `lost_hosts` is not
// empty (a repair), the repair to carry out and one repair counted (never a restart: the
// caller counts one when the job failed too). Returns the event.
std::vector<state::Op> begin_recovery(Workload& wl, int64_t now_ms, const std::string& why,
                                      const std::vector<std::string>& lost_hosts);

struct RecoveryStep {
  std::optional<Workload> workload; // afterwards; nullopt when deleted
  // RUNNING again: the new attempt's workers, for the monitor's polls.
  std::optional<std::vector<WorkerPlan>> plans;
  // RUNNING again through the monitor's watch, retargeted to `plans`: keep it.
  bool watch_kept = false;
};

// One step of a RECOVERING workload (the monitor's, once per poll): carries out the repair
// still to do, lets the request move (MonitorOptions::drive_pool), accounts the phase (queued,
// provisioning or recovering, after the request's state), and starts the next attempt when the
// request is ACTIVE again; ends the workload FAILED when the request is gone for good or its
// --timeout passed. `watch`: the monitor's streams of the attempt that broke, when it kept them:
// retargeted to the new attempt's workers, they start those whose host did not change (only the
// moved ones need new sessions). Errors: the store's.
Expected<RecoveryStep> recovery_step(state::StateStore& store, const Workload& wl,
                                     const MonitorOptions& o, WorkerWatch* watch = nullptr);

} // namespace tpuctl::provision
