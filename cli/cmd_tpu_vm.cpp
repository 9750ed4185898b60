// tpuctl tpu-vm list / describe / delete: the nodes of queued resources, as gcloud's
// `compute tpus tpu-vm` shows them.
#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/output.hpp"
#include "cli/qr_runtime.hpp"
#include "cli/qr_view.hpp"
#include "cli/state_access.hpp"
#include "provision/pools.hpp"
#include "provision/qr_ops.hpp"

namespace tpuctl::cli {

namespace {

struct NodeFlags {
  std::string node;
  bool async = false;
  SshFlags ssh;
};

Expected<int> run_node_delete(Context& ctx, const NodeFlags& f) {
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto drive, drive_options(ctx, f.ssh));
  const auto clock = state::system_clock();
  TPUCTL_TRY_ASSIGN(auto del, provision::delete_node(*store, pool, f.node, clock));
  const std::string qr_id = del.before.id;
  if (del.whole_request && del.after) {
    if (f.async) {
      spawn_driver(ctx, pool, f.ssh);
    } else {
      TPUCTL_TRY(follow(
          ctx, *store, pool, qr_id,
          [](const std::optional<provision::QueuedResource>& q) { return !q; },
          std::chrono::milliseconds(0), drive, f.ssh));
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
  TPUCTL_TRY(reconcile_and_spawn(ctx, *store));
  emit(ctx, Json{{"name", f.node}, {"queued_resource", qr_id}, {"deleted", true}},
       [&](std::ostream& os, const Json&) { os << "deleted node '" << f.node << "'\n"; });
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
                   for (const auto& n : q.nodes) {
                     rows.push_back(node_json(q, n));
                   }
                 }
                 TPUCTL_TRY(emit_list(ctx, rows, k_node_columns));
                 return 0;
               });

  auto describe = std::make_shared<std::string>();
  CLI::App* d = registry.add(
      group, "describe", "one node: state, workers in worker order",
      [describe](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
        TPUCTL_TRY_ASSIGN(auto target, provision::resolve_target(*store, pool, *describe));
        const provision::QrNode* node = provision::find_node(target.qr, *describe);
        if (node == nullptr) {
          return Error(ErrorKind::not_found,
                       "'" + *describe + "' has no node with workers now (queued resource '" +
                           target.qr.id + "' is " + std::string(to_string(target.qr.state)) + ")",
                       "not_found");
        }
        Json j = node_json(target.qr, *node);
        emit(ctx, j, [&](std::ostream& os, const Json&) {
          os << "name:             " << node->id << "\nqueued_resource:  " << target.qr.id
             << "\nstate:            " << node_state(target.qr)
             << "\naccelerator_type: " << target.qr.accelerator_type << "\n\n";
          std::vector<std::vector<std::string>> rows;
          for (const auto& w : node->workers) {
            rows.push_back({std::to_string(w.worker), w.host, w.address});
          }
          os << render_table({"WORKER", "HOST", "ADDRESS"}, rows);
        });
        return 0;
      });
  d->add_option("NODE", *describe, "the node id")->required();

  auto del = std::make_shared<NodeFlags>();
  CLI::App* x = registry.add(group, "delete", "delete a node: kill its processes, free its hosts",
                             [del](Context& ctx) { return run_node_delete(ctx, *del); });
  x->add_option("NODE", del->node, "the node id")->required();
  x->add_flag("--async", del->async, "return at once");
  add_ssh_policy_flags(*x, del->ssh);
  x->footer("Deleting the only (or last) node of a queued resource deletes the request too.");
}

} // namespace tpuctl::cli
