// tpuctl tpu-vm list / describe / delete: the nodes of queued resources, as gcloud's
// `compute tpus tpu-vm` shows them.
#include <algorithm>

#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/output.hpp"
#include "cli/qr_view.hpp"
#include "cli/runtime_options.hpp"
#include "cli/state_access.hpp"
#include "provision/pool/ownership.hpp"
#include "provision/pool/pools.hpp"
#include "provision/slice/qr_ops.hpp"
#include "provision/workload/cluster.hpp"
#include "provision/workload/workload.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

struct NodeFlags {
  std::string node;
  bool async = false;
  bool force = false;
  bool override_owner = false;
  SshFlags ssh;
};

// A node of a cluster's slices runs that cluster's workloads: deleting it under running ones is
// refused without --force, as `cluster delete` refuses (the workloads then fail, naming the
// deleted slice). Errors: failure naming the running workloads; the store's.
Status check_no_running_workloads(state::StateStore& store, const std::string& pool,
                                  const std::string& node, bool force) {
  TPUCTL_TRY_ASSIGN(auto target, provision::resolve_node(store, pool, node));
  const auto label = target.qr.labels.find(provision::k_cluster_label);
  if (force || label == target.qr.labels.end()) {
    return tpuctl::ok();
  }
  TPUCTL_TRY_ASSIGN(auto workloads, provision::list_workloads(store, pool, label->second));
  std::vector<std::string> running;
  for (const auto& w : workloads) {
    if (!provision::is_terminal(w.state)) {
      running.push_back(w.name);
    }
  }
  if (running.empty()) {
    return tpuctl::ok();
  }
  return Error(ErrorKind::failure,
               "node '" + node + "' is a slice of cluster '" + label->second +
                   "', which has running workloads (" + util::join(running, ", ") +
                   "): delete them first with 'tpuctl workload delete NAME', or add --force "
                   "(they fail, naming this slice)");
}

Expected<int> run_node_delete(Context& ctx, const NodeFlags& f) {
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto drive, drive_options(ctx, f.ssh));
  TPUCTL_TRY(check_no_running_workloads(*store, pool, f.node, f.force));
  TPUCTL_TRY_ASSIGN(auto target, provision::resolve_node(*store, pool, f.node));
  std::vector<state::Event> overrides;
  TPUCTL_TRY(provision::check_queued_resource_owner(*store, pool, target.qr.id, "delete a node of",
                                                    f.override_owner, overrides));
  const auto clock = state::system_clock();
  TPUCTL_TRY_ASSIGN(auto del, provision::delete_node(*store, pool, f.node, clock));
  TPUCTL_TRY(provision::record_overrides(*store, overrides));
  const std::string qr_id = del.before.id;
  if (del.whole_request && del.after) {
    if (f.async) {
      provision::spawn_driver(launcher(ctx, f.ssh), pool);
    } else {
      TPUCTL_TRY(follow(
          ctx, *store, pool, qr_id,
          [](const std::optional<provision::QueuedResource>& q) { return !q; },
          std::chrono::milliseconds(0), drive, f.ssh, true));
    }
  } else if (!del.whole_request) {
    // Kill what ran on the node's hosts; the hosts are already free.
    TPUCTL_TRY_ASSIGN(auto view, provision::load_pool(*store, pool));
    provision::QueuedResource only = del.before;
    only.nodes = {del.node};
    auto stopped = provision::stop_slice_processes(only, view, drive.provision.ssh);
    if (!stopped && !ctx.globals.quiet) {
      *ctx.err << "tpuctl: warning: could not stop the node's processes: "
               << stopped.error().message << "\n";
    }
  }
  TPUCTL_TRY(provision::reconcile_and_spawn(launcher(ctx), *store));
  TPUCTL_TRY(
      emit(ctx, Json{{"name", f.node}, {"queued_resource", qr_id}, {"deleted", true}},
           [&](std::ostream& os, const Json&) { os << "deleted node '" << f.node << "'\n"; }));
  return 0;
}

} // namespace

void setup_tpu_vm(CLI::App& group, Registry& registry) {
  add_qr_create(group, registry, true);
  setup_tpu_vm_accelerator_types(group, registry);
  setup_slice_ssh_scp(group, registry, false);
  registry.add(group, "list", "nodes of the pool's queued resources",
               [](Context& ctx) -> Expected<int> {
                 TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
                 TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
                 TPUCTL_TRY_ASSIGN(auto all, provision::list_queued_resources(*store, pool));
                 Json rows = Json::array();
                 for (const auto& q : all) {
                   for (size_t i = 0; nodes_listed(q) && i < q.node_ids.size(); ++i) {
                     rows.push_back(node_json(q, i));
                   }
                 }
                 provision::QueuedResource example;
                 example.node_ids = {""};
                 TPUCTL_TRY(emit_list(ctx, rows, k_node_columns, node_json(example, 0)));
                 return 0;
               });

  auto describe = std::make_shared<std::string>();
  CLI::App* d = registry.add(
      group, "describe", "one node: state, workers in worker order",
      [describe](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
        TPUCTL_TRY_ASSIGN(auto target, provision::resolve_node(*store, pool, *describe));
        const auto& ids = target.qr.node_ids;
        const auto at = std::find(ids.begin(), ids.end(), *describe);
        if (at == ids.end() || !nodes_listed(target.qr)) {
          return Error(ErrorKind::not_found,
                       "'" + *describe + "' has no node now (queued resource '" + target.qr.id +
                           "' is " + std::string(to_string(target.qr.state)) +
                           "; its nodes exist once it is placed)",
                       "not_found");
        }
        Json j = node_json(target.qr, static_cast<size_t>(at - ids.begin()));
        TPUCTL_TRY(emit(ctx, j, [&](std::ostream& os, const Json&) {
          os << "name:             " << cell_text(j["name"])
             << "\nqueued_resource:  " << target.qr.id
             << "\nstate:            " << cell_text(j["state"])
             << "\naccelerator_type: " << target.qr.accelerator_type << "\n\n";
          std::vector<std::vector<std::string>> rows;
          for (const auto& w : j["workers"]) {
            rows.push_back({cell_text(w["worker"]), cell_text(w["host"]), cell_text(w["address"])});
          }
          os << render_table({"WORKER", "HOST", "ADDRESS"}, rows);
        }));
        return 0;
      });
  d->add_option("NODE", *describe, "the node id")->required();

  auto del = std::make_shared<NodeFlags>();
  CLI::App* x = registry.add(group, "delete", "delete a node: kill its processes, free its hosts",
                             [del](Context& ctx) { return run_node_delete(ctx, *del); });
  x->add_option("NODE", del->node, "the node id")->required();
  x->add_flag("--async", del->async, "return at once");
  x->add_flag("--override-owner", del->override_owner,
              "delete a node of another owner's request anyway (recorded with both names)");
  x->add_flag("--force", del->force,
              "delete it even while its cluster's workloads run (they fail; else refused)");
  add_ssh_policy_flags(*x, del->ssh);
  x->footer("Deleting the only (or last) node of a queued resource deletes the request too.");
}

} // namespace tpuctl::cli
