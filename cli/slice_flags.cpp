#include "cli/slice_flags.hpp"

#include <algorithm>

#include "cli/compat.hpp"
#include "cli/config.hpp"
#include "cli/state_access.hpp"
#include "provision/pool/pools.hpp"
#include "provision/queue/queued_resource.hpp"
#include "provision/slice/qr_ops.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

Expected<UserTarget> split_user_target(const std::string& text) {
  const auto at = text.find('@');
  if (at == std::string::npos) {
    return UserTarget{"", text};
  }
  if (text.find('@', at + 1) != std::string::npos) {
    return usage_error("'" + util::printable(text) +
                       "' has more than one '@': write [USER@]TARGET, e.g. alice@qr-1");
  }
  UserTarget t{text.substr(0, at), text.substr(at + 1)};
  if (t.user.empty() || t.target.empty()) {
    return usage_error("'" + util::printable(text) +
                       "' is not [USER@]TARGET: a user name, '@', then a queued resource or node");
  }
  return t;
}

void add_selection_flags(CLI::App& cmd, SliceFlags& f) {
  cmd.add_option("--worker", f.worker, "all, N, a list (0,2) or a range (1-3); default 0")
      ->type_name("W");
  switch (f.shape) {
  case SliceShape::tpuctl:
    cmd.add_option("--node", f.node,
                   "all (default), a node id, or node indices (0, 0-1) of a queued resource")
        ->type_name("ID");
    break;
  case SliceShape::queued_resource:
    f.node = "0";
    cmd.add_option("--node", f.node,
                   "node indices (0 by default, all, 0,2, 1-3) or a node id of the queued resource")
        ->type_name("N");
    break;
  case SliceShape::tpu_vm:
    break;
  }
}

Expected<std::vector<provision::WorkerPlan>>
plan_slice_workers(Context& ctx, const SliceFlags& f, const UserTarget& target, bool launching) {
  provision::WorkerSelection selection;
  selection.worker = f.worker;
  selection.node = f.shape == SliceShape::tpu_vm ? "all" : f.node;
  TPUCTL_TRY_ASSIGN(selection.user_env, provision::parse_env_items(f.env));
  TPUCTL_TRY_ASSIGN(selection.profile, provision::parse_env_profile(f.env_profile));
  TPUCTL_TRY_ASSIGN(selection.python_env, python_env_setting(f.python_env));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto nodes, provision::resolve_target(*store, pool, target.target));
  if (f.shape == SliceShape::tpu_vm && nodes.node_indices.size() > 1) {
    std::vector<std::string> ids;
    for (int i : nodes.node_indices) {
      ids.push_back(nodes.qr.nodes[static_cast<size_t>(i)].id);
    }
    return usage_error("'" + util::printable(target.target) + "' is a queued resource of " +
                       std::to_string(ids.size()) + " nodes (" + util::join(ids, ", ") +
                       "): name one node, or use 'tpuctl queued-resources ssh " + target.target +
                       " --node=all'");
  }
  TPUCTL_TRY_ASSIGN(auto view, provision::load_pool(*store, pool));
  TPUCTL_TRY_ASSIGN(auto plans, provision::plan_workers(nodes, view, selection));
  if (launching) {
    TPUCTL_TRY(provision::note_launch(*store, pool, nodes.qr));
  }
  if (!target.user.empty()) {
    for (auto& p : plans) {
      p.target.user = target.user;
    }
  }
  return plans;
}

std::string worker_file_name(const std::vector<provision::WorkerPlan>& plans,
                             const provision::WorkerPlan& plan) {
  const bool one_node = std::all_of(plans.begin(), plans.end(),
                                    [&](const auto& p) { return p.node == plans.front().node; });
  return one_node ? std::to_string(plan.worker) : plan.node + "-" + std::to_string(plan.worker);
}

JobIdentity job_identity(const provision::WorkerPlan& p) {
  return JobIdentity{p.node, p.node_index, p.worker, p.host};
}

nlohmann::ordered_json plan_json(const provision::WorkerPlan& p) {
  const JobIdentity id = job_identity(p);
  return identity_json(&id, p.host);
}

std::vector<JobIdentity> job_identities(const std::vector<provision::WorkerPlan>& plans) {
  std::vector<JobIdentity> out;
  out.reserve(plans.size());
  for (const auto& p : plans) {
    out.push_back(job_identity(p));
  }
  return out;
}

remote::SshTarget labelled_target(const provision::WorkerPlan& plan) {
  remote::SshTarget t = plan.target;
  t.name = provision::worker_label(plan);
  return t;
}

} // namespace tpuctl::cli
