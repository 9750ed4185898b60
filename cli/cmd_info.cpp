// `tpuctl info --cluster C [--localqueue | --clusterqueue]`: xpk's info, the cluster's queue as
// Kueue's local and cluster queues show it (provision/workload/cluster_queue_info.hpp).
#include <memory>

#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/output.hpp"
#include "cli/state_access.hpp"
#include "provision/workload/cluster_queue_info.hpp"

namespace tpuctl::cli {

namespace {

struct InfoFlags {
  std::string cluster;
  bool local_queue = false;
  bool cluster_queue = false;
};

// xpk's queue names: its local queue and its cluster queue.
constexpr const char* k_local_queue = "multislice-queue";
constexpr const char* k_cluster_queue = "cluster-queue";

Json queue_row(const provision::ClusterQueueUsage& u, const char* name) {
  return Json{{"queue", name},
              {"admitted_workloads", u.admitted.size()},
              {"pending_workloads", u.pending.size()},
              {"flavor", u.flavor},
              {"resource", u.resource},
              {"chips_used", u.chips_used},
              {"chips_total", u.chips_total}};
}

void print_queue(std::ostream& out, const std::string& title, const Json& row) {
  const std::string cell = row["flavor"].get<std::string>() + ":" + row["resource"].get<std::string>();
  out << title << "\n"
      << render_table({"QUEUE", "ADMITTED_WORKLOADS", "PENDING_WORKLOADS", cell},
                      {{row["queue"].get<std::string>(), row["admitted_workloads"].dump(),
                        row["pending_workloads"].dump(),
                        row["chips_used"].dump() + "/" + row["chips_total"].dump()}});
}

Expected<int> run_info(Context& ctx, const InfoFlags& f) {
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto u, provision::cluster_queue_usage(*store, pool, f.cluster));
  const bool both = !f.local_queue && !f.cluster_queue;
  Json workloads = Json::array();
  for (const auto& name : u.admitted) {
    workloads.push_back(Json{{"name", name}, {"queue_state", "admitted"}});
  }
  for (const auto& name : u.pending) {
    workloads.push_back(Json{{"name", name}, {"queue_state", "pending"}});
  }
  Json data = Json::object();
  data["cluster"] = u.cluster;
  data["workloads"] = workloads;
  if (both || f.local_queue) {
    data["local_queue"] = queue_row(u, k_local_queue);
  }
  if (both || f.cluster_queue) {
    data["cluster_queue"] = queue_row(u, k_cluster_queue);
  }
  TPUCTL_TRY(emit(ctx, data, [](std::ostream& out, const Json& d) {
    if (d.contains("local_queue")) {
      print_queue(out, "Local Queues usage", d["local_queue"]);
    }
    if (d.contains("cluster_queue")) {
      print_queue(out, "Cluster Queues usage", d["cluster_queue"]);
    }
  }));
  return 0;
}

} // namespace

void setup_info(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<InfoFlags>();
  group.add_option("--cluster", f->cluster, "the cluster whose queue to show")
      ->type_name("C")
      ->required();
  auto* lq = group.add_flag("--localqueue", f->local_queue, "only its local queue");
  auto* cq = group.add_flag("--clusterqueue", f->cluster_queue, "only its cluster queue");
  lq->excludes(cq);
  group.footer(
      "xpk's info: a tpuctl cluster's queue is its own, so its local queue (multislice-queue)\n"
      "and its cluster queue (cluster-queue) show the same: workloads admitted (holding\n"
      "slices) and pending (QUEUED), and chips in use against the cluster's, under xpk's\n"
      "flavor name (<slices>x<type>:google.com/tpu).\n"
      "json: cluster, workloads ({name, queue_state: admitted|pending}, the pending in queue\n"
      "order), local_queue and\n"
      "cluster_queue: {queue, admitted_workloads, pending_workloads, flavor, resource,\n"
      "chips_used, chips_total}.");
  registry.bind(group, [f](Context& ctx) { return run_info(ctx, *f); });
}

} // namespace tpuctl::cli
