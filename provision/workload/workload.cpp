#include "provision/workload/workload.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include "provision/pool/projects.hpp"
#include "provision/pool/request_ssh.hpp"
#include "provision/slice/slice_workers.hpp"
#include "provision/workload/workload_queue.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

using Json = nlohmann::json;

namespace {

constexpr std::array<std::pair<WorkloadState, std::string_view>, 7> k_states{{
    {WorkloadState::queued, "QUEUED"},
    {WorkloadState::pending, "PENDING"},
    {WorkloadState::running, "RUNNING"},
    {WorkloadState::recovering, "RECOVERING"},
    {WorkloadState::evicting, "EVICTING"},
    {WorkloadState::succeeded, "SUCCEEDED"},
    {WorkloadState::failed, "FAILED"},
}};

constexpr std::array<std::pair<WorkerState, std::string_view>, 6> k_worker_states{{
    {WorkerState::pending, "PENDING"},
    {WorkerState::running, "RUNNING"},
    {WorkerState::succeeded, "SUCCEEDED"},
    {WorkerState::failed, "FAILED"},
    {WorkerState::lost, "LOST"},
    {WorkerState::stopped, "STOPPED"},
}};

template <typename T, size_t N>
std::optional<T> parse_upper(const std::array<std::pair<T, std::string_view>, N>& table,
                             std::string_view text) {
  for (const auto& [value, name] : table) {
    if (util::to_lower(text) == util::to_lower(name)) {
      return value;
    }
  }
  return std::nullopt;
}

template <typename T, size_t N>
std::string_view name_of(const std::array<std::pair<T, std::string_view>, N>& table, T value) {
  for (const auto& [v, name] : table) {
    if (v == value) {
      return name;
    }
  }
  return "UNKNOWN";
}

Json worker_json(const WorkloadWorker& w) {
  return Json{{"node", w.node},
              {"slice", w.slice},
              {"worker", w.worker},
              {"host", w.host},
              {"state", std::string(to_string(w.state))},
              {"exit_code", w.exit_code},
              {"attempt", w.attempt},
              {"last_heartbeat_ms", w.last_heartbeat_ms},
              {"last_contact_ms", w.last_contact_ms},
              {"detail", w.detail},
              {"ended_ms", w.ended_ms},
              {"stopped", w.stopped},
              {"last_line", w.last_line},
              {"events", w.events},
              {"progress", w.progress},
              {"straggler", w.straggler}};
}

WorkloadWorker worker_from_json(const Json& j) {
  WorkloadWorker w;
  w.node = j.at("node").get<std::string>();
  w.slice = j.at("slice").get<int>();
  w.worker = j.at("worker").get<int>();
  w.host = j.at("host").get<std::string>();
  auto st = parse_worker_state(j.at("state").get<std::string>());
  if (!st) {
    throw std::runtime_error("unknown worker state '" + j.at("state").get<std::string>() + "'");
  }
  w.state = *st;
  w.exit_code = j.value("exit_code", -1);
  w.attempt = j.value("attempt", 0);
  w.last_heartbeat_ms = j.value("last_heartbeat_ms", int64_t{0});
  w.last_contact_ms = j.value("last_contact_ms", int64_t{0});
  w.detail = j.value("detail", "");
  w.ended_ms = j.value("ended_ms", int64_t{0});
  w.stopped = j.value("stopped", false);
  w.last_line = j.value("last_line", "");
  w.events = j.value("events", Json::object());
  w.progress = j.value("progress", Json::object());
  w.straggler = j.value("straggler", "");
  return w;
}

} // namespace

std::string_view to_string(WorkloadState state) {
  return name_of(k_states, state);
}
std::optional<WorkloadState> parse_workload_state(std::string_view text) {
  return parse_upper(k_states, text);
}
bool is_terminal(WorkloadState state) {
  return state == WorkloadState::succeeded || state == WorkloadState::failed;
}
bool holds_slices(WorkloadState state) {
  return state == WorkloadState::pending || state == WorkloadState::running ||
         state == WorkloadState::recovering || state == WorkloadState::evicting;
}

std::string_view to_string(FailPolicy policy) {
  return policy == FailPolicy::any ? "any" : "all";
}
Expected<FailPolicy> parse_fail_policy(std::string_view text) {
  if (text == "any") {
    return FailPolicy::any;
  }
  if (text == "all") {
    return FailPolicy::all;
  }
  return usage_error("--fail-policy '" + util::printable(text) +
                     "' is not a policy: use any (one failing worker fails the workload) or all "
                     "(fail after every worker has ended, if any failed)");
}

std::string_view to_string(WorkerState state) {
  return name_of(k_worker_states, state);
}
std::optional<WorkerState> parse_worker_state(std::string_view text) {
  return parse_upper(k_worker_states, text);
}

Json to_json(const Workload& w) {
  Json env = Json::array();
  for (const auto& [k, v] : w.env) {
    env.push_back(Json{{"name", k}, {"value", v}});
  }
  Json workers = Json::array();
  for (const auto& x : w.workers) {
    workers.push_back(worker_json(x));
  }
  Json j{{"name", w.name},
         {"pool", w.pool},
         {"uid", w.uid},
         {"cluster", w.cluster},
         {"queued_resource", w.queued_resource},
         {"command", w.command},
         {"env", env},
         {"secrets", to_json(w.secrets)},
         {"ssh", to_json(w.ssh)},
         {"env_profile", std::string(to_string(w.env_profile))},
         {"fail_policy", std::string(to_string(w.fail_policy))},
         {"max_restarts", w.max_restarts},
         {"priority", priority_name(w.priority)},
         {"priority_value", w.priority},
         {"num_slices", w.num_slices},
         {"slices", w.slices},
         {"slice_nodes", w.slice_nodes},
         {"admitted_at_ms", w.admitted_at_ms},
         {"evictions", w.evictions},
         {"termination_grace_seconds", w.termination_grace_ms / 1000},
         {"failure_grace_seconds", w.failure_grace_ms / 1000},
         {"restart_on_exit_codes",
          w.restart_on_exit_codes.empty() ? Json() : Json(w.restart_on_exit_codes)},
         {"ttl_seconds_after_finished",
          w.ttl_after_finished_ms < 0 ? Json() : Json(w.ttl_after_finished_ms / 1000)},
         {"max_repairs", w.max_repairs},
         {"repairs", w.repairs},
         {"restarts", w.restarts},
         {"attempt", w.attempt},
         {"recoveries", w.recoveries},
         {"recovering_since_ms", w.recovering_since_ms},
         {"repair", w.repair},
         {"time", to_json(w.time)},
         {"timeout_ms", w.timeout_ms},
         {"state", std::string(to_string(w.state))},
         {"deleting", w.deleting},
         {"created_at_ms", w.created_at_ms},
         {"owner", w.owner},
         {"project", w.project},
         {"started_at_ms", w.started_at_ms},
         {"attempt_started_ms", w.attempt_started_ms},
         {"finished_at_ms", w.finished_at_ms},
         {"message", w.message},
         {"workers", workers},
         {"python_env", w.python_env},
         {"checkpoint_dir", w.checkpoint_dir.empty() ? Json() : Json(w.checkpoint_dir)},
         {"step_pattern", w.step_pattern},
         {"hang_timeout_seconds", w.hang_timeout_ms / 1000},
         {"hang", w.hang.empty() ? Json() : w.hang},
         {"straggler_interval_seconds", w.straggler_interval_ms / 1000},
         {"on_straggler", w.on_straggler},
         {"stragglers", w.stragglers.empty() ? Json() : w.stragglers},
         {"steps", to_json(w.steps)},
         {"monitor", w.monitor}};
  if (!w.container.image.empty()) {
    j["container"] = Json{{"image", w.container.image},
                          {"name", w.container.name},
                          {"runtime", w.container.runtime},
                          {"app", w.container.app}};
  }
  return j;
}

Expected<Workload> workload_from_json(const Json& doc) {
  try {
    Workload w;
    w.name = doc.at("name").get<std::string>();
    w.pool = doc.at("pool").get<std::string>();
    w.uid = doc.at("uid").get<std::string>();
    w.cluster = doc.at("cluster").get<std::string>();
    w.queued_resource = doc.at("queued_resource").get<std::string>();
    w.command = doc.at("command").get<std::string>();
    for (const auto& e : doc.value("env", Json::array())) {
      w.env.emplace_back(e.at("name").get<std::string>(), e.at("value").get<std::string>());
    }
    w.secrets = secrets_from_json(doc.value("secrets", Json::object()));
    w.ssh = ssh_settings_from_json(doc.value("ssh", Json()));
    auto profile = parse_env_profile(doc.value("env_profile", "none"));
    if (!profile) {
      throw std::runtime_error(profile.error().message);
    }
    w.env_profile = *profile;
    auto policy = parse_fail_policy(doc.at("fail_policy").get<std::string>());
    if (!policy) {
      throw std::runtime_error(policy.error().message);
    }
    w.fail_policy = *policy;
    w.max_restarts = doc.value("max_restarts", 0);
    w.priority = doc.value("priority_value", k_default_priority);
    // Before the queue, a workload ran on every slice of its cluster: no "slices" then means all.
    w.num_slices = doc.value("num_slices", 0);
    w.slices = doc.value("slices", std::vector<int>{});
    w.slice_nodes = doc.value("slice_nodes", std::vector<std::string>{});
    w.admitted_at_ms = doc.value("admitted_at_ms", int64_t{0});
    w.evictions = doc.value("evictions", 0);
    w.termination_grace_ms = doc.value("termination_grace_seconds", int64_t{30}) * 1000;
    // Before it was kept, every stop had the full grace.
    w.failure_grace_ms =
        doc.value("failure_grace_seconds", w.termination_grace_ms / 1000) * int64_t{1000};
    if (doc.contains("restart_on_exit_codes") && doc["restart_on_exit_codes"].is_string()) {
      w.restart_on_exit_codes = doc["restart_on_exit_codes"].get<std::string>();
    }
    if (doc.contains("ttl_seconds_after_finished") &&
        doc["ttl_seconds_after_finished"].is_number_integer()) {
      w.ttl_after_finished_ms = doc["ttl_seconds_after_finished"].get<int64_t>() * 1000;
    }
    w.max_repairs = doc.value("max_repairs", 3);
    w.repairs = doc.value("repairs", 0);
    w.restarts = doc.value("restarts", 0);
    w.attempt = doc.value("attempt", w.restarts); // before repairs, the attempt was the restarts
    w.recoveries = doc.value("recoveries", 0);
    w.recovering_since_ms = doc.value("recovering_since_ms", int64_t{0});
    w.repair = doc.value("repair", Json::object());
    w.time = workload_time_from_json(doc.value("time", Json::object()));
    w.timeout_ms = doc.value("timeout_ms", int64_t{0});
    auto st = parse_workload_state(doc.at("state").get<std::string>());
    if (!st) {
      throw std::runtime_error("unknown state '" + doc.at("state").get<std::string>() + "'");
    }
    w.state = *st;
    w.deleting = doc.value("deleting", false);
    w.created_at_ms = doc.value("created_at_ms", int64_t{0});
    w.owner = doc.value("owner", "");
    w.project = doc.value("project", std::string(k_default_project));
    w.started_at_ms = doc.value("started_at_ms", int64_t{0});
    w.attempt_started_ms = doc.value("attempt_started_ms", int64_t{0});
    w.finished_at_ms = doc.value("finished_at_ms", int64_t{0});
    w.message = doc.value("message", "");
    for (const auto& x : doc.value("workers", Json::array())) {
      w.workers.push_back(worker_from_json(x));
    }
    w.monitor = doc.value("monitor", Json::object());
    w.python_env = doc.value("python_env", std::string(k_default_python_env));
    w.step_pattern = doc.value("step_pattern", std::string());
    w.hang_timeout_ms = doc.value("hang_timeout_seconds", int64_t{0}) * 1000;
    if (doc.contains("hang") && doc["hang"].is_object()) {
      w.hang = doc["hang"];
    }
    w.straggler_interval_ms = doc.value("straggler_interval_seconds", int64_t{60}) * 1000;
    w.on_straggler = doc.value("on_straggler", std::string("none"));
    if (doc.contains("stragglers") && doc["stragglers"].is_object()) {
      w.stragglers = doc["stragglers"];
    }
    w.steps = step_ledger_from_json(doc.value("steps", Json()));
    if (doc.contains("checkpoint_dir") && doc["checkpoint_dir"].is_string()) {
      w.checkpoint_dir = doc["checkpoint_dir"].get<std::string>();
    }
    if (doc.contains("container")) {
      const Json& c = doc.at("container");
      w.container.image = c.at("image").get<std::string>();
      w.container.name = c.value("name", "jax-tpu");
      w.container.runtime = c.value("runtime", "docker");
      w.container.app = c.value("app", false);
    }
    return w;
  } catch (const std::exception& e) {
    return make_error(ErrorKind::failure, std::string("workload record is malformed: ") + e.what());
  }
}

Expected<Workload> workload_from_record(const state::Record& record) {
  TPUCTL_TRY_ASSIGN(Workload w, workload_from_json(record.doc));
  w.version = record.version;
  return w;
}

std::vector<int> resolve_slices(const Workload& w, const std::vector<std::string>& node_ids) {
  if (w.slice_nodes.empty()) {
    return w.slices;
  }
  std::vector<int> out;
  for (const auto& id : w.slice_nodes) {
    auto it = std::find(node_ids.begin(), node_ids.end(), id);
    if (it != node_ids.end()) {
      out.push_back(static_cast<int>(it - node_ids.begin()));
    }
  }
  return out;
}

state::Key workload_key(const std::string& pool, const std::string& name) {
  return state::record_key(state::Kind::workload, pool, name);
}

Expected<std::vector<Workload>> list_workloads(state::StateStore& store, const std::string& pool,
                                               const std::string& cluster) {
  TPUCTL_TRY_ASSIGN(state::Listing listing, store.list(state::Kind::workload, pool));
  std::vector<Workload> out;
  for (const auto& r : listing.records) {
    auto w = workload_from_record(r);
    if (!w) {
      Error e = w.error();
      e.message = state::describe(r.key) + ": " + e.message;
      return e;
    }
    if (cluster.empty() || w->cluster == cluster) {
      out.push_back(std::move(*w));
    }
  }
  return out;
}

Expected<Workload> load_workload(state::StateStore& store, const std::string& pool,
                                 const std::string& name) {
  TPUCTL_TRY_ASSIGN(auto found, store.find(workload_key(pool, name)));
  if (found) {
    return workload_from_record(*found);
  }
  TPUCTL_TRY_ASSIGN(auto all, list_workloads(store, pool));
  std::vector<std::string> names;
  for (const auto& w : all) {
    names.push_back(w.name);
  }
  return Error(ErrorKind::not_found,
               "workload '" + util::printable(name) + "' not found in pool '" + pool + "' (" +
                   (names.empty() ? std::string("there are no workloads")
                                  : "workloads: " + util::join(names, ", ")) +
                   ")",
               std::string(state::reason::k_not_found));
}

std::string workload_dir(const std::string& workdir, const std::string& uid,
                         const std::string& node, int worker) {
  return workdir + "/workloads/" + uid + "/" + node + "-" + std::to_string(worker);
}

std::string describe_worker(const WorkloadWorker& w) {
  return "worker " + worker_label(w.node, w.worker, w.host);
}

Goodput goodput_of(const Workload& w, int64_t now_ms) {
  const int64_t end = is_terminal(w.state) && w.finished_at_ms > 0 ? w.finished_at_ms : now_ms;
  return goodput_of(w.time, w.created_at_ms, end);
}

} // namespace tpuctl::provision
