// Workloads: xpk's `workload create` on a cluster. A workload is one command started on every
// worker of every slice of a cluster at once, with the worker environment, detached from the
// client: each worker runs it under `tpuctl agent supervise` (agent/supervise.hpp), which keeps
// the exit status, a heartbeat and the log on the worker. A monitor (workload_monitor.hpp) polls
// the workers and applies the failure policy: one failing worker stops the others, and with
// --max-restarts every worker restarts together, as a JobSet does.
//
//   QUEUED -> PENDING -> RUNNING -> SUCCEEDED | FAILED   (a restart stays RUNNING,
//                                                         restarts += 1)
//   QUEUED: waiting for --num-slices free slices of its cluster (workload_admit.hpp); PENDING:
//   admitted onto `slices`, its workers starting.
//   RUNNING | PENDING | RECOVERING -> EVICTING -> QUEUED (a higher priority needs its slices:
//                                                    its processes get their grace, then it
//                                                    waits again, evictions += 1)
//   RUNNING -> RECOVERING -> RUNNING                (a lost worker's slice repaired, or the
//                                                    cluster preempted and requeued: the next
//                                                    attempt starts once it is ACTIVE again;
//                                                    workload_recovery.hpp)
//
// Stored as JSON under Key{workload, pool, name}; to_json/workload_from_json are the only places
// that know the field names (they are also `workload describe --format json`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "provision/slice/secrets.hpp"
#include "provision/slice/worker_env.hpp"
#include "provision/workload/step_ledger.hpp"
#include "provision/workload/workload_goodput.hpp"
#include "remote/ssh_settings.hpp"
#include "state/store.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

enum class WorkloadState { queued, pending, running, recovering, evicting, succeeded, failed };
std::string_view to_string(WorkloadState state); // "PENDING", "RUNNING", ...
std::optional<WorkloadState> parse_workload_state(std::string_view text);
bool is_terminal(WorkloadState state); // SUCCEEDED or FAILED
// True when a workload in `state` holds its slices (PENDING, RUNNING, RECOVERING, EVICTING).
bool holds_slices(WorkloadState state);

// any: the first worker that fails (or is lost) stops the others; all: workers run on until
// every one has ended, then the workload fails if any of them failed.
enum class FailPolicy { any, all };
std::string_view to_string(FailPolicy policy); // "any", "all"
// Errors: usage naming `text` and the choices.
Expected<FailPolicy> parse_fail_policy(std::string_view text);

// What one worker is doing, as last observed.
enum class WorkerState { pending, running, succeeded, failed, lost, stopped };
std::string_view to_string(WorkerState state); // "PENDING", "RUNNING", ..., "LOST", "STOPPED"
std::optional<WorkerState> parse_worker_state(std::string_view text);

struct WorkloadWorker {
  std::string node; // node id (TPU_NAME)
  int slice = 0;    // the node's index (MEGASCALE_SLICE_ID)
  int worker = 0;   // TPU_WORKER_ID
  std::string host; // pool host
  WorkerState state = WorkerState::pending;
  int exit_code = -1;            // when it ended by itself; 128+N for signal N
  int attempt = 0;               // the attempt the observation belongs to
  int64_t last_heartbeat_ms = 0; // the worker's clock, unix ms; 0 before the first
  int64_t last_contact_ms = 0;   // this machine's clock: the last successful poll
  std::string detail;            // why LOST, or a transport error
  // When it ended (the worker's clock, unix ms; 0 while it runs), whether a stop of tpuctl's
  // ended it (delete, eviction, a peer's failure) rather than the command itself, and the last
  // line it wrote (what a failure says: a Python exception's last line).
  int64_t ended_ms = 0;
  bool stopped = false;
  std::string last_line;
  // What the program reported through the worker's event file (TPUCTL_EVENTS) in this attempt,
  // the latest event of each kind by its name: "jax_distributed" ({by: tpuctl|program,
  // process_id, num_processes, coordinator}), "compile_cache" ({hits, misses}). {} when none.
  nlohmann::json events = nlohmann::json::object();
  // Its attempt's progress as its worker reads it (agent/step_source.hpp): {source, steps,
  // last_step, last_step_ms, save_ms, restore_ms, saves, restores}; {} when none.
  nlohmann::json progress = nlohmann::json::object();
  // Flagged a straggler in the last interval (workload_straggler.hpp): the evidence; "" if not.
  std::string straggler;
};

// The image a workload's command runs in (provision/workload/container.hpp); no image: on the host.
struct ContainerSpec {
  std::string image;            // empty: no container (the command runs on the host)
  std::string name = "jax-tpu"; // --docker-name: the prefix of each container's name
  std::string runtime = "auto"; // auto, docker or podman; a stored workload has the one chosen
  bool app = false;             // a --script-dir was copied to each worker (mounted at /app)
};

struct Workload {
  std::string name;
  std::string pool;
  std::string uid; // 16 hex digits: TPUCTL_WORKLOAD_UID on every process it starts
  std::string cluster;
  std::string queued_resource;
  std::string command; // run by /bin/sh -c on every worker
  EnvVars env;         // the user's --env additions
  Secrets secrets;     // --env-secret values (provision/slice/secrets.hpp): never shown
  EnvProfile env_profile = EnvProfile::none; // --env-profile: a launcher's variables too
  ContainerSpec container;
  FailPolicy fail_policy = FailPolicy::any;
  int max_restarts = 0;
  // The queue (workload_admit.hpp): --priority's value (workload_queue.hpp), --num-slices, the
  // cluster's slices (node indices) it holds while admitted, when it was last admitted, and how
  // often it was evicted.
  int priority = 500;
  int num_slices = 1;
  std::vector<int> slices;
  // The same slices by node id: what they are, whatever a resize or a deleted node does to the
  // request's node order (`slices` is refreshed from it: resolve_slices).
  std::vector<std::string> slice_nodes;
  // While QUEUED, the queue's view (kept in the cluster's record, not in this one: shown by
  // fill_queue_view): its place (1: next) and since when it waits at the head without fitting.
  int queue_position = 0;
  int64_t head_since_ms = 0;
  int64_t admitted_at_ms = 0;
  int evictions = 0;
  // -tgps: every stop of its processes is TERM, up to this long, then KILL (xpk's default 30 s);
  // the job reads it from TPUCTL_TERMINATION_GRACE_SECONDS.
  int64_t termination_grace_ms = 30000;
  // --failure-grace-period-seconds: the grace of the workers left when a peer failed or its
  // host was lost (the lesser of this and -tgps). A multi-controller job whose peer is gone can
  // neither finish a step nor save a checkpoint (every process takes part in both), and JAX
  // holds TERM while a collective waits for the dead peer: the full -tgps would only be waited.
  int64_t failure_grace_ms = 2000;
  // --restart-on-exit-codes as given ("3,10-12"), normalized; empty: not given (every non-zero
  // exit may restart). Given: xpk's rule (workload_policy.hpp restartable_exit).
  std::string restart_on_exit_codes;
  // --ttl-seconds-after-finished: the finished workload is deleted this long after it ended;
  // -1: kept until deleted.
  int64_t ttl_after_finished_ms = -1;
  int max_repairs = 3;             // repairs of a lost worker's slice, at most (0: a loss fails it)
  int repairs = 0;                 // repairs so far (infrastructure: never counted in restarts)
  int restarts = 0;                // restarts after failures so far (bounded by max_restarts)
  int attempt = 0;                 // the current attempt's number: every restart, repair and resume
  int recoveries = 0;              // repairs and resumes after a preemption so far
  int64_t recovering_since_ms = 0; // RECOVERING: when the failure was noticed
  // RECOVERING after a lost worker: the repair still to carry out (workload_recovery.hpp):
  // {"hosts": [...], "reason": "..."}; empty once the slice is on its way back.
  nlohmann::json repair = nlohmann::json::object();
  WorkloadTime time;      // where the wall time went (workload_goodput.hpp)
  int64_t timeout_ms = 0; // 0: none; the workload fails after running this long
  WorkloadState state = WorkloadState::pending;
  bool deleting = false; // `workload delete` is stopping it: the monitor must not act
  int64_t created_at_ms = 0;
  // Who created it (StateStore::actor(): the etcd user on an authenticating store, else
  // "USER@HOST"); "" when made before owners were recorded.
  std::string owner;
  std::string project = "default"; // its cluster's, when it was created
  // The SSH settings it was made with (provision/pool/request_ssh.hpp): its owner's monitors
  // launch, watch and restart it with them.
  remote::SshSettings ssh;
  int64_t started_at_ms = 0; // the first attempt's start
  int64_t attempt_started_ms = 0;
  int64_t finished_at_ms = 0;
  std::string message; // FAILED: which worker, what exit code; SUCCEEDED: a summary
  std::vector<WorkloadWorker> workers;
  // The Python environment on the workers (--python-env), and the checkpoint directory every
  // worker shares (--checkpoint-dir: checked before each launch, exported as
  // TPUCTL_CHECKPOINT_DIR; "" when not given).
  std::string python_env{k_default_python_env};
  std::string checkpoint_dir;
  // --step-pattern: the log lines that are steps (agent/step_source.hpp; default MaxText's
  // `completed step: N`), and the goodput ledger the monitor keeps from process 0's steps
  // (step_ledger.hpp).
  std::string step_pattern;
  StepLedger steps;
  // --hang-timeout (0: max(60 s, 20 x the ideal step), workload_hang.hpp), and the last hang
  // found: {at_ms, attempt, why, worker (describe_worker's words, or ""), where} ({} for none).
  int64_t hang_timeout_ms = 0;
  nlohmann::json hang = nlohmann::json::object();
  // --straggler-interval, and the last interval's verdict (workload_straggler.hpp): {at_ms,
  // attempt, interval_ms, found: [{worker, index, share, peers, score, evidence}]}.
  int64_t straggler_interval_ms = 60'000;
  nlohmann::json stragglers = nlohmann::json::object();
  // --on-straggler: "none" (name it) or "swap" (its host drained and its slice repaired, on a
  // spare when the pool holds one, as a lost host's).
  std::string on_straggler = "none";
  nlohmann::json monitor = nlohmann::json::object(); // the monitor's lease (reconcile.hpp)
  int64_t version = 0;
};

nlohmann::json to_json(const Workload& workload);
// Errors: failure naming the bad field (a corrupt record).
Expected<Workload> workload_from_json(const nlohmann::json& doc);
Expected<Workload> workload_from_record(const state::Record& record);

state::Key workload_key(const std::string& pool, const std::string& name);

// The indices, among `node_ids` (the cluster's request's nodes, in order), of the slices the
// workload holds: its slice_nodes found there (a removed one is left out), or `slices` for a
// record without them.
std::vector<int> resolve_slices(const Workload& workload, const std::vector<std::string>& node_ids);

// Every workload of `pool`, by name; only those of `cluster` when it is not empty.
Expected<std::vector<Workload>> list_workloads(state::StateStore& store, const std::string& pool,
                                               const std::string& cluster = "");
// The workload. Errors: not_found naming it, the pool and the workloads that exist.
Expected<Workload> load_workload(state::StateStore& store, const std::string& pool,
                                 const std::string& name);

// Where worker `worker` of node `node` keeps the workload's files: under the host's tpuctl
// working directory, <workdir>/workloads/<uid>/<node>-<worker> (log, status.json, heartbeat).
std::string workload_dir(const std::string& workdir, const std::string& uid,
                         const std::string& node, int worker);

// Where the workload's wall time went up to now_ms (or its end), and its goodput.
Goodput goodput_of(const Workload& workload, int64_t now_ms);

// "worker c-0/2@h3" (NODE/WORKER@HOST): how messages name a worker.
std::string describe_worker(const WorkloadWorker& w);

} // namespace tpuctl::provision
