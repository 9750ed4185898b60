#include "provision/workload/workload_steps.hpp"

#include <algorithm>
#include <thread>

#include "provision/queue/reconcile.hpp"
#include "provision/slice/slice_workers.hpp"
#include "provision/workload/workload_watch.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

using Ms = std::chrono::milliseconds;

int64_t now_of(const MonitorOptions& o) {
  return state::to_unix_ms(o.clock());
}

void say(const MonitorOptions& o, const std::string& line) {
  if (o.progress) {
    o.progress(line);
  }
}

state::Op state_event(const Workload& wl, WorkloadState from, WorkloadState to, int64_t now,
                      const std::string& type, const std::string& message) {
  state::Event e;
  e.time_ms = now;
  e.pool = wl.pool;
  e.subject_kind = state::Kind::workload;
  e.subject = wl.name;
  e.type = type;
  e.from_state = std::string(to_string(from));
  e.to_state = std::string(to_string(to));
  e.initiator = state::Initiator::service;
  e.detail = nlohmann::json{{"message", message},
                            {"restarts", wl.restarts},
                            {"owner", wl.owner},
                            {"project", wl.project}};
  return state::EventOp{e};
}

Expected<Mutation> mutate(state::StateStore& store, const std::string& pool,
                          const std::string& name, bool need_lease, const ChangeFn& change,
                          bool evicting_ok) {
  Mutation m;
  bool written = false;
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    m = {};
    TPUCTL_TRY_ASSIGN(auto found, s.find(workload_key(pool, name)));
    if (!found) {
      m.skipped = Skip::gone;
      return std::vector<state::Op>{};
    }
    TPUCTL_TRY_ASSIGN(Workload wl, workload_from_record(*found));
    m.workload = wl;
    if (wl.deleting) {
      m.skipped = Skip::deleting;
      return std::vector<state::Op>{};
    }
    if (wl.state == WorkloadState::evicting && !evicting_ok) {
      m.skipped = Skip::evicting;
      return std::vector<state::Op>{};
    }
    auto lease = lease_from_json(wl.monitor);
    if (need_lease && (!lease || !is_own_lease(*lease))) {
      m.skipped = Skip::not_ours;
      return std::vector<state::Op>{};
    }
    auto ops = change(wl);
    m.workload = wl;
    if (!ops) {
      written = false;
      return std::vector<state::Op>{};
    }
    written = true;
    ops->insert(ops->begin(), state::UpdateOp{workload_key(pool, name), to_json(wl), wl.version});
    return *ops;
  });
  if (!committed) {
    return committed.error();
  }
  if (written && m.workload) {
    m.workload->version = committed->revision;
  }
  return m;
}

namespace {

// A human summary of workers that did not start.
std::string launch_failures(const std::vector<WorkerPlan>& plans,
                            const std::vector<remote::HostResult>& results,
                            std::vector<size_t>& failed) {
  std::vector<std::string> parts;
  for (const auto& r : results) {
    if (r.succeeded()) {
      continue;
    }
    failed.push_back(r.index);
    const auto& p = plans[r.index];
    std::string why(util::trim(r.err));
    if (why.empty()) {
      why = r.error.empty() ? std::string(remote::to_string(r.outcome)) : r.error;
    }
    parts.push_back("worker " + worker_label(p) + " could not start: " + why);
  }
  return util::join(parts, "; ");
}

} // namespace

Expected<std::string> start_attempt(const Workload& wl, const std::vector<WorkerPlan>& plans,
                                    std::vector<size_t>& failed, const MonitorOptions& o,
                                    WorkerWatch* watch) {
  if (!wl.checkpoint_dir.empty()) { // its hosts may have changed since it was created
    if (auto shared = check_shared_dir(wl.checkpoint_dir, plans, o.ssh); !shared) {
      return shared.error().message;
    }
  }
  auto done = std::make_shared<size_t>(0);
  auto started = [&o, done, total = plans.size()](const remote::HostResult& r) {
    if (o.worker_started) {
      o.worker_started(++*done, total, r.host);
    }
  };
  // Through the streams: no new session for a worker the monitor watches already; the others
  // over new sessions meanwhile.
  std::vector<bool> sent(plans.size(), false);
  if (watch != nullptr) {
    std::vector<std::string> commands;
    for (const auto& p : plans) {
      commands.push_back(launch_command(wl, p));
    }
    sent = watch->send_start(commands, secret_input(wl.secrets));
    sent.resize(plans.size(), false);
  }
  std::vector<WorkerPlan> rest;
  std::vector<size_t> rest_index;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (!sent[i]) {
      rest.push_back(plans[i]);
      rest_index.push_back(i);
    }
  }
  std::vector<remote::HostResult> results;
  if (!rest.empty()) {
    remote::FanoutCallbacks callbacks;
    callbacks.on_host_done = started;
    TPUCTL_TRY_ASSIGN(auto launched, launch_workers(wl, rest, o.ssh, callbacks));
    for (auto& r : launched) {
      r.index = rest_index[r.index];
      results.push_back(std::move(r));
    }
  }
  if (watch != nullptr && rest.size() < plans.size()) {
    for (auto& r : watch->collect_started(std::chrono::seconds(60))) {
      if (r) {
        started(*r);
        results.push_back(std::move(*r));
      }
    }
    say(o, "attempt " + std::to_string(wl.attempt) + ": " +
               util::counted(plans.size() - rest.size(), "worker") +
               " started through their streams, " + std::to_string(rest.size()) +
               " over new sessions");
  }
  std::sort(
      results.begin(), results.end(),
      [](const remote::HostResult& a, const remote::HostResult& b) { return a.index < b.index; });
  std::string message = launch_failures(plans, results, failed);
  if (!message.empty()) {
    (void)stop_workers(wl, plans, o.ssh);
  }
  return message;
}

std::optional<std::vector<state::Op>> finish(Workload& wl, WorkloadState to,
                                             const std::string& message, int64_t now) {
  const WorkloadState from = wl.state;
  enter(wl.time, TimePhase::none, now);
  if (to != WorkloadState::succeeded) {
    lose_attempt(wl.time); // an attempt that did not finish: its running time is lost
  }
  wl.state = to;
  wl.message = message;
  wl.finished_at_ms = now;
  wl.monitor = nlohmann::json::object();
  wl.slices.clear(); // free for the next in the queue (its workers still say where it ran)
  wl.slice_nodes.clear();
  for (auto& w : wl.workers) {
    if (w.state == WorkerState::running || w.state == WorkerState::pending) {
      w.state = to == WorkloadState::failed ? WorkerState::stopped : w.state;
    }
  }
  return std::vector<state::Op>{state_event(wl, from, to, now, "STATE_CHANGED", message)};
}

void stop_attempt(const Workload& wl, const std::vector<WorkerPlan>& plans, WorkerWatch* watch,
                  const MonitorOptions& o, std::optional<std::chrono::milliseconds> grace) {
  std::vector<bool> confirmed(plans.size(), false);
  if (watch != nullptr) {
    confirmed = watch->stop(grace.value_or(grace_of(wl)), workload_tag(wl), false);
  }
  std::vector<WorkerPlan> left;
  for (size_t i = 0; i < plans.size(); ++i) {
    const bool lost = i < wl.workers.size() && wl.workers[i].state == WorkerState::lost;
    if (!(i < confirmed.size() && confirmed[i]) && !lost) {
      left.push_back(plans[i]);
    }
  }
  if (!left.empty()) {
    (void)stop_workers(wl, left, o.ssh);
  }
}

void sleep_for(Ms duration, const remote::CancelToken* cancel) {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < until && !(cancel && cancel->cancelled())) {
    std::this_thread::sleep_for(Ms(50));
  }
}

} // namespace tpuctl::provision
