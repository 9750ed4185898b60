// What users do to workloads, and the monitor that carries one to its end.
//
// create_workload() validates everything before it stores anything, stores the workload QUEUED
// on its cluster and, once the queue admits it onto --num-slices slices (workload_admit.hpp: at
// once when they are free), starts the first attempt on every worker of them at once; it is
// RUNNING once every worker has started (FAILED, with the started ones stopped again, when one
// could not start). From then on a monitor (monitor_workload: `tpuctl workload monitor`, started
// detached by `workload create` and by any command that finds a running workload nobody monitors)
// hears from every worker through a stream (workload_watch.hpp), takes what arrived every second
// and applies the failure policy (workload_policy.hpp). Only the holder of the workload's monitor
// lease acts; every write re-reads the record first and gives up when `workload delete` has marked
// it, so a delete never races a restart into leaving processes behind.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "agent/step_source.hpp"
#include "provision/slice/provisioning.hpp"
#include "provision/workload/container.hpp"
#include "provision/workload/workload.hpp"
#include "provision/workload/workload_policy.hpp"
#include "remote/ssh_types.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

// --num-slices all: every slice of the cluster.
inline constexpr int k_all_slices = -1;

struct WorkloadRequest {
  std::string name;
  std::string pool;
  std::string cluster;
  std::string project; // "" or what --project named: must be the cluster's (it is charged there)
  std::string command;
  EnvVars env;
  Secrets secrets;                           // --env-secret (provision/slice/secrets.hpp)
  remote::SshSettings ssh;                   // recorded: its monitors use them (request_ssh.hpp)
  EnvProfile env_profile = EnvProfile::none; // torchrun, slurm or skypilot variables too
  FailPolicy fail_policy = FailPolicy::any;
  int max_restarts = 0;
  int64_t timeout_ms = 0;
  int64_t termination_grace_ms = 30000; // -tgps, 0 to k_max_grace_seconds
  int64_t failure_grace_ms = 2000;      // --failure-grace-period-seconds, 0 to k_max_grace_seconds
  std::string restart_on_exit_codes;    // "3,10-12" (parse_exit_codes); empty: not given
  int max_repairs = 3;                  // 0 to 1000
  int64_t ttl_after_finished_ms = -1;   // -1: kept until deleted
  // xpk's --tpu-type (any form of the type), checked against the cluster's, and --num-slices:
  // how many of the cluster's slices it asks for (xpk's default 1; k_all_slices: every one).
  std::string tpu_type;
  int num_slices = 1;
  int priority = 500;      // --priority's value (parse_priority: very-low 100 ... very-high 1000)
  ContainerSpec container; // an image: the runtime is chosen (or the request refused)
  std::vector<AppFile> app_files; // --script-dir: copied to every worker, mounted at /app
  bool dry_run = false;           // validate and plan; store and start nothing
  std::string python_env{k_default_python_env}; // --python-env (cli resolves the default)
  // --checkpoint-dir: one directory every worker shares (checked on each before anything is
  // stored, and before each launch); "" when not given.
  std::string checkpoint_dir;
  // --step-pattern: the log lines that are steps (agent/step_source.hpp).
  std::string step_pattern{agent::k_default_step_pattern};
  int64_t hang_timeout_ms = 0; // --hang-timeout; 0: workload_hang.hpp's default
  int64_t straggler_interval_ms = 60'000; // --straggler-interval
  std::string on_straggler = "none";      // --on-straggler: none or swap
};

struct MonitorOptions {
  remote::SshOptions ssh;
  std::chrono::milliseconds poll_interval{1000};
  PolicyConfig policy;
  std::chrono::milliseconds lease_ttl{60000};
  state::Clock clock = state::system_clock();
  std::function<void(const std::string&)> progress; // a line per change, for stderr; may be empty
  // Moves the pool's queued resources through their transient states (reconcile and drive, as
  // provision/controller does): a recovering workload's cluster is suspended, requeued and
  // provisioned again through it. Empty: only reconcile (another process must drive).
  std::function<Status(const std::string& pool)> drive_pool;
  // How a repair provisions the one slice it places again (node_repair.hpp): with these, a lost
  // host's slice alone is re-placed while the request stays ACTIVE; without, the whole request
  // goes back through the queue.
  std::optional<ProvisionOptions> provision;
  // A restart or a recovery starts the workers the monitor watches through their streams
  // (workload_watch.hpp); false: every worker over a new session, as before.
  bool start_through_streams = true;
  // As each worker has started (`done` of `total`, its host): for a live display; may be empty.
  std::function<void(size_t done, size_t total, const std::string& host)> worker_started;
  // This process is the pool's elected controller or a monitor it started: a pool whose SSH work
  // is the controller's is watched and started only by those (pool/ssh_work.hpp).
  bool as_controller = false;
};

// Nothing when this process (`options.as_controller`, the store's actor) may do the SSH work of
// `workload` in its pool (pool/ssh_work.hpp): start it, watch it, repair it; else why not.
// Errors: the store's (the pool record).
Expected<std::optional<std::string>> workload_ssh_refusal(state::StateStore& store,
                                                          const Workload& workload,
                                                          const MonitorOptions& options);

// Stores the workload QUEUED on its cluster and makes a pass through the cluster's queue
// (workload_admit.hpp): admitted at once (its slices free, or freed by evicting lower
// priorities), it starts there and returns RUNNING; else it returns QUEUED, for a monitor to
// wait in the queue (run_monitor). Errors (nothing stored): usage (bad name, command, restarts,
// timeout or environment: every problem named; a tpu_type other than the cluster's, num_slices
// not 1..the cluster's), not_found (no such cluster), failure (its cluster's slices are not
// ACTIVE; a workload of that name exists). A worker that cannot start is not an error: the
// workload is FAILED. With an image, every worker is asked for a container
// runtime first (choose_runtime) and the script dir is copied; a worker without one refuses the
// whole request (nothing stored or started). With dry_run, returns the workload as it would be
// stored (state PENDING) after the checks and stores and starts nothing (launch_command shows what
// each worker would run); a refused runtime probe is then the workload's `message` (with docker, or
// the runtime asked for, in its commands).
Expected<Workload> create_workload(state::StateStore& store, const WorkloadRequest& request,
                                   const MonitorOptions& options);

// True when `workload` is not finished and no other live process holds its monitor lease.
bool needs_monitor(const Workload& workload, int64_t now_ms);

// Takes the monitor lease (returns at once, with the record, when another live process holds
// it or the workload is finished) and polls until the workload is SUCCEEDED or FAILED, is being
// deleted or removed (nullopt), or `cancel` is set. Errors: the store's.
Expected<std::optional<Workload>> monitor_workload(state::StateStore& store,
                                                   const std::string& pool, const std::string& name,
                                                   const MonitorOptions& options,
                                                   const remote::CancelToken* cancel = nullptr);

// True when `workload` has ended and its --ttl-seconds-after-finished has passed by `now_ms`
// (and it is not already being deleted).
bool ttl_expired(const Workload& workload, int64_t now_ms);

// The detached monitor's last duty for a finished workload with a TTL: waits until it expires
// (reading the record at least every 30 s: a delete, or a record gone, ends the wait), then
// deletes it as `workload delete` does. Returns at once for a workload without a TTL or not
// finished, one whose TTL ends more than an hour from now (a workload command that finds it
// expired starts the delete: ttl_expired), and when `cancel` is set. Errors: the delete's.
Status delete_after_ttl(state::StateStore& store, const std::string& pool, const std::string& name,
                        const MonitorOptions& options, const remote::CancelToken* cancel);

struct WorkloadDeletion {
  Workload workload;                    // as it was
  std::vector<std::string> unreachable; // hosts where nothing could be stopped
  // Workers its monitor stopped through the streams it holds (the others: one new session per
  // host).
  size_t stopped_by_monitor = 0;
};

// Marks the workload as being deleted, stops the workload's processes on every worker and
// removes its files, then its record. A live monitor of a RUNNING workload keeps its lease on the
// mark and stops the workers through the streams it holds (no new session: a fraction of one SSH
// round at any size); the delete waits for its answer (it says it is stopping within a turn plus
// 30 s, and which workers it stopped within the grace plus 30 s; a monitor stopped on this
// machine is not waited for) and stops the workers it did not
// confirm with one new session per host. A monitor that may be starting processes (a restart, a
// recovery) ends at its next visit to the store (one on this host is terminated and waited for),
// and the delete stops everything itself. When a host cannot be reached the record stays (marked)
// and the error names the hosts, unless `force`. Errors: not_found, failure (unreachable hosts),
// the store's.
Expected<WorkloadDeletion> delete_workload(state::StateStore& store, const std::string& pool,
                                           const std::string& name, bool force,
                                           const MonitorOptions& options);

} // namespace tpuctl::provision
