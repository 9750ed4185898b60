#include "provision/workload/workload_ops.hpp"

#include <algorithm>
#include <deque>
#include <memory>
#include <utility>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "provision/pool/pools.hpp"
#include "provision/pool/request_ssh.hpp"
#include "provision/queue/reconcile.hpp"
#include "provision/slice/provisioning.hpp"
#include "provision/workload/cluster.hpp"
#include "provision/workload/workload_admit.hpp"
#include "provision/workload/workload_delete.hpp"
#include "provision/workload/workload_hang.hpp"
#include "provision/workload/workload_straggler.hpp"
#include "provision/workload/workload_recovery.hpp"
#include "provision/workload/workload_remote.hpp"
#include "provision/workload/workload_steps.hpp"
#include "provision/workload/workload_watch.hpp"
#include "remote/fanout.hpp"
#include "topology/accelerator_type.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

using Ms = std::chrono::milliseconds;

constexpr int k_max_restarts_limit = 1000;
constexpr int64_t k_max_ttl_seconds = int64_t{366} * 24 * 3600;
// How often a running workload's record is rewritten when nothing changed but heartbeats.
constexpr int64_t k_refresh_ms = 5000;
// How often the monitor reads its records (workload, queued resource) when its workers' streams
// bring nothing new: a delete mark or a slice's change is noticed within this.
constexpr int64_t k_visit_ms = 5000;

bool same_view(const std::vector<WorkloadWorker>& a, const std::vector<WorkloadWorker>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].state != b[i].state || a[i].exit_code != b[i].exit_code ||
        a[i].attempt != b[i].attempt || a[i].detail != b[i].detail ||
        a[i].events != b[i].events) {
      return false;
    }
  }
  return true;
}

Status validate_request(const WorkloadRequest& r) {
  ErrorList problems;
  if (auto v = validate_tpu_name(r.name, "workload name"); !v) {
    problems.add(v.error());
  }
  if (util::trim(r.command).empty()) {
    problems.add(ErrorKind::usage, "--command is empty: give the command every worker runs "
                                   "(e.g. --command 'python3 train.py')");
  } else if (r.command.find('\0') != std::string::npos) {
    problems.add(ErrorKind::usage, "--command holds a NUL byte, which no shell can run");
  }
  if (r.max_restarts < 0 || r.max_restarts > k_max_restarts_limit) {
    problems.add(ErrorKind::usage, "--max-restarts " + std::to_string(r.max_restarts) +
                                       " is out of range: give 0 to " +
                                       std::to_string(k_max_restarts_limit));
  }
  if (r.termination_grace_ms < 0 || r.termination_grace_ms > k_max_grace_seconds * 1000) {
    problems.add(ErrorKind::usage,
                 "--termination-grace-period-seconds " +
                     std::to_string(r.termination_grace_ms / 1000) +
                     " is out of range: give 0 to " + std::to_string(k_max_grace_seconds) +
                     " (the seconds a stopped job has between TERM and KILL to checkpoint)");
  }
  if (r.failure_grace_ms < 0 || r.failure_grace_ms > k_max_grace_seconds * 1000) {
    problems.add(ErrorKind::usage,
                 "--failure-grace-period-seconds " + std::to_string(r.failure_grace_ms / 1000) +
                     " is out of range: give 0 to " + std::to_string(k_max_grace_seconds) +
                     " (the seconds the workers left have between TERM and KILL when a peer "
                     "failed or its host was lost)");
  }
  if (r.ttl_after_finished_ms < -1 || r.ttl_after_finished_ms > k_max_ttl_seconds * 1000) {
    problems.add(ErrorKind::usage,
                 "--ttl-seconds-after-finished " + std::to_string(r.ttl_after_finished_ms / 1000) +
                     " is out of range: give 0 to " + std::to_string(k_max_ttl_seconds) +
                     " (leave it out to keep a finished workload until deleted)");
  }
  if (r.max_repairs < 0 || r.max_repairs > k_max_restarts_limit) {
    problems.add(ErrorKind::usage, "--max-repairs " + std::to_string(r.max_repairs) +
                                       " is out of range: give 0 (a lost worker fails the "
                                       "workload) to " +
                                       std::to_string(k_max_restarts_limit));
  }
  if (!r.restart_on_exit_codes.empty()) {
    if (auto codes = parse_exit_codes(r.restart_on_exit_codes); !codes) {
      problems.add(codes.error());
    }
  }
  if (r.timeout_ms < 0) {
    problems.add(ErrorKind::usage, "--timeout must not be negative");
  }
  if (r.hang_timeout_ms < 0 || (r.hang_timeout_ms > 0 && r.hang_timeout_ms < 1000)) {
    problems.add(ErrorKind::usage, "--hang-timeout must be 1s or more (0, or leaving it out: "
                                   "max(60s, 20 x the ideal step))");
  }
  if (r.on_straggler != "none" && r.on_straggler != "swap") {
    problems.add(ErrorKind::usage, "--on-straggler '" + util::printable(r.on_straggler) +
                                       "' is not an action: use none (name it) or swap (its "
                                       "host drained, its slice repaired on a spare)");
  }
  if (r.straggler_interval_ms < 10'000) {
    problems.add(ErrorKind::usage,
                 "--straggler-interval " + util::format_duration(std::chrono::milliseconds(
                                               std::max<int64_t>(0, r.straggler_interval_ms))) +
                     " is too short: give 10s or more (each worker is sampled twice a second)");
  }
  if (!r.checkpoint_dir.empty() &&
      (r.checkpoint_dir.front() != '/' ||
       r.checkpoint_dir.find_first_of(std::string_view("\0\n", 2)) != std::string::npos)) {
    problems.add(ErrorKind::usage, "--checkpoint-dir '" + util::printable(r.checkpoint_dir) +
                                       "' is not an absolute path: give the directory every "
                                       "worker shares, e.g. /mnt/shared/ckpt");
  }
  if (auto v = validate_python_env(r.python_env, "--python-env"); !v) {
    problems.add(v.error());
  }
  if (!r.step_pattern.empty()) {
    if (auto re = agent::compile_step_pattern(r.step_pattern); !re) {
      problems.add(re.error());
    }
  }
  if (!r.container.image.empty() || !r.app_files.empty()) {
    if (auto v = validate_container(r.container); !v) {
      problems.add(v.error());
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return tpuctl::ok();
}

// The slices the request asks for, checked against its cluster. Errors: usage.
Expected<int> slices_asked(const Cluster& c, const std::string& tpu_type, int num_slices) {
  const std::string shape = c.tpu_type + " x " + std::to_string(c.num_slices);
  if (!tpu_type.empty()) {
    TPUCTL_TRY_ASSIGN(auto type, topology::parse_accelerator_type(tpu_type));
    if (type.name != c.tpu_type) {
      return usage_error("--tpu-type " + util::printable(tpu_type) + " does not match cluster '" +
                         c.name + "' (" + shape +
                         "): a workload runs on its cluster's slices; leave the flag out, or "
                         "create a cluster of that type");
    }
  }
  if (num_slices == k_all_slices) {
    return c.num_slices;
  }
  if (num_slices < 1 || num_slices > c.num_slices) {
    return usage_error("--num-slices " + std::to_string(num_slices) + " is not a number of " +
                       "slices of cluster '" + c.name + "' (" + shape + "): give 1 to " +
                       std::to_string(c.num_slices) + ", or 'all'; grow the cluster with " +
                       "'tpuctl cluster create --cluster " + c.name + " --tpu-type " + c.tpu_type +
                       " --num-slices N'");
  }
  return num_slices;
}

// The straggler intervals of a monitor (workload_straggler.hpp): each worker's busy counters
// (cumulative for the attempt, from its agent) when the interval began and now.
// The workers' counters, marked every tenth of an interval: each decision looks at the last
// whole interval (a sliding window), so a worker that starts to lag is named within about half
// an interval of it, wherever in a window it began (a tumbling window took up to two).
struct StragglerWindow {
  int attempt = -1;
  int64_t started_ms = 0; // since when every worker of the attempt runs
  std::deque<std::pair<int64_t, std::vector<BusySample>>> marks; // oldest first
  std::vector<BusySample> latest;
};

// Folds this turn's counters in; when the interval is over (and every worker of the attempt is
// RUNNING), decides it: each worker's mark, the workload's verdict, and an event when the set of
// stragglers changed (returned, for the next write).
struct StragglerTurn {
  std::optional<state::Op> event;   // the set of stragglers changed
  std::vector<std::string> swap;    // --on-straggler swap: their hosts, to drain and repair
  std::string why;                  // what was found, for the recovery's reason
};

StragglerTurn straggler_turn(Workload& wl, StragglerWindow& win,
                             const std::vector<std::optional<WorkerObservation>>& obs,
                             int64_t now, const MonitorOptions& o) {
  StragglerTurn turn;
  if (win.attempt != wl.attempt || win.latest.size() != wl.workers.size()) {
    win = StragglerWindow{};
    win.attempt = wl.attempt;
    win.started_ms = now;
    win.latest.assign(wl.workers.size(), BusySample{});
  }
  for (size_t i = 0; i < obs.size() && i < win.latest.size(); ++i) {
    if (obs[i] && obs[i]->attempt == wl.attempt && obs[i]->progress.is_object()) {
      win.latest[i] = {obs[i]->progress.value("samples", int64_t{0}),
                       obs[i]->progress.value("busy", int64_t{0})};
    }
  }
  const bool all_running =
      std::all_of(wl.workers.begin(), wl.workers.end(), [&](const WorkloadWorker& x) {
        return x.state == WorkerState::running && x.attempt == wl.attempt;
      });
  const int64_t span = wl.straggler_interval_ms;
  const int64_t step = std::max<int64_t>(500, span / 10);
  if (!all_running) {
    win.marks.clear(); // an interval counts only while every worker runs
    win.started_ms = now;
    return turn;
  }
  if (!win.marks.empty() && now - win.marks.back().first < step) {
    return turn;
  }
  win.marks.emplace_back(now, win.latest);
  // The base: the newest mark at least one interval old (older ones are no longer needed).
  while (win.marks.size() > 1 && now - win.marks[1].first >= span) {
    win.marks.pop_front();
  }
  if (now - win.marks.front().first < span) {
    return turn; // not a whole interval of every worker running yet
  }
  const auto& [base_ms, base] = win.marks.front();
  std::vector<BusySample> delta(win.latest.size());
  for (size_t i = 0; i < delta.size(); ++i) {
    delta[i] = {win.latest[i].samples - base[i].samples, win.latest[i].busy - base[i].busy};
  }
  const int64_t interval = now - base_ms;
  const auto found = find_stragglers(delta, interval);
  std::vector<std::string> before, after;
  nlohmann::json list = nlohmann::json::array();
  for (auto& x : wl.workers) {
    if (!x.straggler.empty()) {
      before.push_back(describe_worker(x));
    }
    x.straggler.clear();
  }
  for (const auto& f : found) {
    auto& x = wl.workers[f.worker];
    x.straggler = f.evidence;
    after.push_back(describe_worker(x));
    list.push_back(nlohmann::json{{"worker", describe_worker(x)},
                                  {"index", f.worker},
                                  {"share", f.share},
                                  {"peers", f.peers},
                                  {"score", f.score},
                                  {"evidence", f.evidence}});
  }
  // Kept as of the last change, refreshed once an interval (a decision every tenth of one would
  // rewrite the record as often).
  const int64_t said_at =
      wl.stragglers.is_object() ? wl.stragglers.value("at_ms", int64_t{0}) : int64_t{0};
  if (after != before || now - said_at >= span) {
    wl.stragglers = nlohmann::json{
        {"at_ms", now}, {"attempt", wl.attempt}, {"interval_ms", interval}, {"found", list}};
  }
  if (wl.on_straggler == "swap") {
    for (const auto& f : found) {
      turn.swap.push_back(wl.workers[f.worker].host);
      turn.why += (turn.why.empty() ? "" : "; ") + describe_worker(wl.workers[f.worker]) +
                  " is a straggler (" + f.evidence + ")";
    }
  }
  if (after == before) {
    return turn;
  }
  std::string message;
  for (const auto& f : found) {
    message += (message.empty() ? "" : "; ") + describe_worker(wl.workers[f.worker]) +
               " is a straggler: " + f.evidence;
  }
  if (message.empty()) {
    message = "no straggler any more (" + util::join(before, ", ") + " caught up)";
  }
  say(o, message);
  turn.event = state_event(wl, wl.state, wl.state, now,
                           found.empty() ? "STRAGGLER_CLEARED" : "STRAGGLER", message);
  return turn;
}

// A hang (workload_hang.hpp): every worker's Python stacks gathered through the streams (into
// each worker's log, and here into the monitor's), the worker whose stack differs named, and
// the job's failure decided as any other: restarted while --max-restarts allows, else FAILED.
Decision hang_decision(Workload& wl, const std::string& why, WorkerWatch& watch,
                       const MonitorOptions& o) {
  say(o, "hung: " + why + ": gathering every worker's Python stacks");
  const auto dumps = watch.dump_stacks(Ms(10000));
  for (size_t i = 0; i < dumps.size() && i < wl.workers.size(); ++i) {
    say(o, describe_worker(wl.workers[i]) + ": " +
               (dumps[i] ? "Python stacks:\n" + *dumps[i] : std::string("no answer")));
  }
  const auto odd = odd_stack(dumps);
  std::string who = "no single worker's stack differs";
  if (odd && odd->worker < wl.workers.size()) {
    who = describe_worker(wl.workers[odd->worker]) + "'s stack differs: it is at " + odd->where +
          " while the others are at " + odd->others;
  }
  const std::string message =
      "hung: " + why + "; " + who + " (every worker's stacks: tpuctl workload logs " + wl.name + ")";
  wl.hang = nlohmann::json{{"at_ms", now_of(o)},
                           {"attempt", wl.attempt},
                           {"why", why},
                           {"worker", odd && odd->worker < wl.workers.size()
                                          ? describe_worker(wl.workers[odd->worker])
                                          : std::string()},
                           {"where", odd ? odd->where : std::string()}};
  Decision d = job_failure(wl, message);
  if (odd) {
    d.culprits.push_back(odd->worker);
  }
  return d;
}

// After the stop of a failed attempt every worker's end is known: which ones the stop ended,
// and when the others ended by themselves. The failure is decided again on that, so the worker
// that failed first is the one named (and whose exit code counts), whichever line reached the
// monitor first: a JAX process that dies takes its peers with it a moment later.
// A worker still unheard of after the stop may be the cause (a host that died: its stream ended
// before its peers died of it), so the decision waits until every worker has ended or is known
// LOST, at most lost_after and a check's time.
void settle_after_stop(Workload& wl, WorkerWatch& watch, const MonitorOptions& o, Decision& d) {
  Workload after = wl;
  auto open = [&]() {
    return std::any_of(after.workers.begin(), after.workers.end(), [](const WorkloadWorker& x) {
      return x.state == WorkerState::running || x.state == WorkerState::pending;
    });
  };
  const auto until = std::chrono::steady_clock::now() + o.policy.lost_after + Ms(6000);
  do {
    watch.wait_for_news(Ms(1000));
    const auto observations = watch.turn();
    const int64_t now = now_of(o);
    if (!observations.empty()) {
      fold_steps(wl, observations[0]); // process 0's last steps came before its stop's answer
    }
    for (size_t i = 0; i < after.workers.size() && i < observations.size(); ++i) {
      if (observations[i]) {
        auto& x = after.workers[i];
        const bool was_lost = x.state == WorkerState::lost;
        observe(x, *observations[i], wl.attempt, wl.attempt_started_ms, now, o.policy);
        if (!was_lost && x.state == WorkerState::lost && observations[i]->reached) {
          // Its host answers: what ended its supervisor was the stop, not a lost host.
          x.state = WorkerState::stopped;
          x.stopped = true;
        }
      }
    }
  } while (open() && std::chrono::steady_clock::now() < until);
  Decision again = decide(after, now_of(o));
  if (again.verdict == Verdict::fail || again.verdict == Verdict::restart) {
    d = std::move(again);
    wl.workers = std::move(after.workers);
  }
}

} // namespace

bool needs_monitor(const Workload& wl, int64_t now_ms) {
  if (is_terminal(wl.state) || wl.deleting) {
    return false;
  }
  auto lease = lease_from_json(wl.monitor);
  // This process's own lease counts as free: `workload wait` watches in short turns, and must
  // take the next turn after its own (it would otherwise wait for itself until it exits).
  return !lease || !lease_alive(*lease, now_ms) || is_own_lease(*lease);
}

Expected<std::optional<std::string>>
workload_ssh_refusal(state::StateStore& store, const Workload& wl, const MonitorOptions& o) {
  TPUCTL_TRY_ASSIGN(auto record, store.get(state::pool_key(wl.pool)));
  TPUCTL_TRY_ASSIGN(PoolInfo info, pool_from_json(record.doc));
  return ssh_work_refusal(store, info, wl.owner, o.as_controller);
}

Expected<Workload> create_workload(state::StateStore& store, const WorkloadRequest& r,
                                   const MonitorOptions& o) {
  TPUCTL_TRY(validate_request(r));
  TPUCTL_TRY_ASSIGN(Cluster cluster, load_cluster(store, r.pool, r.cluster));
  if (!r.project.empty() && r.project != cluster.project) {
    return Error(ErrorKind::usage, "cluster '" + cluster.name + "' is charged to project '" +
                                       cluster.project + "', not '" + util::printable(r.project) +
                                       "': a workload is charged to its cluster's project (drop "
                                       "--project, or use a cluster of project '" +
                                       util::printable(r.project) + "')");
  }
  TPUCTL_TRY_ASSIGN(const int slices, slices_asked(cluster, r.tpu_type, r.num_slices));
  Workload wl;
  wl.name = r.name;
  wl.pool = r.pool;
  wl.uid = util::random_hex_id();
  wl.cluster = cluster.name;
  wl.queued_resource = cluster.queued_resource;
  wl.command = r.command;
  wl.env = r.env;
  wl.secrets = r.secrets;
  wl.ssh = r.ssh;
  wl.env_profile = r.env_profile;
  wl.fail_policy = r.fail_policy;
  wl.max_restarts = r.max_restarts;
  wl.timeout_ms = r.timeout_ms;
  wl.termination_grace_ms = r.termination_grace_ms;
  wl.failure_grace_ms = r.failure_grace_ms;
  wl.max_repairs = r.max_repairs;
  wl.ttl_after_finished_ms = r.ttl_after_finished_ms;
  wl.priority = r.priority;
  wl.num_slices = slices;
  if (!r.restart_on_exit_codes.empty()) {
    wl.restart_on_exit_codes = to_string(*parse_exit_codes(r.restart_on_exit_codes));
  }
  wl.container = r.container;
  wl.container.app = !r.app_files.empty();
  wl.python_env = r.python_env;
  wl.checkpoint_dir = r.checkpoint_dir;
  wl.step_pattern = r.step_pattern;
  wl.hang_timeout_ms = r.hang_timeout_ms;
  wl.straggler_interval_ms = r.straggler_interval_ms;
  wl.on_straggler = r.on_straggler;
  wl.created_at_ms = now_of(o);
  wl.owner = store.actor();
  wl.project = cluster.project;
  wl.state = WorkloadState::queued;
  wl.message = "waiting for its first pass through the queue of cluster " + cluster.name;
  enter(wl.time, TimePhase::queued, wl.created_at_ms);
  // Every slice of the cluster (it may be admitted onto any): ACTIVE, environment valid.
  TPUCTL_TRY_ASSIGN(auto plans, plan_workload(store, wl));
  for (const auto& p : plans) {
    TPUCTL_TRY(remote::check_command_length(launch_command(wl, p))); // before anything is stored
  }
  if (!wl.checkpoint_dir.empty() && !r.dry_run) {
    TPUCTL_TRY(check_shared_dir(wl.checkpoint_dir, plans, o.ssh));
  }
  std::string dry_note; // a dry run's note on what the workers lack
  if (!wl.container.image.empty()) {
    say(o, "asking " + util::counted(plans.size(), "worker") + " for docker or podman");
    auto runtime = choose_runtime(wl.container, plans, o.ssh);
    if (!runtime && !r.dry_run) {
      return runtime.error();
    }
    if (runtime) {
      wl.container.runtime = *runtime;
    } else { // a dry run shows what would run where once a runtime is there, and why not yet
      wl.container.runtime = wl.container.runtime == "auto" ? "docker" : wl.container.runtime;
      dry_note = runtime.error().message;
    }
  }
  if (r.dry_run) {
    // What it would run on the first slices, were they free: it never waits for the queue, and
    // what the workers lack is a note (the message), not a failure.
    for (int s = 0; s < slices; ++s) {
      wl.slices.push_back(s);
    }
    wl.message = dry_note;
    return wl;
  }
  if (!r.app_files.empty()) {
    // To every host of the cluster: the queue may place it on any slice, now or after an eviction.
    say(o, "copying the script dir (" + util::counted(r.app_files.size(), "file") + ") to " +
               util::counted(plans.size(), "worker"));
    TPUCTL_TRY(push_app_files(r.app_files, plans, wl.uid, o.ssh));
  }
  wl.monitor = to_json(own_lease(wl.created_at_ms, o.lease_ttl));
  auto created = store.commit(
      {state::CreateOp{workload_key(r.pool, r.name), to_json(wl)},
       state_event(wl, WorkloadState::queued, WorkloadState::queued, wl.created_at_ms, "CREATED",
                   "created on cluster " + cluster.name + ", priority " +
                       priority_name(wl.priority) + ", " + util::counted(slices, "slice"))});
  if (!created) {
    if (!r.app_files.empty()) {
      (void)remove_workload_files(wl, plans, o.ssh); // the copied script dir, best effort
    }
    Error e = created.error();
    if (state::has_reason(e, state::reason::k_already_exists)) {
      e.message = "workload '" + r.name + "' already exists in pool '" + r.pool +
                  "' (delete it with 'tpuctl workload delete " + r.name +
                  "', or pick another name)";
    }
    return e;
  }
  // Started by whoever the pool lets do its SSH work: when that is not this process (the pool's
  // controller does it), it waits QUEUED, saying so, for the controller's monitor.
  TPUCTL_TRY_ASSIGN(auto refusal, workload_ssh_refusal(store, wl, o));
  if (refusal) {
    TPUCTL_TRY_ASSIGN(auto waiting, mutate(store, r.pool, r.name, true, [&](Workload& w) {
                        w.monitor = nlohmann::json::object();
                        w.message = *refusal;
                        return std::optional<std::vector<state::Op>>(std::vector<state::Op>{});
                      }));
    if (!waiting.workload) {
      return Error(ErrorKind::failure, "workload '" + r.name + "' was deleted while it was queued");
    }
    return *waiting.workload;
  }
  // Its first pass: admitted at once when its slices are free (or others can be evicted).
  admit_quietly(store, wl, o);
  TPUCTL_TRY_ASSIGN(auto now, mutate(store, r.pool, r.name, true, [&](Workload& w) {
                      if (w.state != WorkloadState::queued) {
                        return std::optional<std::vector<state::Op>>();
                      }
                      w.monitor = nlohmann::json::object(); // its monitor waits in the queue
                      return std::optional<std::vector<state::Op>>(std::vector<state::Op>{});
                    }));
  if (now.skipped != Skip::none || now.workload->state != WorkloadState::pending) {
    if (now.skipped == Skip::gone) {
      return Error(ErrorKind::failure, "workload '" + r.name + "' was deleted while it was queued");
    }
    return *now.workload;
  }
  TPUCTL_TRY_ASSIGN(Started started, start_admitted(store, *now.workload, o, false));
  if (!started.workload || started.workload->deleting) {
    return Error(ErrorKind::failure, "workload '" + r.name + "' was deleted while it was starting");
  }
  return *started.workload;
}

namespace {

// The store's revision now (0 when it cannot be read: the next wait then wakes at once).
int64_t store_revision(state::StateStore& store, const std::string& pool) {
  auto rev = store.wait_for_change(pool, 0, Ms(0));
  return rev ? *rev : 0;
}

// Watches a RUNNING or RECOVERING workload (its lease held) until it ends, is deleted or gone, or
// leaves those states (evicted: stopped through the streams and requeued here when the eviction is
// seen at a turn; any other way, the caller carries it out). `plans`: its workers, when known.
Expected<std::optional<Workload>> monitor_loop(state::StateStore& store, Workload wl,
                                               std::optional<std::vector<WorkerPlan>> plans,
                                               const MonitorOptions& o,
                                               const remote::CancelToken* cancel) {
  const std::string pool = wl.pool;
  const std::string name = wl.name;
  // The workers' streams, for the plans of the current attempt's slices (workload_watch.hpp).
  // Kept through a restart and a recovery (retargeted to the next attempt's workers), so the
  // next attempt starts through the streams of the workers that did not move.
  std::unique_ptr<WorkerWatch> watch;
  auto replan = [&]() { plans.reset(); };
  int64_t last_write = now_of(o);
  int64_t last_visit = 0;
  StragglerWindow stragglers;
  std::vector<state::Op> pending_events; // written with the next visit
  // A change to the store (a delete's mark, a slice's state) makes the next turn visit it.
  int64_t revision = store_revision(store, pool);
  while (!(cancel && cancel->cancelled())) {
    if (wl.state != WorkloadState::running && wl.state != WorkloadState::recovering) {
      return std::optional<Workload>(wl); // queued, admitted or evicted: the caller's
    }
    if (wl.state == WorkloadState::recovering) {
      TPUCTL_TRY_ASSIGN(
          RecoveryStep r,
          recovery_step(store, wl, o, o.start_through_streams ? watch.get() : nullptr));
      if (!r.workload || r.workload->deleting || is_terminal(r.workload->state)) {
        return r.workload;
      }
      wl = *r.workload;
      if (wl.state == WorkloadState::running && !r.watch_kept) {
        watch.reset();
      }
      plans = std::move(r.plans);
      if (wl.state != WorkloadState::running) {
        sleep_for(o.poll_interval, cancel);
      }
      continue;
    }
    // The slices under the current attempt: still there, on their way back, or gone. Read here
    // when there is no plan yet; while the workers run, at each of the turn's store visits below.
    SliceCheck slices;
    if (!plans) {
      TPUCTL_TRY_ASSIGN(slices, check_slices(store, wl));
    }
    if (slices.status == SliceStatus::intact && !plans) {
      auto planned = plan_workload(store, wl);
      if (!planned) {
        const std::string why = planned.error().message;
        TPUCTL_TRY_ASSIGN(auto f, mutate(store, pool, name, true, [&](Workload& w) {
                            return finish(w, WorkloadState::failed, why, now_of(o));
                          }));
        return gone_or(f);
      }
      plans = std::move(*planned);
      if (watch && !watch->retarget(wl, *plans)) {
        watch.reset();
      }
    }
    if (slices.status != SliceStatus::intact) {
      // Preempted (or provisioned again behind its back): come back with it, or end.
      const bool back = slices.status == SliceStatus::coming_back;
      say(o, (back ? "recovering: " : "failing: ") + slices.why);
      TPUCTL_TRY_ASSIGN(auto f, mutate(store, pool, name, true, [&](Workload& w) {
                          if (!back) {
                            // Workers of a deleted slice are lost, and say why.
                            for (auto& x : w.workers) {
                              if (std::find(slices.deleted_nodes.begin(),
                                            slices.deleted_nodes.end(),
                                            x.node) != slices.deleted_nodes.end() &&
                                  x.state != WorkerState::succeeded) {
                                x.state = WorkerState::lost;
                                x.detail = "its slice '" + x.node + "' was deleted";
                              }
                            }
                            return finish(w, WorkloadState::failed,
                                          "its slices are gone: " + slices.why, now_of(o));
                          }
                          return std::optional<std::vector<state::Op>>(
                              begin_recovery(w, now_of(o), slices.why, {}));
                        }));
      if (f.skipped != Skip::none || !f.workload || is_terminal(f.workload->state)) {
        return gone_or(f);
      }
      wl = *f.workload;
      replan();
      continue;
    }
    if (!watch) {
      watch = std::make_unique<WorkerWatch>(wl, *plans, o.ssh, o.policy);
    }
    const auto observations = watch->turn();
    const int64_t now = now_of(o);
    if (!observations.empty()) {
      fold_steps(wl, observations[0]); // the goodput ledger, from process 0's steps
    }
    StragglerTurn straggle = straggler_turn(wl, stragglers, observations, now, o);
    if (straggle.event) {
      pending_events.push_back(std::move(*straggle.event));
      last_visit = 0; // said at once: describe, list and the event log
    }
    if (!straggle.swap.empty() && wl.repairs < wl.max_repairs) {
      // --on-straggler swap: the straggler's host goes as a lost one's does (drained, its slice
      // placed again, on a spare when the pool holds one), every worker restarting.
      say(o, "swapping out: " + straggle.why);
      stop_attempt(wl, *plans, watch.get(), o);
      const std::string why = "swapping out " + straggle.why;
      TPUCTL_TRY_ASSIGN(auto r, mutate(store, pool, name, true, [&](Workload& w) {
                          w.steps = wl.steps;
                          w.stragglers = wl.stragglers;
                          auto ops = begin_recovery(w, now_of(o), why, straggle.swap);
                          ops.insert(ops.end(), pending_events.begin(), pending_events.end());
                          pending_events.clear();
                          return std::optional<std::vector<state::Op>>(std::move(ops));
                        }));
      if (r.skipped != Skip::none) {
        return gone_or(r);
      }
      wl = *r.workload;
      replan();
      continue;
    }
    // What the turn means, worked out on this process's copy first: a turn that changes nothing
    // (heartbeats only) does not visit the store, which is read (and the lease refreshed) every
    // k_visit_ms all the same: at 256 workers, reading the records every second was most of the
    // monitor's cost.
    std::vector<WorkloadWorker> seen = wl.workers;
    for (size_t i = 0; i < seen.size() && i < observations.size(); ++i) {
      if (observations[i]) {
        observe(seen[i], *observations[i], wl.attempt, wl.attempt_started_ms, now, o.policy);
      }
    }
    Workload guess = wl;
    guess.workers = seen;
    if (decide(guess, now).verdict == Verdict::keep_running && same_view(wl.workers, seen) &&
        now - last_visit < k_visit_ms) {
      wl.workers = std::move(seen);
      // Until the next turn: a worker's news (its job exited) or a change to the store (a
      // delete, an eviction) ends the wait early, each noticed within 150 ms.
      const auto next_turn = std::chrono::steady_clock::now() + o.poll_interval;
      while (std::chrono::steady_clock::now() < next_turn && !(cancel && cancel->cancelled())) {
        if (watch->wait_for_news(Ms(150))) {
          break;
        }
        auto changed = store.wait_for_change(pool, revision, Ms(0));
        if (changed && *changed != revision) {
          revision = *changed;
          last_visit = 0; // look at it at once
          break;
        }
      }
      continue;
    }
    last_visit = now;
    // A slice deleted while its workers ran is the reason they ended (tpu-vm delete kills them
    // after it removed the node): the top of the loop says so, not their exit status.
    TPUCTL_TRY_ASSIGN(SliceCheck after, check_slices(store, wl));
    if (after.status != SliceStatus::intact) {
      replan();
      continue;
    }
    std::vector<WorkloadWorker> before = wl.workers;
    Decision d;
    auto step =
        mutate(store, pool, name, true, [&](Workload& w) -> std::optional<std::vector<state::Op>> {
          w.steps = wl.steps; // this monitor's, kept under its lease
          w.stragglers = wl.stragglers;
          for (size_t i = 0; i < w.workers.size() && i < wl.workers.size(); ++i) {
            if (w.workers[i].host == wl.workers[i].host) {
              w.workers[i].straggler = wl.workers[i].straggler;
            }
          }
          for (size_t i = 0; i < w.workers.size() && i < observations.size(); ++i) {
            if (observations[i]) {
              observe(w.workers[i], *observations[i], w.attempt, w.attempt_started_ms, now,
                      o.policy);
            }
            if (i < seen.size() && seen[i].host == w.workers[i].host) {
              // What the turns that did not visit the store heard.
              w.workers[i].last_contact_ms =
                  std::max(w.workers[i].last_contact_ms, seen[i].last_contact_ms);
              w.workers[i].last_heartbeat_ms =
                  std::max(w.workers[i].last_heartbeat_ms, seen[i].last_heartbeat_ms);
            }
          }
          d = decide(w, now);
          if (d.verdict == Verdict::succeeded) {
            return finish(w, WorkloadState::succeeded, d.message, now);
          }
          if (d.verdict == Verdict::keep_running && same_view(before, w.workers) &&
              now - last_write < k_refresh_ms && pending_events.empty()) {
            return std::nullopt; // nothing new: no write
          }
          w.monitor = to_json(own_lease(now, o.lease_ttl));
          return std::exchange(pending_events, {});
        });
    if (!step) {
      spdlog::warn("workload '{}': {}", name, step.error().message);
      sleep_for(o.poll_interval, cancel);
      continue;
    }
    if (step->skipped == Skip::evicting) {
      return evict_workload(store, *step->workload, plans ? &*plans : nullptr, watch.get(), o);
    }
    if (step->skipped == Skip::deleting && watch) {
      auto lease = lease_from_json(step->workload->monitor);
      if (lease && is_own_lease(*lease)) {
        return stop_for_delete(store, *step->workload, *watch, o);
      }
    }
    if (step->skipped != Skip::none) {
      return gone_or(*step);
    }
    revision = store_revision(store, pool); // its own write is no change to look at
    if (step->workload->version != wl.version) {
      last_write = now;
    }
    wl = *step->workload;
    if (!same_view(before, wl.workers)) {
      for (size_t i = 0; i < wl.workers.size(); ++i) {
        if (i >= before.size() || before[i].state != wl.workers[i].state) {
          say(o, describe_worker(wl.workers[i]) + ": " +
                     std::string(to_string(wl.workers[i].state)) +
                     (wl.workers[i].state == WorkerState::failed
                          ? " (exit " + std::to_string(wl.workers[i].exit_code) + ")"
                          : ""));
        }
      }
    }
    if (d.verdict == Verdict::keep_running && watch) {
      if (auto hung = hang_check(wl, now)) {
        d = hang_decision(wl, *hung, *watch, o);
      }
    }
    if (d.verdict == Verdict::succeeded) {
      say(o, "workload '" + name + "' SUCCEEDED: " + d.message);
      admit_quietly(store, wl, o); // its slices go to the next in the queue before anything else
      return std::optional<Workload>(wl);
    }
    if (d.verdict == Verdict::fail || d.verdict == Verdict::restart) {
      // A peer that failed or was lost leaves a job that can neither step nor checkpoint: the
      // others get the failure grace; a hang (every worker alive) keeps the full one.
      const bool peer_gone = std::any_of(d.culprits.begin(), d.culprits.end(), [&](size_t i) {
        return wl.workers[i].state == WorkerState::failed ||
               wl.workers[i].state == WorkerState::lost;
      });
      stop_attempt(wl, *plans, watch.get(), o,
                   peer_gone ? std::optional(failure_grace_of(wl)) : std::nullopt);
      if (watch) {
        settle_after_stop(wl, *watch, o, d);
      }
      say(o, (d.verdict == Verdict::fail ? "failing: " : "") + d.message);
    }
    // A restart with a lost worker repairs the slice first (workload_recovery.hpp).
    std::vector<std::string> lost_hosts;
    if (d.verdict == Verdict::restart) {
      for (size_t i : d.culprits) {
        if (wl.workers[i].state == WorkerState::lost) {
          lost_hosts.push_back(wl.workers[i].host);
        }
      }
    }
    if (d.verdict == Verdict::fail) {
      TPUCTL_TRY_ASSIGN(auto f, mutate(store, pool, name, true, [&](Workload& w) {
                          if (w.workers.size() == wl.workers.size()) {
                            w.workers = wl.workers; // as settled after the stop
                          }
                          w.steps = wl.steps;
                          w.hang = wl.hang;
                          return finish(w, WorkloadState::failed, d.message, now_of(o));
                        }));
      admit_quietly(store, wl, o);
      return gone_or(f);
    }
    if (d.verdict == Verdict::restart && !lost_hosts.empty()) {
      TPUCTL_TRY_ASSIGN(auto r, mutate(store, pool, name, true, [&](Workload& w) {
                          w.steps = wl.steps;
                          w.restarts += d.counts_restart ? 1 : 0; // the job failed too
                          return std::optional<std::vector<state::Op>>(
                              begin_recovery(w, now_of(o), d.message, lost_hosts));
                        }));
      if (r.skipped != Skip::none) {
        return gone_or(r);
      }
      wl = *r.workload;
      replan();
      continue;
    }
    if (d.verdict == Verdict::restart) {
      const int64_t restart_at = now_of(o);
      TPUCTL_TRY_ASSIGN(
          auto r, mutate(store, pool, name, true, [&](Workload& w) {
            w.steps = wl.steps;
            w.hang = wl.hang;
            w.restarts += 1;
            w.attempt += 1;
            w.attempt_started_ms = restart_at;
            w.message = d.message;
            w.workers = pending_workers(*plans, w.attempt);
            // The failed attempt's running time is lost; restarting is recovering.
            enter(w.time, TimePhase::recovering, restart_at);
            lose_attempt(w.time);
            return std::optional<std::vector<state::Op>>(std::vector<state::Op>{
                state_event(w, w.state, w.state, restart_at, "RESTARTED", d.message)});
          }));
      if (r.skipped != Skip::none) {
        return gone_or(r);
      }
      wl = *r.workload;
      TPUCTL_TRY_ASSIGN(plans, plan_workload(store, wl)); // TPUCTL_WORKLOAD_ATTEMPT changed
      if (watch && !watch->retarget(wl, *plans)) {
        watch.reset();
      }
      std::vector<size_t> failed;
      TPUCTL_TRY_ASSIGN(
          std::string failure,
          start_attempt(wl, *plans, failed, o, o.start_through_streams ? watch.get() : nullptr));
      TPUCTL_TRY_ASSIGN(auto f, mutate(store, pool, name, true, [&](Workload& w) {
                          if (!failure.empty()) {
                            return finish(w, WorkloadState::failed, failure, now_of(o));
                          }
                          enter(w.time, TimePhase::running, now_of(o));
                          return std::optional<std::vector<state::Op>>(std::vector<state::Op>{});
                        }));
      if (f.skipped != Skip::none || is_terminal(f.workload->state)) {
        if (f.skipped != Skip::none) {
          (void)stop_workers(wl, *plans, o.ssh); // deleted while we launched
        }
        return gone_or(f);
      }
      wl = *f.workload;
    }
    sleep_for(o.poll_interval, cancel);
  }
  return std::optional<Workload>(wl);
}

// Takes the monitor lease (evicting_ok: an eviction half done is finished by the next monitor)
// and carries the workload through the queue and its attempts to its end.
Expected<std::optional<Workload>> run_monitor(state::StateStore& store, const std::string& pool,
                                              const std::string& name, const MonitorOptions& given,
                                              const remote::CancelToken* cancel) {
  bool taken = false;
  MonitorOptions o = given;
  {
    // Only whoever the pool lets do the workload's SSH work watches it (pool/ssh_work.hpp).
    TPUCTL_TRY_ASSIGN(auto found, store.find(workload_key(pool, name)));
    if (!found) {
      return std::optional<Workload>();
    }
    TPUCTL_TRY_ASSIGN(Workload current, workload_from_record(*found));
    TPUCTL_TRY_ASSIGN(auto refusal, workload_ssh_refusal(store, current, o));
    if (refusal) {
      spdlog::info("workload '{}': not monitored here: {}", name, *refusal);
      return std::optional<Workload>(current);
    }
    // Its owner's monitor launches, watches, restarts and repairs it with the SSH settings it
    // was made with (pool/request_ssh.hpp).
    TPUCTL_TRY_ASSIGN(o.ssh, request_ssh(given.ssh, current.ssh, current.owner, store.actor()));
    if (o.provision) {
      TPUCTL_TRY_ASSIGN(o.provision->ssh, request_ssh(given.provision->ssh, current.ssh,
                                                      current.owner, store.actor()));
    }
  }
  TPUCTL_TRY_ASSIGN(auto m,
                    mutate(
                        store, pool, name, false,
                        [&](Workload& w) {
                          taken = false;
                          if (!needs_monitor(w, now_of(o))) {
                            return std::optional<std::vector<state::Op>>();
                          }
                          w.monitor = to_json(own_lease(now_of(o), o.lease_ttl));
                          taken = true;
                          return std::optional<std::vector<state::Op>>(std::vector<state::Op>{});
                        },
                        true));
  if (m.skipped == Skip::gone) {
    return std::optional<Workload>();
  }
  if (m.skipped != Skip::none || !taken) {
    return m.workload;
  }
  Workload wl = *m.workload;
  std::optional<std::vector<WorkerPlan>> plans;
  while (!(cancel && cancel->cancelled())) {
    auto lease = lease_from_json(wl.monitor);
    if (wl.deleting || is_terminal(wl.state) || !lease || !is_own_lease(*lease)) {
      break;
    }
    std::optional<Workload> next;
    switch (wl.state) {
    case WorkloadState::queued: {
      TPUCTL_TRY_ASSIGN(next, wait_in_queue(store, wl, o, cancel));
      break;
    }
    case WorkloadState::pending: {
      TPUCTL_TRY_ASSIGN(Started started, start_admitted(store, wl, o, true));
      next = std::move(started.workload);
      plans = std::move(started.plans);
      break;
    }
    case WorkloadState::evicting: {
      TPUCTL_TRY_ASSIGN(next, evict_workload(store, wl, nullptr, nullptr, o));
      break;
    }
    default: {
      TPUCTL_TRY_ASSIGN(next, monitor_loop(store, wl, std::move(plans), o, cancel));
      plans.reset();
      break;
    }
    }
    if (!next) {
      return std::optional<Workload>();
    }
    wl = std::move(*next);
  }
  if (is_terminal(wl.state)) {
    admit_quietly(store, wl, o); // its slices are free: the next in the queue gets them now
  }
  return std::optional<Workload>(wl);
}

} // namespace

Expected<std::optional<Workload>> monitor_workload(state::StateStore& store,
                                                   const std::string& pool, const std::string& name,
                                                   const MonitorOptions& o,
                                                   const remote::CancelToken* cancel) {
  auto result = run_monitor(store, pool, name, o, cancel);
  if (!result || !*result || (*result)->deleting) {
    if (auto released = release_to_delete(store, pool, name, {}); !released) {
      spdlog::warn("workload '{}': {}", name, released.error().message);
    }
  }
  return result;
}

} // namespace tpuctl::provision
