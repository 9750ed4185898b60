// tpuctl cluster: xpk's `cluster create/list/describe/delete` on the team's own pool. A cluster
// is one queued resource of --num-slices slices (provision/workload/cluster.hpp); creating it
// follows the request until ACTIVE exactly as `qr create` does, and deleting it stops its workloads
// first.
#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/config.hpp"
#include "cli/output.hpp"
#include "cli/qr_view.hpp"
#include "cli/runtime_options.hpp"
#include "cli/state_access.hpp"
#include "cli/terminal.hpp"
#include "cli/values.hpp"
#include "cli/workload_view.hpp"
#include "provision/controller/monitors.hpp"
#include "provision/pool/ownership.hpp"
#include "provision/pool/pools.hpp"
#include "provision/slice/qr_ops.hpp"
#include "provision/workload/cluster.hpp"
#include "provision/workload/cluster_resize.hpp"
#include "provision/workload/workload.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

namespace {

using provision::Cluster;
using provision::QrState;
using provision::QueuedResource;

struct ClusterFlags {
  std::string name;
  std::string flag_name; // --cluster on describe and delete (xpk's form of NAME)
  std::string tpu_type;
  int num_slices = 1;
  bool reserved = false;
  bool spot = false;
  bool on_demand = false;
  bool flex = false;
  std::string reservation;
  std::string on_preemption = "requeue";
  bool async = false;
  bool force = false;
  bool override_owner = false;
  std::string timeout;
  SshFlags ssh;
};

Expected<Json> describe_json(state::StateStore& store, const Cluster& c) {
  TPUCTL_TRY_ASSIGN(auto qr, provision::cluster_queued_resource(store, c));
  TPUCTL_TRY_ASSIGN(auto workloads, provision::list_workloads(store, c.pool, c.name));
  return cluster_json(c, qr, workloads);
}

// xpk's capacity flags as tiers: exactly one at most ("specify only one of ...").
Expected<provision::Tier> capacity_tier(const ClusterFlags& f) {
  std::vector<TierFlag> given;
  if (f.on_demand) {
    given.emplace_back("--on-demand", provision::Tier::standard);
  }
  if (f.reserved) {
    given.emplace_back("--reserved", provision::Tier::reserved);
  }
  if (!f.reservation.empty()) {
    given.emplace_back("--reservation", provision::Tier::reserved);
  }
  if (f.spot) {
    given.emplace_back("--spot", provision::Tier::spot);
  }
  if (f.flex) {
    given.emplace_back("--flex", provision::Tier::flex_start);
  }
  return tier_of(given, true,
                 " exclude each other: specify only one of --on-demand, --reservation (or "
                 "--reserved), --spot or --flex");
}

Expected<std::string> cluster_name(const ClusterFlags& f) {
  return positional_or_flag(f.name, f.flag_name, "cluster", "NAME or --cluster NAME");
}

// `cluster create` on an existing cluster: xpk's resize (cluster_resize.hpp). Its workloads'
// monitors are made sure of first: an eviction is theirs to carry out.
// The same `cluster create` for a background tpuctl: a grow with --async is carried on there
// (waiting for room, then provisioning), as --async carries on a new cluster.
std::vector<std::string> background_resize(const ClusterFlags& f) {
  std::vector<std::string> args{
      "cluster",         "create",        "--cluster",    f.name,
      "--tpu-type",      f.tpu_type,      "--num-slices", std::to_string(f.num_slices),
      "--on-preemption", f.on_preemption, "--quiet"};
  for (const auto& [given, flag] : {std::pair<bool, const char*>{f.on_demand, "--on-demand"},
                                    {f.reserved, "--reserved"},
                                    {f.spot, "--spot"},
                                    {f.flex, "--flex"}}) {
    if (given) {
      args.emplace_back(flag);
    }
  }
  if (!f.reservation.empty()) {
    args.insert(args.end(), {"--reservation", f.reservation});
  }
  if (!f.timeout.empty()) {
    args.insert(args.end(), {"--timeout", f.timeout});
  }
  if (f.override_owner) {
    args.emplace_back("--override-owner");
  }
  return args;
}

Expected<int> run_resize(Context& ctx, const ClusterFlags& f, state::StateStore& store,
                         const provision::ClusterRequest& req,
                         const provision::ProvisionOptions& provision,
                         const provision::ResizeWait& wait, const Cluster& existing) {
  // Resizing another owner's cluster (a shrink evicts its workloads, a grow charges its project)
  // needs the intent, as deleting it does; recorded once the resize is done.
  std::vector<state::Event> overrides;
  if (req.num_slices != existing.num_slices) {
    TPUCTL_TRY(provision::check_owner_intent(store,
                                             {state::Kind::cluster, req.pool, existing.name,
                                              existing.owner, "cluster '" + existing.name + "'"},
                                             "resize", f.override_owner, overrides));
  }
  TPUCTL_TRY_ASSIGN(auto workloads, provision::list_workloads(store, req.pool, req.name));
  provision::ensure_monitors(launcher(ctx), store, workloads);
  if (f.async && req.num_slices > existing.num_slices) {
    // Checked here first (another type or tier is refused now, in one line), then grown there.
    TPUCTL_TRY(provision::check_resize(store, req));
    provision::spawn_detached(launcher(ctx, f.ssh), req.pool, background_resize(f),
                              "cluster-" + req.name + "-resize.log");
    TPUCTL_TRY_ASSIGN(Json j, describe_json(store, existing));
    j["resize"] =
        Json{{"from", existing.num_slices}, {"to", req.num_slices},     {"added", Json::array()},
             {"removed", Json::array()},    {"evicted", Json::array()}, {"async", true}};
    TPUCTL_TRY(emit(ctx, j, [&](std::ostream& os, const Json& data) {
      os << "cluster " << req.name << ": growing " << existing.num_slices << " -> "
         << req.num_slices << " slices in the background (see 'tpuctl cluster describe " << req.name
         << "')\n";
      print_cluster(os, data);
    }));
    return 0;
  }
  auto progress = make_progress(ctx);
  TPUCTL_TRY_ASSIGN(auto resized, provision::resize_cluster(
                                      store, req, f.force, provision, wait, state::system_clock(),
                                      [&](const std::string& line) { progress->line(line); }));
  TPUCTL_TRY(provision::record_overrides(store, overrides));
  TPUCTL_TRY_ASSIGN(Json j, describe_json(store, resized.cluster));
  j["resize"] = Json{{"from", resized.from},       {"to", resized.cluster.num_slices},
                     {"added", resized.added},     {"removed", resized.removed},
                     {"evicted", resized.evicted}, {"async", false}};
  TPUCTL_TRY(emit(ctx, j, [&](std::ostream& os, const Json& data) {
    os << "cluster " << req.name << ": " << resized.from << " -> " << resized.cluster.num_slices
       << " slices";
    if (!resized.added.empty()) {
      os << " (added " << util::join(resized.added, ", ") << ")";
    }
    if (!resized.removed.empty()) {
      os << " (removed " << util::join(resized.removed, ", ") << ")";
    }
    if (!resized.evicted.empty()) {
      os << " (evicted " << util::join(resized.evicted, ", ") << ")";
    }
    os << "\n";
    print_cluster(os, data);
  }));
  return 0;
}

Expected<int> run_create(Context& ctx, const ClusterFlags& f) {
  TPUCTL_TRY_ASSIGN(auto tier, capacity_tier(f));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto timeout, util::parse_optional_duration(f.timeout, "--timeout"));
  TPUCTL_TRY_ASSIGN(auto drive, drive_options(ctx, f.ssh));
  provision::ClusterRequest req;
  req.name = f.name;
  req.pool = pool;
  req.tpu_type = f.tpu_type;
  req.num_slices = f.num_slices;
  req.tier = tier;
  req.ssh = ssh_settings(f.ssh);
  TPUCTL_TRY_ASSIGN(req.project, charged_project(ctx.globals));
  TPUCTL_TRY_ASSIGN(req.on_preemption, provision::parse_on_preemption(f.on_preemption));
  const auto clock = state::system_clock();
  TPUCTL_TRY_ASSIGN(auto clusters, provision::list_clusters(*store, pool));
  for (const auto& existing : clusters) {
    if (existing.name == f.name) {
      return run_resize(ctx, f, *store, req, drive.provision,
                        provision::ResizeWait{!f.async, timeout}, existing);
    }
  }
  TPUCTL_TRY_ASSIGN(auto created, provision::create_cluster(*store, req, clock));
  Cluster cluster = created.first;
  const std::string what = "cluster '" + f.name + "'";
  auto carried =
      carry_on(ctx, *store, created.second, f.async, timeout, drive, f.ssh, what, "cluster");
  // What exists is shown whatever happens next; the queued resource alone when the cluster's
  // full description cannot be read.
  Json j;
  auto show = [&]() -> Status {
    auto described = describe_json(*store, cluster);
    j = described ? *described : qr_json(carried.qr);
    return emit(ctx, j, j.contains("num_slices") ? TableRenderer(print_cluster) : TableRenderer());
  };
  if (carried.failed) {
    if (!carried.gone) {
      (void)show();
    }
    return *carried.failed;
  }
  if (!carried.done && !carried.gone) {
    TPUCTL_TRY(show());
    return Error(ErrorKind::capacity,
                 "cluster '" + f.name + "' is still " + std::string(to_string(carried.qr.state)) +
                     " after --timeout " + f.timeout +
                     " (its slices stay queued; see 'tpuctl cluster describe " + f.name + "')");
  }
  TPUCTL_TRY(show());
  if (!f.async && j["state"] != "ACTIVE") {
    return Error(ErrorKind::failure, "cluster '" + f.name + "' is " + cell_text(j["state"]) +
                                         (!j.contains("error") || j["error"].is_null()
                                              ? ""
                                              : ": " + cell_text(j["error"]["code"]) + ": " +
                                                    cell_text(j["error"]["message"])));
  }
  return 0;
}

Expected<int> run_list(Context& ctx) {
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto clusters, provision::list_clusters(*store, pool));
  Json rows = Json::array();
  for (const auto& c : clusters) {
    TPUCTL_TRY_ASSIGN(auto j, describe_json(*store, c));
    rows.push_back(std::move(j)); // every field, so --filter can use any
  }
  TPUCTL_TRY(emit_list(ctx, rows, k_cluster_columns, cluster_json(Cluster{}, std::nullopt, {})));
  return 0;
}

Expected<int> run_describe(Context& ctx, const ClusterFlags& f) {
  TPUCTL_TRY_ASSIGN(auto name, cluster_name(f));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto cluster, provision::load_cluster(*store, pool, name));
  TPUCTL_TRY_ASSIGN(auto j, describe_json(*store, cluster));
  TPUCTL_TRY(emit(ctx, j, print_cluster));
  return 0;
}

Expected<int> run_delete(Context& ctx, const ClusterFlags& given) {
  ClusterFlags f = given;
  TPUCTL_TRY_ASSIGN(f.name, cluster_name(given));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto cluster, provision::load_cluster(*store, pool, f.name));
  TPUCTL_TRY_ASSIGN(auto timeout, util::parse_optional_duration(f.timeout, "--timeout"));
  TPUCTL_TRY_ASSIGN(auto drive, drive_options(ctx, f.ssh));
  TPUCTL_TRY_ASSIGN(auto workloads, provision::list_workloads(*store, pool, cluster.name));
  std::vector<std::string> running;
  for (const auto& w : workloads) {
    if (!provision::is_terminal(w.state)) {
      running.push_back(w.name);
    }
  }
  if (!running.empty() && !f.force) {
    return Error(ErrorKind::failure,
                 "cluster '" + f.name + "' has running workloads (" + util::join(running, ", ") +
                     "): delete them first with 'tpuctl workload delete NAME', or add --force "
                     "to stop them");
  }
  // The cluster and every workload that goes with it: another owner's needs the intent.
  std::vector<state::Event> overrides;
  auto intent = [&](const provision::OwnedObject& o, const std::string& action) {
    return provision::check_owner_intent(*store, o, action, f.override_owner, overrides);
  };
  TPUCTL_TRY(intent(
      {state::Kind::cluster, pool, cluster.name, cluster.owner, "cluster '" + cluster.name + "'"},
      "delete"));
  for (const auto& w : workloads) {
    if (!provision::is_terminal(w.state)) {
      TPUCTL_TRY(intent({state::Kind::workload, pool, w.name, w.owner,
                         "workload '" + w.name + "' on cluster '" + cluster.name + "'"},
                        "stop"));
    }
  }
  TPUCTL_TRY_ASSIGN(auto monitor, monitor_options(ctx, f.ssh));
  for (const auto& w : workloads) {
    if (!ctx.globals.quiet && !provision::is_terminal(w.state)) {
      *ctx.err << "tpuctl: stopping workload '" << w.name << "'\n";
    }
    TPUCTL_TRY(provision::delete_workload(*store, pool, w.name, f.force, monitor));
  }
  const auto clock = state::system_clock();
  TPUCTL_TRY_ASSIGN(auto qr, provision::cluster_queued_resource(*store, cluster));
  if (qr) {
    TPUCTL_TRY_ASSIGN(auto deleting, provision::begin_delete(*store, pool, cluster.queued_resource,
                                                             true, clock, true));
    if (deleting) {
      TPUCTL_TRY_ASSIGN(auto followed,
                        follow(
                            ctx, *store, pool, cluster.queued_resource,
                            [](const std::optional<QueuedResource>& q) { return !q.has_value(); },
                            timeout, drive, f.ssh, true));
      if (!followed.done && followed.waiting_for.empty()) {
        return Error(ErrorKind::capacity, "cluster '" + f.name +
                                              "': its slices are still DELETING after --timeout " +
                                              f.timeout + " (a background tpuctl finishes it)");
      }
    }
  }
  state::Event gone; // the cluster's own line in the audit trail
  gone.pool = pool;
  gone.subject_kind = state::Kind::cluster;
  gone.subject = cluster.name;
  gone.type = "DELETED";
  auto removed =
      store->commit({state::RemoveOp{state::record_key(state::Kind::cluster, pool, cluster.name),
                                     state::k_any_version},
                     state::EventOp{gone}});
  if (!removed && !state::has_reason(removed.error(), state::reason::k_not_found)) {
    return removed.error();
  }
  TPUCTL_TRY(provision::record_overrides(*store, overrides));
  TPUCTL_TRY(provision::reconcile_and_spawn(launcher(ctx),
                                            *store)); // freed hosts may start waiting requests
  Json j{{"name", cluster.name}, {"pool", pool}, {"deleted", true}};
  TPUCTL_TRY(emit(ctx, j, [&](std::ostream& os, const Json&) {
    os << "deleted cluster '" << cluster.name << "' ("
       << util::counted(workloads.size(), "workload") << ", queued resource '"
       << cluster.queued_resource << "')\n";
  }));
  return 0;
}

} // namespace

void setup_cluster(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<ClusterFlags>();
  CLI::App* create = registry.add(group, "create",
                                  "create a cluster of N slices through a queued resource; wait "
                                  "until ACTIVE",
                                  [f](Context& ctx) { return run_create(ctx, *f); });
  create->add_option("--cluster", f->name, "the cluster's name (lowercase, digits, '-')")
      ->required()
      ->type_name("NAME");
  create
      ->add_option("--tpu-type,--device-type", f->tpu_type,
                   "accelerator type, e.g. v5litepod-16, v4-32, v6e-4x4")
      ->required()
      ->type_name("TYPE");
  create->add_option("--num-slices", f->num_slices, "slices (default 1); MEGASCALE_* spans them")
      ->type_name("N")
      ->check(count_in(1, provision::k_max_cluster_slices));
  create->add_flag("--on-demand", f->on_demand, "standard tier (the default): never preempted");
  create->add_flag("--reserved", f->reserved, "reserved tier: queued before everything else");
  create
      ->add_option("--reservation", f->reservation,
                   "reserved tier (one reservation per pool here; the name is not used)")
      ->type_name("R");
  create->add_flag("--spot", f->spot, "spot tier: preempted when a higher tier needs its hosts");
  create->add_flag("--flex", f->flex,
                   "flex-start tier (qr create --provisioning-model=flex-start)");
  create
      ->add_option("--on-preemption", f->on_preemption,
                   "requeue (default): a preempted cluster goes back to the queue and its "
                   "workloads resume when it is ACTIVE again; suspend: it stays SUSPENDED")
      ->type_name("P");
  create->add_flag("--async", f->async, "return at once; a background tpuctl carries it on");
  create->add_flag("--force", f->force,
                   "resizing: remove held slices too, evicting their workloads with their grace");
  create->add_flag("--override-owner", f->override_owner,
                   "resizing another owner's cluster: do it anyway, recorded");
  create->add_option("--timeout", f->timeout, "stop waiting after this long (exit 3; 0: no limit)")
      ->type_name("D")
      ->check(timeout_duration());
  add_ssh_policy_flags(*create, f->ssh);
  create->footer("Waits until the cluster's slices are ACTIVE (exit 0) or FAILED (exit 1),\n"
                 "printing each state on stderr.\n\nExamples:\n"
                 "  tpuctl cluster create --cluster demo --tpu-type v5litepod-16\n"
                 "  tpuctl cluster create --cluster big --tpu-type v5litepod-8 --num-slices 2");

  registry.add(group, "list", "clusters of the pool: type, slices, state, running workloads",
               [](Context& ctx) { return run_list(ctx); });

  auto d = std::make_shared<ClusterFlags>();
  CLI::App* describe = registry.add(group, "describe", "a cluster's slices, workers and workloads",
                                    [d](Context& ctx) { return run_describe(ctx, *d); });
  describe->add_option("NAME", d->name, "the cluster (or --cluster NAME)");
  describe->add_option("--cluster", d->flag_name, "the cluster (xpk's form of NAME)")
      ->type_name("NAME");

  auto del = std::make_shared<ClusterFlags>();
  CLI::App* remove =
      registry.add(group, "delete", "delete a cluster: its workloads, slices and hosts' claims",
                   [del](Context& ctx) { return run_delete(ctx, *del); });
  remove->add_option("NAME", del->name, "the cluster (or --cluster NAME)");
  remove->add_option("--cluster", del->flag_name, "the cluster (xpk's form of NAME)")
      ->type_name("NAME");
  remove->add_flag("--force", del->force, "stop running workloads first (else refused)");
  remove->add_flag("--override-owner", del->override_owner,
                   "delete another owner's cluster (or stop their workloads) anyway, recorded");
  remove
      ->add_option("--timeout", del->timeout, "stop waiting after this long (exit 3; 0: no limit)")
      ->type_name("D")
      ->check(timeout_duration());
  add_ssh_policy_flags(*remove, del->ssh);
}

} // namespace tpuctl::cli
