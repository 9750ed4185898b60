#include "provision/slice/slice_workers.hpp"

#include <algorithm>
#include <cstdlib>

#include "provision/slice/slice_env.hpp"
#include "provision/slice/worker_select.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

Expected<EnvVars> parse_env_items(const std::vector<std::string>& items) {
  EnvVars out;
  ErrorList problems;
  for (const auto& item : items) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      problems.add(ErrorKind::usage,
                   "--env '" + util::printable(item) +
                       "' is not KEY=VALUE (e.g. --env XLA_FLAGS=--xla_dump_to=/tmp)");
      continue;
    }
    if (auto valid = validate_env_name(item.substr(0, eq)); !valid) {
      problems.add(valid.error());
      continue;
    }
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return out;
}

std::string worker_label(const std::string& node, int worker, const std::string& host) {
  return node + "/" + std::to_string(worker) + "@" + host;
}

void mark_partial_job(std::vector<WorkerPlan>& plans) {
  for (auto& p : plans) {
    bool set = false;
    size_t processes = 0;
    for (const auto& [name, value] : p.env) {
      set = set || name == k_jax_init_var;
      if (name == "TPUCTL_NUM_PROCESSES") {
        processes = static_cast<size_t>(std::max(0, std::atoi(value.c_str())));
      }
    }
    if (!set && plans.size() < processes) {
      p.env.emplace_back(std::string(k_jax_init_var), "0");
    }
  }
}

std::string host_workdir(const HostEntry& host) {
  std::string base = host.workdir.empty() ? std::string(k_default_workdir) : host.workdir;
  if (base.front() != '/' && base.rfind("~/", 0) != 0) {
    base = "~/" + base;
  }
  while (base.size() > 1 && base.back() == '/') {
    base.pop_back();
  }
  return base;
}

Expected<std::vector<WorkerPlan>> plan_workers(const TargetNodes& target, const PoolView& pool,
                                               const WorkerSelection& selection) {
  const QueuedResource& qr = target.qr;
  if (qr.state != QrState::active || qr.nodes.empty()) {
    return Error(ErrorKind::failure,
                 "queued resource '" + qr.id + "' is " + std::string(to_string(qr.state)) +
                     ", not ACTIVE: its workers cannot be reached (see 'tpuctl qr describe " +
                     qr.id + "')");
  }
  std::vector<int> nodes = target.node_indices;
  if (!selection.job_nodes.empty()) {
    nodes = selection.job_nodes;
    for (int n : nodes) {
      if (n < 0 || static_cast<size_t>(n) >= qr.nodes.size()) {
        return Error(ErrorKind::failure, "'" + qr.id + "' has no slice " + std::to_string(n) +
                                             " (it has " + std::to_string(qr.nodes.size()) + ")");
      }
    }
  } else if (util::to_lower(selection.node) != "all") {
    nodes.clear();
    for (int i : target.node_indices) {
      if (qr.nodes[static_cast<size_t>(i)].id == selection.node) {
        nodes.push_back(i);
      }
    }
    const bool indices = selection.node.find_first_not_of("0123456789,-") == std::string::npos;
    if (nodes.empty() && indices) {
      // gcloud's form: node indices 0..N-1 of the request, with --worker's grammar.
      TPUCTL_TRY_ASSIGN(
          auto picked, parse_index_selection(selection.node,
                                             static_cast<int>(target.node_indices.size()), "node"));
      for (int i : picked) {
        nodes.push_back(target.node_indices[static_cast<size_t>(i)]);
      }
    }
    if (nodes.empty()) {
      return Error(ErrorKind::not_found,
                   "--node '" + util::printable(selection.node) + "' is not a node of '" + qr.id +
                       "' (nodes: " + util::join(qr.node_ids, ", ") +
                       "; or give their indices, e.g. 0 or 0-1)",
                   "not_found");
    }
  }
  const int workers = static_cast<int>(qr.nodes[static_cast<size_t>(nodes[0])].workers.size());
  TPUCTL_TRY_ASSIGN(auto selected, parse_worker_selection(selection.worker, workers));
  std::vector<WorkerPlan> plans;
  for (int n : nodes) {
    for (int w : selected) {
      TPUCTL_TRY_ASSIGN(auto input, slice_env_input(qr, n, w, pool, selection.job_nodes));
      input.python_env = selection.python_env;
      TPUCTL_TRY_ASSIGN(auto host, worker_host(qr, n, w, pool));
      TPUCTL_TRY_ASSIGN(auto env, worker_env(input, w, selection.profile, selection.user_env));
      WorkerPlan p;
      p.node = qr.nodes[static_cast<size_t>(n)].id;
      p.node_index = n;
      p.worker = w;
      p.host = host.name;
      p.target = ssh_target(pool.info, host);
      p.env = std::move(env);
      p.agent_dir = input.agent_dir;
      p.workdir = host_workdir(host);
      p.this_machine = shares_this_machine(pool.info, host);
      plans.push_back(std::move(p));
    }
  }
  return plans;
}

} // namespace tpuctl::provision
