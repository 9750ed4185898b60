#include "cli/workload_view.hpp"

#include <algorithm>
#include <map>

#include "cli/qr_view.hpp"
#include "provision/slice/secrets.hpp"
#include "provision/workload/workload_queue.hpp"
#include "state/store.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

using provision::WorkerState;
using provision::WorkloadState;

std::string goodput_line(const provision::Goodput& g) {
  auto d = [](int64_t ms) { return util::format_duration(std::chrono::milliseconds(ms)); };
  char pct[16];
  std::snprintf(pct, sizeof pct, "%.1f%%", g.goodput * 100.0);
  return std::string("goodput by phases: ") + pct + " of " + d(g.wall_ms) + " (running " +
         d(g.running_ms) +
         ", lost " + d(g.lost_ms) + ", recovering " + d(g.recovering_ms) + ", queued " +
         d(g.queued_ms) + ", provisioning " + d(g.provisioning_ms) +
         (g.evicted_ms > 0 ? ", evicted " + d(g.evicted_ms) : std::string()) + ")";
}

Json workload_worker_json(const provision::WorkloadWorker& w) {
  return Json{{"node", w.node},
              {"slice", w.slice},
              {"worker", w.worker},
              {"host", w.host},
              {"state", std::string(to_string(w.state))},
              {"exit_code", w.exit_code >= 0 ? Json(w.exit_code) : Json()},
              {"attempt", w.attempt},
              {"last_heartbeat", time_json(w.last_heartbeat_ms)},
              {"last_contact", time_json(w.last_contact_ms)},
              {"detail", w.detail},
              {"ended_at", time_json(w.ended_ms)},
              {"stopped", w.stopped},
              {"last_line", w.last_line},
              {"events", w.events},
              {"progress", w.progress},
              {"straggler", w.straggler.empty() ? Json() : Json(w.straggler)}};
}

namespace {

provision::StepGoodput step_report(const provision::Workload& w) {
  const bool ended = provision::is_terminal(w.state) && w.finished_at_ms > 0;
  return provision::step_goodput(w.steps, ended ? w.finished_at_ms : util::unix_now_ms(),
                                 w.state == WorkloadState::succeeded);
}

} // namespace

std::string step_goodput_line(const provision::Workload& w) {
  const auto g = step_report(w);
  if (!g.has_steps) {
    return "";
  }
  auto d = [](int64_t ms) { return util::format_duration(std::chrono::milliseconds(ms)); };
  char pct[16];
  std::snprintf(pct, sizeof pct, "%.1f%%", g.goodput * 100.0);
  return std::string("goodput by steps: ") + pct + " of " + d(g.total_ms) + " since its start" +
         " (productive " + d(g.productive_ms) + "; badput: program startup " +
         d(g.program_startup_ms) + ", wasted progress from disruption " + d(g.wasted_progress_ms) +
         ", infrastructure recovery from disruption " + d(g.infrastructure_recovery_ms) +
         ", checkpoint save " + d(g.checkpoint_save_ms) + ", checkpoint restore " +
         d(g.checkpoint_restore_ms) + ", other " + d(g.other_ms) + "); " +
         util::counted(static_cast<size_t>(g.disruptions), "disruption") + ", ideal step " +
         d(g.ideal_step_ms) + ", last productive step " +
         (g.last_productive_step >= 0 ? std::to_string(g.last_productive_step) : "none");
}

Json jax_summary(const provision::Workload& w) {
  int tpuctl = 0, program = 0, hits = 0, misses = 0, reporting = 0;
  int processes = 0;
  for (const auto& x : w.workers) {
    if (x.attempt != w.attempt) {
      continue;
    }
    if (const auto it = x.events.find("jax_distributed"); it != x.events.end()) {
      (it->value("by", "") == "tpuctl" ? tpuctl : program) += 1;
      processes = std::max(processes, it->value("num_processes", 0));
    }
    if (const auto it = x.events.find("compile_cache"); it != x.events.end()) {
      reporting += 1;
      hits += it->value("hits", 0);
      misses += it->value("misses", 0);
    }
  }
  Json distributed;
  if (tpuctl + program > 0) {
    distributed = Json{{"started_by", tpuctl > 0 && program > 0 ? "both"
                                      : tpuctl > 0                ? "tpuctl"
                                                                  : "program"},
                       {"processes_reporting", tpuctl + program},
                       {"num_processes", processes}};
  }
  Json cache;
  if (reporting > 0) {
    cache = Json{{"hits", hits}, {"misses", misses}, {"used", hits > 0}, {"workers", reporting}};
  }
  return Json{{"attempt", w.attempt}, {"distributed", distributed}, {"compilation_cache", cache}};
}

std::string jax_line(const Json& jax) {
  std::string out;
  if (const Json& d = jax["distributed"]; d.is_object()) {
    const std::string by = d.value("started_by", "");
    out = "jax: distributed runtime started " +
          std::string(by == "tpuctl"    ? "by tpuctl"
                      : by == "program" ? "by the program"
                                        : "by tpuctl and by the program") +
          " (" + std::to_string(d.value("processes_reporting", 0)) + " of " +
          std::to_string(d.value("num_processes", 0)) + " processes reported)";
  }
  if (const Json& c = jax["compilation_cache"]; c.is_object()) {
    out += (out.empty() ? "jax: " : "; ") + std::string("compilation cache ") +
           (c.value("used", false) ? "used" : "not used") + " (" +
           std::to_string(c.value("hits", 0)) + " hits, " + std::to_string(c.value("misses", 0)) +
           " misses, attempt " + std::to_string(jax.value("attempt", 0)) + ")";
  }
  return out;
}

Json workload_json(const provision::Workload& w) {
  // The stored record (provision::to_json) with its unix-millisecond times as RFC 3339 text,
  // the monitor's lease left out, workers as workload_worker_json, and the counts added.
  const Json stored(provision::to_json(w));
  const std::map<std::string, std::pair<std::string, int64_t>> times = {
      {"created_at_ms", {"created_at", w.created_at_ms}},
      {"started_at_ms", {"started_at", w.started_at_ms}},
      {"attempt_started_ms", {"attempt_started_at", w.attempt_started_ms}},
      {"recovering_since_ms", {"recovering_since", w.recovering_since_ms}},
      {"admitted_at_ms", {"admitted_at", w.admitted_at_ms}},
      {"finished_at_ms", {"finished_at", w.finished_at_ms}}};
  Json j = Json::object();
  for (auto it = stored.begin(); it != stored.end(); ++it) {
    if (auto t = times.find(it.key()); t != times.end()) {
      j[t->second.first] = time_json(t->second.second);
    } else if (it.key() == "secrets") {
      j["secrets"] = provision::secret_names(w.secrets); // the names, never a value
    } else if (it.key() != "monitor" && it.key() != "workers" && it.key() != "time" &&
               it.key() != "priority_value") {
      // ("time" is the monitor's bookkeeping: "goodput" below is what it adds up to)
      j[it.key()] = it.value();
    }
  }
  Json workers = Json::array();
  int running = 0;
  for (const auto& x : w.workers) {
    workers.push_back(workload_worker_json(x));
    running += x.state == WorkerState::running ? 1 : 0;
  }
  j["repair"] = w.repair.empty() ? Json() : Json(w.repair); // null when none is under way
  // The queue's view (fill_queue_view), not stored with the workload.
  j["queue_position"] = w.queue_position > 0 ? Json(w.queue_position) : Json(); // null: not queued
  j["head_of_queue_since"] = time_json(w.head_since_ms);
  j["goodput"] = provision::to_json(provision::goodput_of(w, util::unix_now_ms()));
  // By steps when the job reports them (Google's buckets), else by phases, and says which.
  if (const auto g = step_report(w); g.has_steps) {
    j["goodput"]["kind"] = "steps";
    j["goodput"]["steps"] = provision::to_json(g);
    j["goodput"]["goodput"] = provision::to_json(g)["goodput"];
  } else {
    j["goodput"]["kind"] = "phases";
  }
  j.erase("steps"); // the ledger: the monitor's bookkeeping, shown as goodput.steps
  j["running"] = running;
  j["jax"] = jax_summary(w);
  // The workers flagged as stragglers in the last interval (workload_straggler.hpp).
  Json flagged = Json::array();
  for (const auto& x : w.workers) {
    if (!x.straggler.empty()) {
      flagged.push_back(provision::describe_worker(x));
    }
  }
  j["straggler_count"] = flagged.size();
  j["straggler_workers"] = flagged;
  j["worker_count"] = static_cast<int>(w.workers.size());
  j["workers"] = std::move(workers);
  return j;
}

const std::vector<Column> k_workload_columns = {
    {"NAME", "name"},         {"CLUSTER", "cluster"},
    {"STATE", "state"},       {"PRIORITY", "priority"},
    {"SLICES", "slices"},     {"POSITION", "queue_position"},
    {"RUNNING", "running"},   {"WORKER_COUNT", "worker_count"},
    {"RESTARTS", "restarts"}, {"STRAGGLERS", "straggler_count"},
    {"OWNER", "owner"},
    {"PROJECT", "project"},   {"CREATED_AT", "created_at"}};

void print_workload(std::ostream& os, const provision::Workload& w) {
  os << "workload " << w.name << " on cluster " << w.cluster << ": " << to_string(w.state);
  if (w.restarts > 0) {
    os << " (restarts " << w.restarts << "/" << w.max_restarts << ")";
  }
  if (w.recoveries > 0) {
    os << " (recovered " << w.recoveries << "x)";
  }
  if (w.evictions > 0) {
    os << " (evicted " << w.evictions << "x)";
  }
  os << "\npriority " << provision::priority_name(w.priority) << ", "
     << util::counted(static_cast<size_t>(w.num_slices > 0 ? w.num_slices : 0), "slice");
  if (!w.slices.empty()) {
    std::vector<std::string> held;
    for (int s : w.slices) {
      held.push_back(std::to_string(s));
    }
    os << " (holds " << util::join(held, ",") << ")";
  }
  os << "\ncommand: " << util::printable(w.command) << "\n";
  if (!w.message.empty()) {
    os << (w.state == WorkloadState::failed ? "error: " : "")
       << (w.state == WorkloadState::queued
               ? "queued (position " + std::to_string(w.queue_position) + "): "
               : std::string())
       << w.message << "\n";
  }
  os << goodput_line(provision::goodput_of(w, util::unix_now_ms())) << "\n";
  if (const std::string steps = step_goodput_line(w); !steps.empty()) {
    os << steps << "\n";
  }
  if (const std::string jax = jax_line(jax_summary(w)); !jax.empty()) {
    os << jax << "\n";
  }
  for (const auto& x : w.workers) {
    if (!x.straggler.empty()) {
      os << "straggler: " << provision::describe_worker(x) << ": " << x.straggler << "\n";
    }
  }
  if (!w.checkpoint_dir.empty()) {
    os << "checkpoint dir: " << util::printable(w.checkpoint_dir) << " (shared by every worker)\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& x : w.workers) {
    const Json j = workload_worker_json(x);
    rows.push_back({x.node, std::to_string(x.slice), std::to_string(x.worker), x.host,
                    std::string(to_string(x.state)) + (x.straggler.empty() ? "" : "*"),
                    cell_text(j["exit_code"]), std::to_string(x.attempt),
                    cell_text(j["last_heartbeat"]),
                    x.straggler.empty() ? x.detail : "straggler" + (x.detail.empty() ? "" : "; " + x.detail)});
  }
  os << render_table({"NODE", "SLICE", "WORKER", "HOST", "STATE", "EXIT_CODE", "ATTEMPT",
                      "LAST_HEARTBEAT", "DETAIL"},
                     rows);
}

Json cluster_json(const provision::Cluster& c, const std::optional<provision::QueuedResource>& qr,
                  const std::vector<provision::Workload>& workloads) {
  Json slices = Json::array();
  if (qr) {
    slices = qr_json(*qr)["nodes"]; // node objects: {name, slice, workers}
  }
  Json wl = Json::array();
  int running = 0;
  provision::Goodput goodput; // summed over the cluster's workloads
  const int64_t now = util::unix_now_ms();
  for (const auto& w : workloads) {
    const provision::Goodput one = provision::goodput_of(w, now);
    wl.push_back(Json{
        {"name", w.name}, {"state", std::string(to_string(w.state))}, {"goodput", one.goodput}});
    running += provision::is_terminal(w.state) ? 0 : 1;
    goodput += one;
  }
  Json error; // null when none
  std::string reason;
  if (qr && qr->error) {
    error = Json{{"code", qr->error->code}, {"message", qr->error->message}};
  } else if (qr && !qr->pending_reason.empty() && qr->state != provision::QrState::active) {
    reason = qr->pending_reason;
  }
  return Json{{"name", c.name},
              {"pool", c.pool},
              {"tpu_type", c.tpu_type},
              {"num_slices", c.num_slices},
              {"tier", std::string(to_string(c.tier))},
              {"on_preemption", qr ? std::string(to_string(qr->on_preemption)) : std::string()},
              {"state", qr ? std::string(to_string(qr->state)) : "MISSING"},
              {"queued_resource", c.queued_resource},
              {"created_at", time_json(c.created_at_ms)},
              {"owner", c.owner},
              {"project", c.project},
              {"running_workloads", running},
              {"goodput", provision::to_json(goodput)},
              {"slices", slices},
              {"workloads", wl},
              {"reason", reason},
              {"error", error}};
}

const std::vector<Column> k_cluster_columns = {
    {"NAME", "name"},   {"TPU_TYPE", "tpu_type"}, {"NUM_SLICES", "num_slices"},
    {"TIER", "tier"},   {"STATE", "state"},       {"RUNNING_WORKLOADS", "running_workloads"},
    {"OWNER", "owner"}, {"PROJECT", "project"},   {"CREATED_AT", "created_at"}};

void print_cluster(std::ostream& os, const Json& j) {
  os << "cluster " << cell_text(j["name"]) << " (" << cell_text(j["tpu_type"]) << " x "
     << cell_text(j["num_slices"]) << ", " << cell_text(j["tier"]) << ") in pool "
     << cell_text(j["pool"]) << ": " << cell_text(j["state"]) << "\n";
  if (!j["error"].is_null()) {
    os << "error: " << cell_text(j["error"]["code"]) << ": " << cell_text(j["error"]["message"])
       << "\n";
  } else if (!cell_text(j["reason"]).empty()) {
    os << "waiting: " << cell_text(j["reason"]) << "\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : j["slices"]) {
    for (const auto& w : s["workers"]) {
      rows.push_back({cell_text(w["node"]), cell_text(w["slice"]), cell_text(w["worker"]),
                      cell_text(w["host"]), cell_text(w["address"])});
    }
  }
  if (!rows.empty()) {
    os << render_table({"NODE", "SLICE", "WORKER", "HOST", "ADDRESS"}, rows);
  }
  if (!j["workloads"].empty()) {
    std::vector<std::vector<std::string>> wrows;
    for (const auto& w : j["workloads"]) {
      char pct[16];
      std::snprintf(pct, sizeof pct, "%.1f%%", w.value("goodput", 0.0) * 100.0);
      wrows.push_back({cell_text(w["name"]), cell_text(w["state"]), pct});
    }
    os << render_table({"WORKLOAD", "STATE", "GOODPUT"}, wrows);
    const auto& g = j["goodput"];
    os << goodput_line(provision::Goodput{
              g.value("wall_ms", int64_t{0}), g.value("provisioning_ms", int64_t{0}),
              g.value("queued_ms", int64_t{0}), g.value("recovering_ms", int64_t{0}),
              g.value("running_ms", int64_t{0}), g.value("lost_ms", int64_t{0}),
              g.value("goodput", 0.0), g.value("evicted_ms", int64_t{0})})
       << " over its workloads\n";
  }
}

} // namespace tpuctl::cli
