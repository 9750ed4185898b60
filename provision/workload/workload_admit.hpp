// A cluster's workload queue, applied in the store: who is admitted onto which slices, who is
// evicted to make room, and why the others wait (the rules: workload_queue.hpp).
//
// There is no scheduler daemon. As with queued resources, whichever tpuctl process has a reason
// to look applies what is due: `workload create` right after it stores its workload, a monitor
// whose workload ends or is evicted, a delete, a resize, and, every half minute, the monitor of
// each QUEUED workload (a safety net: it also reads its own record at every change). One pass reads
// the cluster and every unfinished workload of it, plans, and commits every change in one
// transaction that rewrites the cluster's record with the version it read (etcd: a compare on
// that key; SQLite: its write lock) and each changed workload with its own. Passes are thus
// serialized on the cluster's record: two at once cannot admit one workload twice or two
// workloads onto one slice (the second one's commit fails, and it plans again from what the
// first wrote), and a resize, which rewrites that record too, never races one. Whatever else
// changes meanwhile only frees slices (a workload ending, requeued, deleted) or adds a waiting
// one, so a plan from before it is never wrong, at most late. The transaction holds a handful of
// operations plus one per workload admitted or evicted, however long the queue. A pass that
// changes nothing writes nothing, so the monitors it wakes settle after one more read each.
//
// What a pass writes:
//   * admitted: QUEUED -> PENDING with the slices it now holds (its monitor, or its create,
//     starts its workers there; workload_ops.cpp);
//   * evicted: PENDING | RUNNING | RECOVERING -> EVICTING (its monitor stops its processes with
//     their grace, then requeue_evicted() puts it back in the queue, keeping its arrival);
//   * waiting: the reason, the position and since when the head has waited, for all of them in
//     the cluster's record (Cluster::queue), so that a pass writes one record besides those of
//     the workloads it admits or evicts, however long the queue (fill_queue_view shows them as
//     each workload's `message`, `queue_position` and `head_since_ms`).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "provision/queue/queued_resource.hpp"
#include "provision/workload/cluster.hpp"
#include "provision/workload/workload.hpp"
#include "provision/workload/workload_ops.hpp"
#include "provision/workload/workload_queue.hpp"
#include "provision/workload/workload_watch.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

struct AdmitPass {
  std::vector<std::string> admitted;
  std::vector<std::string> evicted;
};

// One pass over cluster `cluster` of `pool` at `now_ms`. A cluster that is gone admits nothing.
// Errors: the store's (a conflict only after the store's retries).
Expected<AdmitPass> admit_queue(state::StateStore& store, const std::string& pool,
                                const std::string& cluster, int64_t now_ms,
                                const QueuePolicy& policy = {});

// ---- one pass's parts, for the passes of others (workload_hotswap.cpp) ----

// What a pass reads in its transaction: the cluster's record, its request's (node ids in order,
// and the broken ones: node_repair.hpp), and every unfinished workload of it, as records and
// as the queue's entries (in the same order).
struct QueueRead {
  state::Record cluster_record;
  Cluster cluster;
  std::optional<state::Record> qr_record;
  std::optional<QueuedResource> qr;
  std::vector<std::string> node_ids;
  std::set<int> broken;
  struct Read {
    state::Record record;
    Workload workload;
  };
  std::vector<Read> reads;
  std::vector<QueueEntry> entries;
};
// Nullopt when the cluster is gone. Errors: the store's.
Expected<std::optional<QueueRead>> read_queue(state::StateStore& store, const std::string& pool,
                                              const std::string& cluster);
// The changes of `plan` to one workload (its slices' indices among `node_ids` now); true when
// it changed. Admission events go to `events`.
bool apply_plan(const QueuePlan& plan, const std::vector<std::string>& node_ids, Workload& w,
                int64_t now, std::vector<state::Op>& events);
// The operations that apply `plan` to what `q` read (its workloads as changed in q.reads, the
// queue's view in the cluster's record, a check of the request's version); none when nothing
// changes. Notes the admitted and evicted in `pass`.
std::vector<state::Op> apply_queue(QueueRead& q, const QueuePlan& plan, int64_t now,
                                   AdmitPass& pass);

// Shows the queue's view on each QUEUED workload of `workloads`: its `message` (why it waits),
// `queue_position` and `head_since_ms` from its cluster's record. Errors: the store's.
Status fill_queue_view(state::StateStore& store, std::vector<Workload>& workloads);

// The record change that ends an eviction once the workload's processes are stopped: QUEUED
// again with no slices, its attempt's running time lost, evictions + 1, the next attempt's
// number taken (restarts and repairs untouched: an eviction is not its failure). Returns the
// event.
std::vector<state::Op> requeue_evicted(Workload& workload, int64_t now_ms);

// The slices the workload holds, as indices among its request's `node_ids`: none unless it is
// admitted; resolve_slices; every node for a record from before the queue (it ran on all).
std::vector<int> held_slices(const Workload& workload, const std::vector<std::string>& node_ids);

// ---- the monitor's side (the caller holds the workload's monitor lease) ----

// A QUEUED workload waits: it reads its record at each change of the store (whoever frees
// slices makes a pass), makes a pass of its own every 30-35 s, and refreshes its lease. Returns the
// record once it is no longer QUEUED (admitted: PENDING), nullopt when it is gone, the record as
// found when it is being deleted or `cancel` fires. Errors: the store's.
Expected<std::optional<Workload>> wait_in_queue(state::StateStore& store, const Workload& workload,
                                                const MonitorOptions& options,
                                                const remote::CancelToken* cancel);

struct Started {
  std::optional<Workload> workload; // afterwards (nullopt: gone)
  // RUNNING: the workers of the slices it holds, for the monitor's watch.
  std::optional<std::vector<WorkerPlan>> plans;
};

// Starts an admitted (PENDING) workload's current attempt on the slices it holds: RUNNING once
// every worker started, FAILED when one could not (the others stopped again) or its slices
// cannot be planned. `keep_lease`: the monitor goes on holding the lease (a create hands it
// over). Deleted or evicted meanwhile: what started is stopped again. Errors: the store's.
Expected<Started> start_admitted(state::StateStore& store, const Workload& workload,
                                 const MonitorOptions& options, bool keep_lease);

// Carries out an eviction: stops the attempt's processes with their grace (through `watch`,
// the monitor's streams, when given; new sessions for the rest), then requeue_evicted(), then
// a pass (the slices go to what evicted it). Returns the record afterwards (nullopt: gone).
// Errors: the store's.
Expected<std::optional<Workload>> evict_workload(state::StateStore& store, const Workload& workload,
                                                 const std::vector<WorkerPlan>* plans,
                                                 WorkerWatch* watch, const MonitorOptions& options);

// A pass for the workload's cluster, its failure only logged (the next pass retries).
void admit_quietly(state::StateStore& store, const Workload& workload,
                   const MonitorOptions& options);

} // namespace tpuctl::provision
