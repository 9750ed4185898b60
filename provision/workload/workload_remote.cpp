#include "provision/workload/workload_remote.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "provision/pool/pools.hpp"
#include "provision/slice/provisioning.hpp"
#include "provision/slice/qr_ops.hpp"
#include "provision/workload/container.hpp"
#include "remote/fanout.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

using Json = nlohmann::json;

namespace {

std::string dir_of(const Workload& wl, const WorkerPlan& p) {
  return workload_dir(p.workdir, wl.uid, p.node, p.worker);
}

std::string agent_of(const WorkerPlan& p) {
  return util::shell_quote_path(p.agent_dir + "/tpuctl");
}

// The engine's options for control commands: no tty, no stdin, output kept, every host at once.
remote::SshOptions control_options(const remote::SshOptions& ssh, size_t hosts,
                                   std::chrono::milliseconds timeout) {
  remote::SshOptions o = ssh;
  o.batch_size = std::max<size_t>({o.batch_size, hosts, 1});
  o.command_timeout = timeout;
  o.keep_output = true;
  o.tty = false;
  o.stdin_data = nullptr;
  return o;
}

std::vector<remote::Job> jobs_for(const std::vector<WorkerPlan>& plans,
                                  const std::vector<std::string>& commands) {
  std::vector<remote::Job> jobs;
  for (size_t i = 0; i < plans.size(); ++i) {
    remote::Job j;
    j.target = plans[i].target;
    j.target.name = plans[i].node + "/" + std::to_string(plans[i].worker);
    j.command = commands[i];
    j.index = i;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

// One plan per distinct host, in order.
std::vector<WorkerPlan> distinct_hosts(const std::vector<WorkerPlan>& plans) {
  std::vector<WorkerPlan> out;
  std::set<std::string> seen;
  for (const auto& p : plans) {
    if (seen.insert(p.host).second) {
      out.push_back(p);
    }
  }
  return out;
}

} // namespace

Expected<std::vector<WorkerPlan>> plan_workload(state::StateStore& store, const Workload& wl) {
  auto target = resolve_target(store, wl.pool, wl.queued_resource);
  if (!target) {
    return Error(ErrorKind::failure, "workload '" + wl.name + "': the queued resource '" +
                                         wl.queued_resource + "' of cluster '" + wl.cluster +
                                         "' is gone (" + target.error().message + ")");
  }
  TPUCTL_TRY_ASSIGN(auto pool, load_pool(store, wl.pool));
  WorkerSelection selection;
  selection.user_env = wl.env;
  selection.profile = wl.env_profile;
  selection.python_env = wl.python_env;
  std::vector<std::string> node_ids;
  for (const auto& n : target->qr.nodes) {
    node_ids.push_back(n.id);
  }
  selection.job_nodes = resolve_slices(wl, node_ids);
  if (selection.job_nodes.size() < wl.slice_nodes.size()) {
    return Error(ErrorKind::failure, "workload '" + wl.name + "': a slice it holds (" +
                                         util::join(wl.slice_nodes, ", ") +
                                         ") is no longer part of cluster '" + wl.cluster + "'");
  }
  TPUCTL_TRY_ASSIGN(auto plans, plan_workers(*target, pool, selection));
  // Every caller is about to start, watch or stop the workload's processes there: from now on
  // deleting the request stops what runs on it.
  TPUCTL_TRY(note_launch(store, wl.pool, target->qr));
  for (auto& p : plans) {
    p.env.emplace_back("TPUCTL_WORKLOAD", wl.name);
    p.env.emplace_back(k_workload_uid_var, wl.uid);
    p.env.emplace_back("TPUCTL_WORKLOAD_ATTEMPT", std::to_string(wl.attempt));
    p.env.emplace_back(k_process_grace_var, std::to_string(wl.termination_grace_ms / 1000));
    if (!wl.checkpoint_dir.empty()) {
      p.env.emplace_back("TPUCTL_CHECKPOINT_DIR", wl.checkpoint_dir);
    }
  }
  return plans;
}

std::vector<WorkloadWorker> pending_workers(const std::vector<WorkerPlan>& plans, int attempt) {
  std::vector<WorkloadWorker> out;
  for (const auto& p : plans) {
    WorkloadWorker w;
    w.node = p.node;
    w.slice = p.node_index;
    w.worker = p.worker;
    w.host = p.host;
    w.attempt = attempt;
    out.push_back(std::move(w));
  }
  return out;
}

std::string compilation_cache_dir(const WorkerPlan& p) {
  std::string slice_uid = "shared";
  for (const auto& [name, value] : p.env) {
    if (name == "TPUCTL_QR_UID") {
      slice_uid = value;
    }
  }
  return p.workdir + "/jax-cache/" + slice_uid;
}

std::string launch_command(const Workload& wl, const WorkerPlan& p) {
  const std::string command =
      wl.container.image.empty()
          ? wl.command
          : container_command(wl.container, wl.uid, p, dir_of(wl, p),
                              wl.container.app ? app_dir(p, wl.uid) : "", wl.command);
  return secret_read_prefix(wl.secrets) + env_command_prefix(p.env, p.agent_dir) + agent_of(p) +
         " agent supervise --format json --dir " + util::shell_quote_path(dir_of(wl, p)) +
         " --attempt " + std::to_string(wl.attempt) + " --kill-grace " +
         std::to_string(wl.termination_grace_ms) + "ms --compilation-cache " +
         util::shell_quote_path(compilation_cache_dir(p)) + " --command " +
         util::shell_quote(command);
}

Expected<std::vector<remote::HostResult>> launch_workers(const Workload& wl,
                                                         const std::vector<WorkerPlan>& plans,
                                                         const remote::SshOptions& ssh,
                                                         const remote::FanoutCallbacks& callbacks) {
  std::vector<std::string> commands;
  for (const auto& p : plans) {
    commands.push_back(launch_command(wl, p));
  }
  remote::SshOptions options = control_options(ssh, plans.size(), std::chrono::seconds(60));
  if (!wl.secrets.empty()) { // on stdin, never in the command (secrets.hpp)
    options.stdin_data = remote::InputBytes::of(secret_input(wl.secrets));
  }
  return remote::run_fanout(jobs_for(plans, commands), options, callbacks);
}

WorkerObservation parse_observation(const std::string& out) {
  WorkerObservation obs;
  try {
    Json j = Json::parse(out);
    obs.reached = true;
    obs.now_ms = j.value("now_ms", int64_t{0});
    obs.heartbeat_ms = j.value("heartbeat_ms", int64_t{0});
    obs.supervisor_alive = j.value("supervisor_alive", false);
    const Json& st = j["status"];
    if (st.is_object()) {
      obs.has_status = true;
      obs.attempt = st.value("attempt", -1);
      obs.state = st.value("state", "");
      obs.exit_code = st.value("exit_code", -1);
      obs.finished_ms = st.value("finished_ms", int64_t{0});
      obs.stopped = st.value("stopped", false);
      obs.last_line = st.value("last_line", "");
    }
    if (j.contains("events") && j["events"].is_object()) {
      obs.events = j["events"];
    }
    if (j.contains("progress") && j["progress"].is_object()) {
      obs.progress = j["progress"];
    }
    for (const auto& step : j.value("steps", Json::array())) {
      if (step.is_array() && step.size() == 2 && step[0].is_number_integer() &&
          step[1].is_number_integer()) {
        obs.steps.emplace_back(step[0].get<int64_t>(), step[1].get<int64_t>());
      }
    }
  } catch (const std::exception& e) {
    obs.reached = false;
    obs.error = std::string("unreadable status: ") + e.what();
  }
  return obs;
}

Status check_shared_dir(const std::string& dir, const std::vector<WorkerPlan>& plans,
                        const remote::SshOptions& ssh) {
  if (plans.empty()) {
    return tpuctl::ok();
  }
  const std::string token = util::random_hex_id();
  std::vector<std::string> commands;
  for (size_t i = 0; i < plans.size(); ++i) {
    commands.push_back(agent_of(plans[i]) + " agent shared-dir --format json --dir " +
                       util::shell_quote_path(dir) + " --token " + token + " --index " +
                       std::to_string(i) + " --count " + std::to_string(plans.size()));
  }
  TPUCTL_TRY_ASSIGN(auto results, remote::run_fanout(jobs_for(plans, commands),
                                                     control_options(ssh, plans.size(),
                                                                     std::chrono::seconds(30))));
  std::sort(results.begin(), results.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  const std::string fix = ": Orbax needs one directory every worker shares; give a path on a "
                          "filesystem they all mount (NFS, a shared disk)";
  std::string unreachable;
  for (const auto& r : results) {
    const WorkerPlan& p = plans[r.index];
    Json j = Json::parse(r.out, nullptr, false);
    if (j.is_object() && j.contains("shared")) {
      if (!j.value("shared", false) && r.index != 0) {
        return usage_error("--checkpoint-dir '" + util::printable(dir) +
                           "' is not shared by every worker: on " + worker_label(p) + ", " +
                           j.value("problem", std::string("it was not seen")) + fix);
      }
      if (!j.value("shared", false) && j.value("missing", Json::array()).empty()) {
        return usage_error("--checkpoint-dir '" + util::printable(dir) + "': on " +
                           worker_label(p) + ", " + j.value("problem", std::string()));
      }
      continue;
    }
    if (unreachable.empty()) {
      unreachable = worker_label(p) + ": " +
                    (r.error.empty() ? util::last_line(r.err + r.out) : r.error);
    }
  }
  if (!unreachable.empty()) {
    return Error(ErrorKind::failure, "could not check --checkpoint-dir '" +
                                         util::printable(dir) + "' on every worker (" +
                                         unreachable + ")");
  }
  for (const auto& r : results) { // worker 0's view: whose files never reached it
    Json j = Json::parse(r.out, nullptr, false);
    if (r.index == 0 && !j.value("shared", true)) {
      return usage_error("--checkpoint-dir '" + util::printable(dir) +
                         "' is not shared by every worker: " + j.value("problem", std::string()) +
                         fix);
    }
  }
  return tpuctl::ok();
}

Expected<std::vector<WorkerObservation>> poll_workers(const Workload& wl,
                                                      const std::vector<WorkerPlan>& plans,
                                                      const remote::SshOptions& ssh) {
  std::vector<std::string> commands;
  for (const auto& p : plans) {
    commands.push_back(agent_of(p) + " agent supervise-status --format json --dir " +
                       util::shell_quote_path(dir_of(wl, p)));
  }
  TPUCTL_TRY_ASSIGN(auto results, remote::run_fanout(jobs_for(plans, commands),
                                                     control_options(ssh, plans.size(),
                                                                     std::chrono::seconds(20))));
  std::vector<WorkerObservation> out(plans.size());
  for (const auto& r : results) {
    WorkerObservation obs;
    if (r.succeeded()) {
      obs = parse_observation(r.out);
    } else {
      obs.error = r.error.empty() ? std::string(remote::to_string(r.outcome)) : r.error;
      obs.refused = r.outcome == remote::Outcome::refused;
    }
    out[r.index] = std::move(obs);
  }
  return out;
}

namespace {

// One session's stop: every worker of `group` (one host's workers, or those of every host that
// shares this machine), in one agent call, the agent of `on` (the host the session runs on);
// then, with `remove_files`, the workload's files there (once its processes are gone).
std::string stop_command(const Workload& wl, const std::vector<WorkerPlan>& group,
                         const WorkerPlan& on, int64_t grace_ms, bool remove_files) {
  std::string dirs;
  std::set<std::string> files;
  for (const auto& p : group) {
    dirs += " --dir " + util::shell_quote_path(dir_of(wl, p));
    files.insert(p.workdir + "/workloads/" + wl.uid);
  }
  // Through the supervisors (their own trees: the workload's processes, not the host's); the
  // tag scan only where that fails: the agent is missing (a host that lost its files) or older
  // than supervise-stop (pushed by an earlier tpuctl).
  const std::string agent = agent_of(on);
  std::string script = "{ [ -x " + agent + " ] && " + agent +
                       " agent supervise-stop --format json --grace " + std::to_string(grace_ms) +
                       "ms --tag " + util::shell_quote(workload_tag(wl)) + dirs + "; } || {\n" +
                       stop_tagged_processes_script(k_workload_uid_var, wl.uid, grace_ms) + "}";
  if (remove_files) {
    script += " && rm -rf --";
    for (const auto& f : files) {
      script += " " + util::shell_quote_path(f);
    }
  }
  return script + "\n";
}

// Workers of hosts that share this machine stopped by one session.
constexpr size_t k_shared_chunk = 256;

} // namespace

Expected<std::vector<remote::HostResult>> stop_workers(const Workload& wl,
                                                       const std::vector<WorkerPlan>& plans,
                                                       const remote::SshOptions& ssh,
                                                       bool remove_files) {
  const auto hosts = distinct_hosts(plans);
  const remote::SshOptions o = control_options(ssh, hosts.size(),
                                               std::chrono::milliseconds(wl.termination_grace_ms) +
                                                   std::chrono::seconds(30));
  std::vector<WorkerPlan> targets; // one session each
  std::vector<std::string> commands;
  std::vector<WorkerPlan> shared; // hosts of a local pool: one session serves them all
  for (const auto& h : hosts) {
    if (h.this_machine) {
      shared.push_back(h);
      continue;
    }
    std::vector<WorkerPlan> group;
    std::copy_if(plans.begin(), plans.end(), std::back_inserter(group),
                 [&](const WorkerPlan& p) { return p.host == h.host; });
    targets.push_back(h);
    commands.push_back(stop_command(wl, group, h, wl.termination_grace_ms, remove_files));
  }
  TPUCTL_TRY_ASSIGN(auto ran, remote::run_fanout(jobs_for(targets, commands), o));
  std::vector<remote::HostResult> results(hosts.size());
  auto place = [&](remote::HostResult r, const WorkerPlan& host) {
    for (size_t k = 0; k < hosts.size(); ++k) {
      if (hosts[k].host == host.host) {
        r.index = k;
        r.host = host.host; // the pool's name for it, as errors name hosts
        results[k] = std::move(r);
      }
    }
  };
  for (auto& r : ran) {
    const WorkerPlan& host = targets[r.index];
    place(std::move(r), host);
  }
  // Hosts that share this machine's process table and files: one session stops the workers of
  // many of them and removes their files (one per host would make a local pool's stop
  // quadratic in its size), k_shared_chunk workers a session to keep the command line short; the
  // next host is tried when one cannot be reached.
  std::vector<WorkerPlan> group;
  std::copy_if(plans.begin(), plans.end(), std::back_inserter(group),
               [](const WorkerPlan& p) { return p.this_machine; });
  for (size_t from = 0; from < group.size(); from += k_shared_chunk) {
    const std::vector<WorkerPlan> chunk(
        group.begin() + static_cast<std::ptrdiff_t>(from),
        group.begin() + static_cast<std::ptrdiff_t>(std::min(group.size(), from + k_shared_chunk)));
    remote::HostResult one;
    for (size_t i = 0; i < shared.size() && i < 3; ++i) {
      const WorkerPlan& on = shared[(from / k_shared_chunk + i) % shared.size()];
      const std::string command =
          stop_command(wl, chunk, on, wl.termination_grace_ms, remove_files);
      TPUCTL_TRY_ASSIGN(auto tried, remote::run_fanout(jobs_for({on}, {command}), o));
      one = tried.at(0);
      if (!remote::is_transport_failure(one.outcome)) {
        break;
      }
    }
    for (const auto& p : chunk) {
      place(one, p);
    }
  }
  return results;
}

Expected<std::vector<remote::HostResult>>
remove_workload_files(const Workload& wl, const std::vector<WorkerPlan>& plans,
                      const remote::SshOptions& ssh) {
  auto hosts = distinct_hosts(plans);
  std::vector<std::string> commands;
  for (const auto& p : hosts) {
    commands.push_back("rm -rf -- " + util::shell_quote_path(p.workdir + "/workloads/" + wl.uid));
  }
  return remote::run_fanout(jobs_for(hosts, commands),
                            control_options(ssh, hosts.size(), std::chrono::seconds(30)));
}

Expected<std::vector<remote::HostResult>>
read_logs(const Workload& wl, const std::vector<WorkerPlan>& plans, std::vector<uint64_t>& offsets,
          const remote::SshOptions& ssh, const LogStart& start, const LogLine& on_line) {
  offsets.resize(plans.size(), 0);
  std::vector<std::string> commands;
  // Reads whose first line is the log's size (the offset to go on from), not log text.
  std::vector<bool> sized(plans.size(), false);
  for (size_t i = 0; i < plans.size(); ++i) {
    const std::string dir = dir_of(wl, plans[i]);
    const std::string log = util::shell_quote_path(dir + "/log");
    if (offsets[i] == 0 && (start.tail_lines > 0 || start.since_ms > 0)) {
      // The size now, then the bytes from where `start` says up to it: one consistent cut,
      // whatever the job writes meanwhile.
      sized[i] = true;
      std::string from = "o=0; ";
      if (start.since_ms > 0) { // the size at the last index entry not after since_ms
        from = "o=$(awk -v t=" + std::to_string(start.since_ms) +
               " '$1 <= t {o = $2} END {print o + 0}' " +
               util::shell_quote_path(dir + "/log.index") +
               " 2>/dev/null); [ -n \"$o\" ] && [ \"$o\" -le \"$s\" ] || o=0; ";
      }
      std::string cmd = "[ ! -f " + log + " ] || { s=$(wc -c < " + log + "); " + from +
                        "printf '%s\\n' \"$s\"; tail -c +$((o + 1)) -- " + log +
                        " | head -c $((s - o))";
      if (start.tail_lines > 0) {
        cmd += " | tail -n " + std::to_string(start.tail_lines);
      }
      commands.push_back(cmd + "; }");
    } else {
      commands.push_back("[ ! -f " + log + " ] || tail -c +" + std::to_string(offsets[i] + 1) +
                         " -- " + log);
    }
  }
  // No timeout: a log of any size streams through; a lost host is found by the keepalive.
  remote::SshOptions options = control_options(ssh, plans.size(), std::chrono::seconds(0));
  options.keep_output = false;
  std::vector<bool> sized_seen(plans.size(), false);
  remote::FanoutCallbacks callbacks;
  callbacks.on_line = [&](const remote::HostLine& line) {
    const size_t i = line.index;
    if (i >= plans.size()) {
      return;
    }
    if (sized[i] && !sized_seen[i]) {
      sized_seen[i] = true;
      uint64_t size = 0;
      const auto* first = line.text.data();
      const auto* last = first + line.text.size();
      if (line.complete && std::from_chars(first, last, size).ptr == last) {
        offsets[i] = size;
      } // else not what the command prints: the offset stays, and the next read starts over
      return;
    }
    if (!sized[i]) {
      offsets[i] += line.text.size() + (line.complete ? 1 : 0);
    }
    on_line(i, line.text, line.complete);
  };
  return remote::run_fanout(jobs_for(plans, commands), options, callbacks);
}

} // namespace tpuctl::provision
