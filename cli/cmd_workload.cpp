// tpuctl workload: xpk's `workload create/list/describe/delete` (plus logs and wait) on a
// cluster. The command runs on every worker of every slice at once under `tpuctl agent
// supervise`, detached from this client; a monitor applies the failure policy
// (provision/workload/workload_ops.hpp, provision/workload/workload_policy.hpp).
#include <algorithm>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "agent/step_source.hpp"
#include "cli/config.hpp"
#include "cli/exit_codes.hpp"
#include "cli/fanout_output.hpp"
#include "cli/output.hpp"
#include "cli/runtime_options.hpp"
#include "cli/slice_flags.hpp"
#include "cli/ssh_flags.hpp"
#include "cli/state_access.hpp"
#include "cli/values.hpp"
#include "cli/workload_view.hpp"
#include "cli/workload_xpk.hpp"
#include "provision/controller/monitors.hpp"
#include "provision/pool/ownership.hpp"
#include "provision/pool/pools.hpp"
#include "provision/slice/secrets.hpp"
#include "provision/slice/slice_workers.hpp"
#include "provision/slice/worker_select.hpp"
#include "provision/workload/workload_admit.hpp"
#include "provision/workload/workload_ops.hpp"
#include "provision/workload/workload_queue.hpp"
#include "provision/workload/workload_remote.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

namespace {

using provision::Workload;
using provision::WorkloadState;

struct WorkloadFlags {
  std::string cluster;
  std::string name;
  std::string command;
  int max_restarts = 0;
  std::vector<std::string> env;
  std::vector<std::string> env_secrets;
  std::string env_profile = "none";
  std::string python_env;     // --python-env (python_env_setting gives the default)
  std::string checkpoint_dir; // --checkpoint-dir
  std::string step_pattern = agent::k_default_step_pattern; // --step-pattern
  std::string hang_timeout;                                 // --hang-timeout
  std::string straggler_interval = "60s";                   // --straggler-interval
  std::string on_straggler = "none";                        // --on-straggler
  std::string fail_policy = "any";
  std::string timeout;
  std::string worker = "all";
  std::string node = "all";
  bool follow = false;
  int64_t tail_lines = 0; // logs --tail N: each worker's last N lines first
  std::string since;      // logs --since D: only what was written in the last D
  bool force = false;
  bool override_owner = false;
  bool async = false;         // delete: return once it is marked; a detached tpuctl stops it
  int64_t grace_seconds = 30; // --termination-grace-period-seconds / -tgps (xpk's default)
  int64_t failure_grace_seconds = 2; // --failure-grace-period-seconds
  std::string restart_codes;  // --restart-on-exit-codes
  int max_repairs = 3;
  std::optional<int64_t> ttl_seconds; // --ttl-seconds-after-finished (none: kept until deleted)
  // xpk's forms
  std::string flag_name;        // --workload W, for the positional W
  std::string tpu_type;         // --tpu-type / --device-type: checked against the cluster's
  std::string num_slices = "1"; // --num-slices: N of the cluster's slices, or all
  std::string priority = "medium";
  std::string env_file;
  std::string docker_image, base_docker_image, script_dir, docker_name = "jax-tpu";
  std::string container_runtime = "auto";
  bool dry_run = false;
  std::string filter_status = "EVERYTHING", filter_job, wait_for;
  SshFlags ssh;
};

Expected<std::string> workload_name(const WorkloadFlags& f) {
  return positional_or_flag(f.name, f.flag_name, "workload", "W or --workload W");
}

// --dry-run: what each worker would run, and nothing started.
Status print_launch_plan(Context& ctx, const Workload& wl,
                         const std::vector<provision::WorkerPlan>& plans) {
  Json rows = Json::array();
  for (const auto& p : plans) {
    Json row = plan_json(p);
    row["command"] = provision::launch_command(wl, p);
    rows.push_back(std::move(row));
  }
  Json j{{"name", wl.name}, {"uid", wl.uid}, {"dry_run", true}, {"workers", rows}};
  if (!wl.container.image.empty()) {
    j["container"] = Json{{"image", wl.container.image}, {"runtime", wl.container.runtime}};
  }
  TPUCTL_TRY(emit(ctx, j, [&](std::ostream& os, const Json&) {
    os << "dry run: workload '" << wl.name << "' would start on "
       << util::counted(plans.size(), "worker") << " of cluster " << wl.cluster
       << (wl.container.image.empty()
               ? ""
               : " in image " + wl.container.image + " (" + wl.container.runtime + ")")
       << ":\n";
    for (size_t i = 0; i < plans.size(); ++i) {
      os << provision::worker_label(plans[i]) << ": " << rows[i]["command"].get<std::string>()
         << "\n";
    }
  }));
  return tpuctl::ok();
}

// A create that failed: exit 1 when nothing of it was stored; when its record was stored and a
// later step failed (starting the workers, or the disk filled up), the workload as it now is on
// stdout and exit 6 (partial), so a script's exit status never denies what exists.
Expected<int> recorded_or_not(Context& ctx, state::StateStore& store,
                              const provision::WorkloadRequest& r, bool existed, const Error& e) {
  if (existed || r.dry_run || state::has_reason(e, state::reason::k_already_exists) ||
      state::has_reason(e, state::reason::k_store_replaced)) {
    return e;
  }
  auto now = provision::load_workload(store, r.pool, r.name);
  if (!now) {
    return e; // not stored (or not readable now: the failure stands as it was)
  }
  (void)emit(ctx, workload_json(*now),
             [&](std::ostream& os, const Json&) { print_workload(os, *now); });
  return recorded_then_failed(
      "workload '" + r.name + "'", std::string(to_string(now->state)), e,
      "it stays until deleted: see 'tpuctl workload describe " + r.name +
          "' once the cause is fixed, or delete it with 'tpuctl workload delete " + r.name + "'");
}

Expected<int> run_create(Context& ctx, const WorkloadFlags& f) {
  provision::WorkloadRequest r;
  r.name = f.name;
  r.cluster = f.cluster;
  if (!ctx.globals.project.empty()) {
    TPUCTL_TRY_ASSIGN(r.project, charged_project(ctx.globals)); // must be the cluster's
  }
  r.command = f.command;
  r.max_restarts = f.max_restarts;
  r.termination_grace_ms = f.grace_seconds * 1000;
  r.failure_grace_ms = f.failure_grace_seconds * 1000;
  r.restart_on_exit_codes = f.restart_codes;
  r.max_repairs = f.max_repairs;
  if (f.ttl_seconds) {
    // Out of range values are refused below, naming them (multiplied back there).
    r.ttl_after_finished_ms =
        std::clamp<int64_t>(*f.ttl_seconds, -1'000'000'000, 1'000'000'000) * 1000;
  }
  r.dry_run = f.dry_run;
  r.tpu_type = f.tpu_type;
  if (util::to_lower(f.num_slices) == "all") {
    r.num_slices = provision::k_all_slices;
  } else {
    TPUCTL_TRY_ASSIGN(const int64_t n, util::parse_int(f.num_slices, "--num-slices", 1, 1024));
    r.num_slices = static_cast<int>(n);
  }
  TPUCTL_TRY_ASSIGN(r.priority, provision::parse_priority(f.priority));
  TPUCTL_TRY_ASSIGN(r.env, provision::parse_env_items(f.env));
  if (!f.env_file.empty()) {
    TPUCTL_TRY_ASSIGN(auto more, read_env_file(f.env_file));
    r.env.insert(r.env.end(), more.begin(), more.end());
  }
  TPUCTL_TRY_ASSIGN(r.secrets, provision::secrets_from_environment(f.env_secrets));
  TPUCTL_TRY(provision::check_secrets_apart(r.secrets, r.env));
  TPUCTL_TRY(apply_image_flags(
      {f.docker_image, f.base_docker_image, f.script_dir, f.docker_name, f.container_runtime}, r));
  TPUCTL_TRY_ASSIGN(r.env_profile, provision::parse_env_profile(f.env_profile));
  TPUCTL_TRY_ASSIGN(r.python_env, python_env_setting(f.python_env));
  r.checkpoint_dir = f.checkpoint_dir;
  r.step_pattern = f.step_pattern;
  TPUCTL_TRY_ASSIGN(auto hang, util::parse_optional_duration(f.hang_timeout, "--hang-timeout"));
  r.hang_timeout_ms = hang.count();
  TPUCTL_TRY_ASSIGN(auto interval,
                    util::parse_duration(f.straggler_interval, "--straggler-interval"));
  r.straggler_interval_ms = interval.count();
  r.on_straggler = f.on_straggler;
  TPUCTL_TRY_ASSIGN(r.fail_policy, provision::parse_fail_policy(f.fail_policy));
  TPUCTL_TRY_ASSIGN(auto timeout, util::parse_optional_duration(f.timeout, "--timeout"));
  r.timeout_ms = timeout.count();
  TPUCTL_TRY_ASSIGN(auto options, monitor_options(ctx, f.ssh));
  r.ssh = ssh_settings(f.ssh);
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(r.pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto before, store->find(provision::workload_key(r.pool, r.name)));
  auto created = provision::create_workload(*store, r, options);
  if (!created) {
    return recorded_or_not(ctx, *store, r, before.has_value(), created.error());
  }
  auto& wl = *created;
  if (f.dry_run) {
    TPUCTL_TRY_ASSIGN(auto plans, provision::plan_workload(*store, wl));
    TPUCTL_TRY(print_launch_plan(ctx, wl, plans));
    if (!wl.message.empty()) {
      // What a real create would meet on the workers now (no container runtime): a note, since a
      // dry run starts nothing and its answer never depends on the workers' state.
      *ctx.err << "tpuctl: notice: " << wl.message << "\n";
    }
    return 0;
  }
  if (!provision::is_terminal(wl.state)) {
    provision::ensure_monitor(launcher(ctx, f.ssh), *store, wl);
  }
  std::vector<Workload> shown{wl};
  TPUCTL_TRY(provision::fill_queue_view(*store, shown)); // why it waits, and where
  wl = shown.front();
  TPUCTL_TRY(
      emit(ctx, workload_json(wl), [&](std::ostream& os, const Json&) { print_workload(os, wl); }));
  if (wl.state == WorkloadState::failed) {
    return Error(ErrorKind::failure, "workload '" + wl.name + "' FAILED: " + wl.message);
  }
  return 0;
}

Expected<int> wait_for_job(Context& ctx, const WorkloadFlags& f);

Expected<int> run_list(Context& ctx, const WorkloadFlags& f) {
  TPUCTL_TRY_ASSIGN(auto filter, parse_workload_filter(f.filter_status, f.filter_job));
  if (!f.wait_for.empty()) {
    return wait_for_job(ctx, f);
  }
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto all, provision::list_workloads(*store, pool, f.cluster));
  provision::ensure_monitors(launcher(ctx), *store, all);
  TPUCTL_TRY(provision::fill_queue_view(*store, all));
  Json rows = Json::array();
  for (const auto& w : all) {
    if (!matches(filter, w)) {
      continue;
    }
    rows.push_back(workload_json(w));
  }
  TPUCTL_TRY(emit_list(ctx, rows, k_workload_columns, workload_json(Workload{})));
  return 0;
}

Expected<int> run_describe(Context& ctx, const WorkloadFlags& f) {
  TPUCTL_TRY_ASSIGN(auto name, workload_name(f));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto found, provision::load_workload(*store, pool, name));
  provision::ensure_monitor(launcher(ctx, f.ssh), *store, found);
  std::vector<Workload> shown{found};
  TPUCTL_TRY(provision::fill_queue_view(*store, shown));
  const Workload& wl = shown.front();
  TPUCTL_TRY(
      emit(ctx, workload_json(wl), [&](std::ostream& os, const Json&) { print_workload(os, wl); }));
  return 0;
}

// One log line as --output wants it: prefixed "[NODE/WORKER@HOST] line" (no prefix when one
// worker is shown), or jsonl {node, slice, worker, host, line}.
void print_log_line(Context& ctx, FanoutOutput mode, const provision::WorkerPlan& p, bool prefix,
                    std::string_view line) {
  if (mode == FanoutOutput::jsonl) {
    Json j = plan_json(p);
    j["line"] = std::string(line);
    *ctx.out << j.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  } else if (prefix) {
    *ctx.out << prefixed_line(provision::worker_label(p), line);
  } else {
    *ctx.out << line << "\n";
  }
}

Expected<int> run_logs(Context& ctx, const WorkloadFlags& given) {
  WorkloadFlags f = given;
  TPUCTL_TRY_ASSIGN(f.name, workload_name(given));
  TPUCTL_TRY_ASSIGN(auto options, ssh_options(f.ssh));
  TPUCTL_TRY_ASSIGN(auto mode, parse_fanout_output(f.ssh.output));
  if (mode == FanoutOutput::grouped) {
    return usage_error("--output grouped is for ssh; workload logs prints prefixed (default) or "
                       "jsonl");
  }
  provision::LogStart start;
  start.tail_lines = f.tail_lines;
  if (!f.since.empty()) {
    TPUCTL_TRY_ASSIGN(auto d, util::parse_duration(f.since, "--since"));
    start.since_ms = state::to_unix_ms(state::system_clock()()) - d.count();
  }
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto wl, provision::load_workload(*store, pool, f.name));
  TPUCTL_TRY_ASSIGN(auto all, provision::plan_workload(*store, wl));
  int per_node = 0;
  for (const auto& p : all) {
    per_node = std::max(per_node, p.worker + 1);
  }
  TPUCTL_TRY_ASSIGN(auto picked, provision::parse_worker_selection(f.worker, per_node));
  std::vector<provision::WorkerPlan> plans;
  for (const auto& p : all) {
    if ((f.node == "all" || p.node == f.node) &&
        std::find(picked.begin(), picked.end(), p.worker) != picked.end()) {
      plans.push_back(p);
    }
  }
  if (plans.empty()) {
    return Error(ErrorKind::not_found, "--node '" + util::printable(f.node) +
                                           "' is not a slice of cluster '" + wl.cluster + "'");
  }
  if (f.follow) {
    provision::ensure_monitor(launcher(ctx, f.ssh), *store, wl);
  }
  std::vector<uint64_t> offsets(plans.size(), 0);
  // A line not finished yet (the job is writing it) waits here for its end, a later read's.
  std::vector<std::string> partial(plans.size());
  constexpr size_t k_max_held = 1 << 20; // a longer line is printed in pieces
  remote::CancelToken cancel;
  InterruptGuard guard(cancel);
  const bool prefix = plans.size() > 1;
  for (;;) {
    bool finished = !f.follow;
    if (f.follow) {
      auto now = provision::load_workload(*store, pool, f.name);
      finished = !now || provision::is_terminal(now->state);
    }
    // Lines print as they arrive: a log of any size streams through.
    TPUCTL_TRY_ASSIGN(auto results,
                      provision::read_logs(wl, plans, offsets, options, start,
                                           [&](size_t i, std::string_view text, bool complete) {
                                             std::string& held = partial[i];
                                             if (complete && held.empty()) {
                                               print_log_line(ctx, mode, plans[i], prefix, text);
                                               return;
                                             }
                                             held.append(text);
                                             if (complete || held.size() >= k_max_held) {
                                               print_log_line(ctx, mode, plans[i], prefix, held);
                                               held.clear();
                                             }
                                           }));
    for (const auto& r : results) {
      const auto& p = plans[r.index];
      if (!r.succeeded()) {
        if (!ctx.globals.quiet) {
          *ctx.err << "tpuctl: " << provision::worker_label(p) << ": cannot read the log: "
                   << (r.error.empty() ? std::string(remote::to_string(r.outcome)) : r.error)
                   << "\n";
        }
        continue;
      }
      if (finished && !partial[r.index].empty()) { // the last line, never ended by a newline
        print_log_line(ctx, mode, p, prefix, partial[r.index]);
        partial[r.index].clear();
      }
    }
    ctx.out->flush();
    if (finished || cancel.cancelled()) {
      break;
    }
    for (int i = 0; i < 10 && !cancel.cancelled(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return cancel.cancelled() ? guard.exit_status() : 0;
}

// Waits until workload `name` has ended (a monitor is run here when nobody watches it).
// nullopt when `timeout` (0: none) passed first. Errors: not_found, interrupted, the store's.
Expected<std::optional<Workload>> wait_until_done(Context& ctx, const WorkloadFlags& f,
                                                  const std::string& name,
                                                  std::chrono::milliseconds timeout) {
  TPUCTL_TRY_ASSIGN(auto options, monitor_options(ctx, f.ssh));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  remote::CancelToken cancel;
  InterruptGuard guard(cancel);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    TPUCTL_TRY_ASSIGN(auto wl, provision::load_workload(*store, pool, name));
    if (provision::is_terminal(wl.state)) {
      return std::optional<Workload>(wl);
    }
    if (cancel.cancelled()) {
      return Error(ErrorKind::interrupted, "interrupted; workload '" + name + "' runs on");
    }
    if (timeout.count() > 0 && std::chrono::steady_clock::now() - start > timeout) {
      return std::optional<Workload>();
    }
    if (provision::needs_monitor(wl, state::to_unix_ms(state::system_clock()()))) {
      // Nobody watches it: watch it here until it ends, --timeout or Ctrl-C (one watch: its
      // streams cost a round of SSH to open, so it is not reopened in short slices).
      remote::CancelToken slice;
      std::thread stopper([&] {
        auto until =
            timeout.count() > 0 ? start + timeout : std::chrono::steady_clock::time_point::max();
        while (std::chrono::steady_clock::now() < until && !cancel.cancelled() &&
               !slice.cancelled()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        slice.cancel();
      });
      auto watched = provision::monitor_workload(*store, pool, name, options, &slice);
      slice.cancel(); // the stopper's work is done
      stopper.join();
      if (!watched) {
        return watched.error();
      }
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

Expected<int> run_wait(Context& ctx, const WorkloadFlags& f) {
  TPUCTL_TRY_ASSIGN(auto name, workload_name(f));
  TPUCTL_TRY_ASSIGN(auto timeout, util::parse_optional_duration(f.timeout, "--timeout"));
  TPUCTL_TRY_ASSIGN(auto wl, wait_until_done(ctx, f, name, timeout));
  if (!wl) {
    return Error(ErrorKind::capacity,
                 "workload '" + name + "' has not ended after --timeout " + f.timeout);
  }
  TPUCTL_TRY(emit(ctx, workload_json(*wl),
                  [&](std::ostream& os, const Json&) { print_workload(os, *wl); }));
  if (wl->state == WorkloadState::failed) {
    return Error(ErrorKind::failure, "workload '" + name + "' FAILED: " + wl->message);
  }
  return 0;
}

// The workload as it is now when it has ended; nullopt while it runs (xpk's --timeout 0).
Expected<std::optional<Workload>> ended_now(Context& ctx, const std::string& name) {
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto wl, provision::load_workload(*store, pool, name));
  return provision::is_terminal(wl.state) ? std::optional<Workload>(wl) : std::nullopt;
}

// xpk's `workload list --wait-for-job-completion W [--timeout SECONDS]`: exit 0 when it
// SUCCEEDED, 125 when it ended otherwise, 124 on timeout, 1 when there is no such workload.
// --timeout 0 looks once and returns, as xpk's documentation says (0 is not "no limit" there).
Expected<int> wait_for_job(Context& ctx, const WorkloadFlags& f) {
  std::chrono::milliseconds timeout{0};
  if (!f.timeout.empty()) {
    if (auto secs = util::parse_int(f.timeout, "--timeout", 0); secs) {
      timeout = std::chrono::seconds(*secs); // xpk's form: seconds
    } else {
      TPUCTL_TRY_ASSIGN(timeout, util::parse_optional_duration(f.timeout, "--timeout"));
    }
  }
  const bool once = !f.timeout.empty() && timeout.count() == 0;
  // The store's own errors keep their exit codes (4: no store); only a missing workload is 1.
  TPUCTL_TRY(open_state(ctx));
  auto wl = once ? ended_now(ctx, f.wait_for) : wait_until_done(ctx, f, f.wait_for, timeout);
  if (!wl) {
    Error e = wl.error();
    if (e.kind == ErrorKind::not_found) {
      e.kind = ErrorKind::failure; // xpk exits 1 for a workload that does not exist
    }
    return e;
  }
  if (!*wl) {
    *ctx.err << "tpuctl: error: workload '" << f.wait_for << "' has not ended after --timeout "
             << f.timeout << "\n";
    return 124;
  }
  TPUCTL_TRY(emit_list(
      ctx, Json::array({workload_json(**wl)}),
      {{"NAME", "name"}, {"CLUSTER", "cluster"}, {"STATE", "state"}, {"MESSAGE", "message"}}));
  if ((*wl)->state != WorkloadState::succeeded) {
    *ctx.err << "tpuctl: error: workload '" << f.wait_for << "' " << to_string((*wl)->state) << ": "
             << (*wl)->message << "\n";
    return 125;
  }
  return 0;
}

// `workload delete W`, xpk's `--workload W --cluster C`, or, with no workload named, every
// workload of --cluster C that --filter-by-status/--filter-by-job keep (xpk's form).
Expected<int> run_delete(Context& ctx, const WorkloadFlags& f) {
  TPUCTL_TRY_ASSIGN(auto filter, parse_workload_filter(f.filter_status, f.filter_job));
  TPUCTL_TRY_ASSIGN(auto options, monitor_options(ctx, f.ssh));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  std::vector<std::string> names;
  if (!f.name.empty() || !f.flag_name.empty()) {
    TPUCTL_TRY_ASSIGN(auto name, workload_name(f));
    if (!f.cluster.empty()) {
      TPUCTL_TRY_ASSIGN(auto wl, provision::load_workload(*store, pool, name));
      if (wl.cluster != f.cluster) {
        return Error(ErrorKind::not_found,
                     "workload '" + name + "' runs on cluster '" + wl.cluster + "', not '" +
                         f.cluster + "'",
                     "not_found");
      }
    }
    names.push_back(name);
  } else if (f.cluster.empty()) {
    return usage_error("give the workload (W or --workload W), or --cluster C to delete the "
                       "cluster's workloads that --filter-by-status/--filter-by-job keep");
  } else {
    TPUCTL_TRY_ASSIGN(auto all, provision::list_workloads(*store, pool, f.cluster));
    for (const auto& w : all) {
      if (matches(filter, w)) {
        names.push_back(w.name);
      }
    }
  }
  // Another owner's workload needs the intent; every one is checked before any goes.
  std::vector<state::Event> overrides;
  for (const auto& name : names) {
    auto wl = provision::load_workload(*store, pool, name);
    if (!wl) {
      continue; // missing or damaged: the delete's own handling follows
    }
    TPUCTL_TRY(
        provision::check_owner_intent(*store,
                                      provision::OwnedObject{state::Kind::workload, pool, name,
                                                             wl->owner, "workload '" + name + "'"},
                                      "delete", f.override_owner, overrides));
  }
  Json rows = Json::array();
  if (f.async) {
    // A detached tpuctl does the delete (the processes' grace included); this one returns.
    for (const auto& name : names) {
      TPUCTL_TRY_ASSIGN(auto wl, provision::load_workload(*store, pool, name));
      std::vector<std::string> command{"workload", "delete", name};
      if (f.force) {
        command.push_back("--force");
      }
      if (f.override_owner) {
        command.push_back("--override-owner");
      }
      provision::spawn_detached(launcher(ctx, f.ssh), pool, command,
                                "workload-" + name + "-delete.log");
      rows.push_back(Json{{"name", name},
                          {"pool", pool},
                          {"deleted", false},
                          {"state", std::string(to_string(wl.state))},
                          {"worker_count", wl.workers.size()},
                          {"stopped_by_monitor", 0},
                          {"unreachable", Json::array()}});
    }
    TPUCTL_TRY(emit_list(ctx, rows,
                         {{"NAME", "name"}, {"STATE", "state"}, {"WORKER_COUNT", "worker_count"}}));
    if (!ctx.globals.quiet) {
      *ctx.err << "tpuctl: deleting in the background (the grace of "
               << "--termination-grace-period-seconds included); 'tpuctl workload list' shows "
                  "each until it is gone\n";
    }
    return 0;
  }
  for (const auto& name : names) {
    TPUCTL_TRY_ASSIGN(auto deleted,
                      provision::delete_workload(*store, pool, name, f.force, options));
    rows.push_back(Json{{"name", name},
                        {"pool", pool},
                        {"deleted", true},
                        {"state", std::string(to_string(deleted.workload.state))},
                        {"worker_count", deleted.workload.workers.size()},
                        {"stopped_by_monitor", deleted.stopped_by_monitor},
                        {"unreachable", deleted.unreachable}});
  }
  // (With --async the detached tpuctl, given --override-owner, records it once it is done.)
  TPUCTL_TRY(provision::record_overrides(*store, overrides));
  if (rows.size() == 1 && (!f.name.empty() || !f.flag_name.empty())) {
    TPUCTL_TRY(emit(ctx, rows.at(0), [&](std::ostream& os, const Json&) {
      os << "deleted workload '" << names[0] << "' (was " << cell_text(rows[0]["state"])
         << "): its processes on "
         << util::counted(rows[0].value("worker_count", size_t{0}), "worker") << " are stopped\n";
    }));
    return 0;
  }
  TPUCTL_TRY(emit_list(ctx, rows,
                       {{"NAME", "name"}, {"STATE", "state"}, {"WORKER_COUNT", "worker_count"}}));
  return 0;
}

Expected<int> run_monitor(Context& ctx, const WorkloadFlags& f) {
  TPUCTL_TRY_ASSIGN(auto options, monitor_options(ctx, f.ssh));
  options.progress = [](const std::string& line) { spdlog::info("{}", line); };
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Drivers::none));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  remote::CancelToken cancel;
  InterruptGuard guard(cancel);
  TPUCTL_TRY(provision::monitor_workload(*store, pool, f.name, options, &cancel));
  TPUCTL_TRY(provision::delete_after_ttl(*store, pool, f.name, options, &cancel));
  return 0;
}

} // namespace

void setup_workload(CLI::App& group, Registry& registry) {
  auto c = std::make_shared<WorkloadFlags>();
  CLI::App* create =
      registry.add(group, "create", "run a command on every worker of a cluster at once, detached",
                   [c](Context& ctx) { return run_create(ctx, *c); });
  create->add_option("--cluster", c->cluster, "the cluster to run on")->required()->type_name("C");
  create->add_option("--workload", c->name, "the workload's name (lowercase, digits, '-')")
      ->required()
      ->type_name("W");
  create->add_option("--command", c->command, "run by /bin/sh -c on every worker")
      ->required()
      ->type_name("CMD");
  create
      ->add_option("--max-restarts", c->max_restarts,
                   "restart every worker together up to R times on a failure (default 0)")
      ->type_name("R")
      ->check(count_in(0, 1000));
  create
      ->add_option("--restart-on-exit-codes", c->restart_codes,
                   "xpk's rule: only these exit codes (e.g. 3,10-12) and 42, 127-255 restart; any "
                   "other fails at once (default: every failure restarts, up to --max-restarts)")
      ->type_name("CODES");
  create
      ->add_option("--ttl-seconds-after-finished", c->ttl_seconds,
                   "delete the workload S seconds after it SUCCEEDED or FAILED (default: keep it "
                   "until 'workload delete')")
      ->type_name("S");
  create
      ->add_option("--max-repairs", c->max_repairs,
                   "repair a lost worker's slice up to N times, never counted in --max-restarts "
                   "(default 3; 0: a lost worker fails the workload)")
      ->type_name("N");
  create
      ->add_option("--termination-grace-period-seconds", c->grace_seconds,
                   "every stop sends TERM, waits up to S seconds for the job to checkpoint and "
                   "exit, then KILLs (xpk's -tgps; default 30, at most 3600)")
      ->type_name("S");
  create
      ->add_option("--failure-grace-period-seconds", c->failure_grace_seconds,
                   "when a worker failed or its host was lost, the others get the lesser of S "
                   "and -tgps between TERM and KILL: a job missing a peer can neither step nor "
                   "checkpoint (default 2, at most 3600)")
      ->type_name("S");
  create->add_option("--env", c->env, "add KEY=VALUE to every worker's environment (repeatable)")
      ->type_name("K=V");
  create
      ->add_option("--env-secret", c->env_secrets,
                   "add NAME with its value from this environment, kept in the store and sent "
                   "on stdin: never on a command line, in output or logs (repeatable)")
      ->type_name("NAME");
  create
      ->add_option("--env-profile", c->env_profile,
                   "also export torchrun (RANK, WORLD_SIZE, MASTER_ADDR...), slurm or skypilot "
                   "variables, over all slices (default none)")
      ->type_name("P");
  create
      ->add_option("--python-env", c->python_env,
                   "the workers' Python environment, put on PATH (default: config python-env, "
                   "else /opt/tpuctl/frameworks)")
      ->type_name("DIR");
  create
      ->add_option("--checkpoint-dir", c->checkpoint_dir,
                   "a directory every worker shares, checked before each launch and exported as "
                   "TPUCTL_CHECKPOINT_DIR (Orbax's)")
      ->type_name("DIR");
  create
      ->add_option("--step-pattern", c->step_pattern,
                   "log lines matching REGEX are the job's steps, its first group the number "
                   "(default MaxText's 'completed step: (\\d+)'; '' for none): goodput by steps")
      ->type_name("REGEX");
  create
      ->add_option("--hang-timeout", c->hang_timeout,
                   "a job that reports steps and makes none for D while every worker runs is "
                   "hung: its stacks are gathered and it restarts or fails (default: max(60s, "
                   "20 x the ideal step))")
      ->type_name("D");
  create
      ->add_option("--straggler-interval", c->straggler_interval,
                   "how often the workers' busy shares are compared to name the one the job "
                   "waits for (default 60s)")
      ->type_name("D");
  create
      ->add_option("--on-straggler", c->on_straggler,
                   "none (default: name it) or swap (drain its host and repair its slice, on a "
                   "spare when the pool holds one: tpuctl pool spares)")
      ->type_name("ACTION");
  create
      ->add_option("--fail-policy", c->fail_policy,
                   "any (default): one failing worker stops the others; all: fail once every "
                   "worker has ended")
      ->type_name("P");
  create
      ->add_option("--timeout", c->timeout,
                   "fail the workload after it ran this long (0: no limit)")
      ->type_name("D")
      ->check(timeout_duration());
  create
      ->add_option("--env-file", c->env_file,
                   "VAR=value lines (VAR alone: this shell's value) added to the environment")
      ->type_name("FILE");
  create
      ->add_option("--tpu-type,--device-type", c->tpu_type,
                   "checked against the cluster's type (xpk's form; optional here)")
      ->type_name("TYPE");
  create
      ->add_option("--num-slices", c->num_slices,
                   "how many of the cluster's slices it runs on: N (default 1, as xpk) or all")
      ->type_name("N|all")
      ->check(count_or(1, 1024, "all"));
  create
      ->add_option("--priority", c->priority,
                   "very-low, low, medium (default), high or very-high: the queue's order, and "
                   "what it may evict")
      ->type_name("P");
  const char* image = "Container image";
  create->add_option("--docker-image", c->docker_image, "run the command in this image, as is")
      ->type_name("IMAGE")
      ->group(image);
  create
      ->add_option("--base-docker-image", c->base_docker_image,
                   "run in this image with --script-dir mounted at /app")
      ->type_name("IMAGE")
      ->group(image);
  create
      ->add_option("--script-dir", c->script_dir,
                   "copied to every worker for --base-docker-image (default: this directory)")
      ->type_name("DIR")
      ->group(image);
  create->add_option("--docker-name", c->docker_name, "container name prefix (default jax-tpu)")
      ->type_name("NAME")
      ->group(image);
  create
      ->add_option("--container-runtime", c->container_runtime,
                   "auto (default: docker if every worker has it, else podman), docker, podman")
      ->type_name("RT")
      ->group(image);
  create->add_flag("--dry-run", c->dry_run,
                   "check everything, print the command each worker would run; start nothing");
  add_ssh_policy_flags(*create, c->ssh);
  create->footer("Returns once every worker has started (exit 0), or with exit 1 when one could\n"
                 "not start (the others are stopped). Follow it with 'tpuctl workload logs W\n"
                 "--follow' or 'tpuctl workload wait W'.\n\nExamples:\n"
                 "  tpuctl workload create --cluster demo --workload mm \\\n"
                 "    --command 'tpuctl agent spmd-matmul --m 512 --n 512 --k 512'\n"
                 "  tpuctl workload create --cluster demo --workload train --max-restarts 2 \\\n"
                 "    --env XLA_FLAGS=--xla_dump_to=/tmp/dump --command 'python3 train.py'\n"
                 "  tpuctl workload create --cluster demo --workload jax \\\n"
                 "    --docker-image python:3.10 --command 'python3 -c \"import os\"'");

  auto l = std::make_shared<WorkloadFlags>();
  CLI::App* list = registry.add(group, "list", "workloads of the pool: state, running workers",
                                [l](Context& ctx) { return run_list(ctx, *l); });
  list->add_option("--cluster", l->cluster, "only this cluster's workloads")->type_name("C");
  list->add_option("--filter-by-status", l->filter_status,
                   "EVERYTHING (default), RUNNING, QUEUED, FINISHED, FAILED or SUCCESSFUL")
      ->type_name("S");
  list->add_option("--filter-by-job", l->filter_job, "only workloads whose name contains this")
      ->type_name("TEXT");
  list->add_option("--wait-for-job-completion", l->wait_for,
                   "wait until W ends: exit 0 SUCCEEDED, 125 FAILED, 124 timed out, 1 no such W")
      ->type_name("W");
  list->add_option("--timeout", l->timeout,
                   "with --wait-for-job-completion: seconds, or 5m (0: look once and return, as "
                   "xpk; default: no limit)")
      ->type_name("T")
      ->check(timeout_duration());

  auto d = std::make_shared<WorkloadFlags>();
  CLI::App* describe =
      registry.add(group, "describe", "state, per-worker state, exit codes, restarts, heartbeats",
                   [d](Context& ctx) { return run_describe(ctx, *d); });
  describe->add_option("W", d->name, "the workload (or --workload W)");
  describe->add_option("--workload", d->flag_name, "the workload (xpk's form of W)")
      ->type_name("W");
  describe->add_option("--cluster", d->cluster, "accepted for xpk's form")->type_name("C");

  auto g = std::make_shared<WorkloadFlags>();
  CLI::App* logs = registry.add(group, "logs", "print (or --follow) the workers' output",
                                [g](Context& ctx) { return run_logs(ctx, *g); });
  logs->add_option("W", g->name, "the workload (or --workload W)");
  logs->add_option("--workload", g->flag_name, "the workload (xpk's form of W)")->type_name("W");
  logs->add_option("--cluster", g->cluster, "accepted for xpk's form")->type_name("C");
  logs->add_option("--worker", g->worker, "all (default), N, a list (0,2) or a range (1-3)")
      ->type_name("W");
  logs->add_option("--node", g->node, "all (default) or one slice's node id")->type_name("ID");
  logs->add_flag("--follow,-f", g->follow, "keep printing until the workload has ended");
  logs->add_option("--tail", g->tail_lines,
                   "each worker's last N lines only (then, with --follow, what comes)")
      ->type_name("N")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}));
  logs->add_option("--since", g->since,
                   "only what was written in the last D (5m, 2h; to within 2 s), as kubectl")
      ->type_name("D");
  logs->add_option("--output", g->ssh.output,
                   "prefixed (default: [NODE/WORKER@HOST] line when several workers) or jsonl "
                   "(one object a line: node, slice, worker, host, line)")
      ->type_name("MODE");
  add_ssh_policy_flags(*logs, g->ssh);

  auto w = std::make_shared<WorkloadFlags>();
  CLI::App* wait = registry.add(group, "wait", "wait until SUCCEEDED (exit 0) or FAILED (exit 1)",
                                [w](Context& ctx) { return run_wait(ctx, *w); });
  wait->add_option("W", w->name, "the workload (or --workload W)");
  wait->add_option("--workload", w->flag_name, "the workload (xpk's form of W)")->type_name("W");
  wait->add_option("--cluster", w->cluster, "accepted for xpk's form")->type_name("C");
  wait->add_option("--timeout", w->timeout, "stop waiting after this long (exit 3; 0: no limit)")
      ->type_name("D")
      ->check(timeout_duration());
  add_ssh_policy_flags(*wait, w->ssh);

  auto x = std::make_shared<WorkloadFlags>();
  CLI::App* remove =
      registry.add(group, "delete", "stop every process of the workload on every worker; forget it",
                   [x](Context& ctx) { return run_delete(ctx, *x); });
  remove->add_option("W", x->name, "the workload (or --workload W)");
  remove->add_option("--workload", x->flag_name, "the workload (xpk's form of W)")->type_name("W");
  remove
      ->add_option("--cluster", x->cluster,
                   "the workload's cluster; without a workload, its workloads that the filters "
                   "keep")
      ->type_name("C");
  remove
      ->add_option("--filter-by-status", x->filter_status,
                   "without a workload: EVERYTHING (default), RUNNING, QUEUED, FINISHED, ...")
      ->type_name("S");
  remove->add_option("--filter-by-job", x->filter_job, "without a workload: names containing this")
      ->type_name("TEXT");
  remove->add_flag("--force", x->force, "forget it even when some hosts cannot be reached");
  remove->add_flag("--override-owner", x->override_owner,
                   "delete another owner's workload anyway (recorded with both names)");
  remove->add_flag("--async", x->async,
                   "return once it is marked for deletion; a detached tpuctl stops its processes "
                   "(their grace included) and forgets it");
  add_ssh_policy_flags(*remove, x->ssh);

  auto m = std::make_shared<WorkloadFlags>();
  CLI::App* monitor =
      registry.add(group, "monitor", "poll the workers and apply the failure policy (internal)",
                   [m](Context& ctx) { return run_monitor(ctx, *m); });
  monitor->add_option("W", m->name, "the workload")->required();
  add_ssh_policy_flags(*monitor, m->ssh);
  monitor->group(""); // hidden: started by create and by commands that find no monitor
}

} // namespace tpuctl::cli
