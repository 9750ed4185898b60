// tpuctl queued-resources (alias qr): create, list, describe, delete, reset, wait.
// gcloud's `compute tpus queued-resources` on the team's own pool; see provision/slice/qr_ops.hpp
// for the rules and provision/queue/scheduler.hpp for the queue.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <tuple>

#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/config.hpp"
#include "cli/output.hpp"
#include "cli/qr_view.hpp"
#include "cli/runtime_options.hpp"
#include "cli/state_access.hpp"
#include "cli/values.hpp"
#include "provision/pool/pools.hpp"
#include "provision/slice/qr_ops.hpp"
#include "provision/slice/secrets.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

Expected<int> watch_queued_resources(Context& ctx, state::StateStore& store,
                                     const std::string& pool,
                                     std::chrono::milliseconds timeout); // cmd_qr_watch.cpp

namespace {

using provision::QrState;
using provision::QueuedResource;

struct CreateFlags {
  std::string id, accelerator_type, type, topology, node_id, node_prefix, runtime_version;
  std::vector<std::string> env_secrets; // --env-secret NAME, for the startup script
  bool node_id_given = false, node_prefix_given = false; // an empty value is not "the default"
  int node_count = 0;
  bool reserved = false, spot = false, best_effort = false, async = false, dry_run = false;
  bool guaranteed = false, preemptible = false;
  bool tpu_vm = false; // `tpu-vm create NODE`: one node named NODE
  std::string provisioning_model, reservation;
  std::string valid_until_duration, valid_until_time, valid_after_duration, valid_after_time;
  std::string max_run_duration, request_id;
  std::string on_preemption = "suspend";
  std::vector<std::string> labels, metadata, metadata_from_file;
  std::string timeout;
  SshFlags ssh;
};

Expected<std::map<std::string, std::string>>
key_values(const std::vector<std::string>& items, const std::string& flag, ErrorList& errors) {
  std::map<std::string, std::string> out;
  for (const auto& item : items) {
    for (const auto& part : util::split(item, ',')) {
      auto eq = part.find('=');
      if (eq == std::string::npos || eq == 0) {
        errors.add(usage_error(flag + " '" + util::printable(part) +
                               "' is not KEY=VALUE: write e.g. " + flag + " team=ml"));
        continue;
      }
      out[part.substr(0, eq)] = part.substr(eq + 1);
    }
  }
  return out;
}

Expected<provision::CreateRequest> build_request(const CreateFlags& f, const std::string& pool,
                                                 int64_t now) {
  ErrorList errors;
  provision::CreateRequest r;
  r.id = f.id;
  r.pool = pool;
  r.accelerator_type = f.accelerator_type;
  r.type = f.type;
  r.topology = f.topology;
  r.node_id = f.node_id;
  r.node_count = f.node_count;
  r.node_prefix = f.node_prefix;
  r.runtime_version = f.runtime_version;
  r.request_id = f.request_id;
  for (const auto& [given, value, flag] :
       {std::tuple{f.node_id_given, f.node_id, "--node-id"},
        std::tuple{f.node_prefix_given, f.node_prefix, "--node-prefix"}}) {
    if (given && value.empty()) {
      errors.add(usage_error(std::string(flag) + " is empty: give a name such as 'qr-1', or leave "
                                                 "the flag out to use the queued resource id"));
    }
  }
  // The tier: each tier flag names one; gcloud does not declare them exclusive, so flags that
  // agree (--spot --provisioning-model=SPOT) are fine and only a conflict is refused.
  std::vector<TierFlag> tiers;
  if (f.reserved) {
    tiers.emplace_back("--reserved", provision::Tier::reserved);
  }
  if (!f.reservation.empty()) {
    tiers.emplace_back("--reservation", provision::Tier::reserved);
  }
  if (f.spot || f.preemptible) {
    tiers.emplace_back(f.spot ? "--spot" : "--preemptible", provision::Tier::spot);
  }
  if (f.best_effort) {
    tiers.emplace_back("--best-effort", provision::Tier::best_effort);
  }
  if (f.guaranteed) {
    tiers.emplace_back("--guaranteed", provision::Tier::standard);
  }
  if (!f.provisioning_model.empty()) {
    const std::string model = enum_value(f.provisioning_model);
    const std::string shown = "--provisioning-model=" + f.provisioning_model;
    if (model == "flex-start") {
      tiers.emplace_back(shown, provision::Tier::flex_start);
    } else if (model == "standard") {
      tiers.emplace_back(shown, provision::Tier::standard);
    } else if (model == "spot") {
      tiers.emplace_back(shown, provision::Tier::spot);
    } else if (model == "reservation-bound") {
      tiers.emplace_back(shown, provision::Tier::reserved);
    } else {
      errors.add(usage_error("--provisioning-model '" + util::printable(f.provisioning_model) +
                             "' is not one of standard, spot, reservation-bound, flex-start "
                             "(any case)"));
    }
  }
  if (auto tier = tier_of(tiers, false,
                          " ask for different tiers: give one of --reserved, --spot, "
                          "--best-effort, --guaranteed or --provisioning-model");
      tier) {
    r.tier = *tier;
  } else {
    errors.add(tier.error());
  }
  auto when = [&](const std::string& duration, const std::string& time, const char* dflag,
                  const char* tflag) -> int64_t {
    if (!duration.empty() && !time.empty()) {
      errors.add(usage_error(std::string(dflag) + " and " + tflag + " are mutually exclusive"));
      return 0;
    }
    if (!duration.empty()) {
      auto d = util::parse_duration(duration, dflag);
      if (!d) {
        errors.add(d.error());
        return 0;
      }
      return now + d->count();
    }
    if (!time.empty()) {
      auto t = util::parse_timestamp(time, tflag);
      if (!t) {
        errors.add(t.error());
        return 0;
      }
      return *t;
    }
    return 0;
  };
  r.valid_until_ms = when(f.valid_until_duration, f.valid_until_time, "--valid-until-duration",
                          "--valid-until-time");
  r.valid_after_ms = when(f.valid_after_duration, f.valid_after_time, "--valid-after-duration",
                          "--valid-after-time");
  if (auto p = provision::parse_on_preemption(f.on_preemption); p) {
    r.on_preemption = *p;
  } else {
    errors.add(p.error());
  }
  if (!f.max_run_duration.empty()) {
    auto d = util::parse_duration(f.max_run_duration, "--max-run-duration");
    if (!d) {
      errors.add(d.error());
    } else {
      r.max_run_duration_ms = d->count();
    }
  }
  auto labels = key_values(f.labels, "--labels", errors);
  for (const auto& [k, v] : *labels) {
    auto parsed = provision::parse_label(k + "=" + v, "--labels");
    if (!parsed) {
      errors.add(parsed.error());
    } else {
      r.labels[parsed->first] = parsed->second;
    }
  }
  r.metadata = *key_values(f.metadata, "--metadata", errors);
  if (auto secrets = provision::secrets_from_environment(f.env_secrets); secrets) {
    r.secrets = *secrets;
  } else {
    errors.add(secrets.error());
  }
  for (const auto& item : f.metadata_from_file) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      errors.add(usage_error("--metadata-from-file '" + util::printable(item) +
                             "' is not KEY=FILE: write e.g. startup-script=./setup.sh"));
      continue;
    }
    std::ifstream in(item.substr(eq + 1), std::ios::binary);
    if (!in) {
      errors.add(usage_error("--metadata-from-file: cannot read '" +
                             util::printable(item.substr(eq + 1)) + "'"));
      continue;
    }
    std::stringstream text;
    text << in.rdbuf();
    r.metadata[item.substr(0, eq)] = text.str();
  }
  if (!errors.empty()) {
    return errors.combined();
  }
  return r;
}

Expected<int> run_create(Context& ctx, const CreateFlags& f) {
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  const auto clock = state::system_clock();
  TPUCTL_TRY_ASSIGN(auto request, build_request(f, pool, state::to_unix_ms(clock())));
  TPUCTL_TRY_ASSIGN(request.project, charged_project(ctx.globals));
  TPUCTL_TRY_ASSIGN(auto timeout, util::parse_optional_duration(f.timeout, "--timeout"));
  TPUCTL_TRY_ASSIGN(auto drive, drive_options(ctx, f.ssh));
  request.ssh = ssh_settings(f.ssh);
  TPUCTL_TRY_ASSIGN(auto outcome,
                    provision::create_queued_resource(*store, request, clock, f.dry_run));
  if (f.dry_run) {
    Json j = qr_json(outcome.qr);
    j["dry_run"] = true;
    j["fits_now"] = outcome.dry_run_placement.has_value();
    j["why"] = outcome.why;
    TPUCTL_TRY(emit(ctx, j, [&](std::ostream& os, const Json&) {
      os << "dry run: queued resource '" << outcome.qr.id << "' (" << outcome.qr.accelerator_type
         << ", " << util::counted(outcome.qr.node_ids.size(), "node") << ") in pool '" << pool
         << "'\n";
      if (!outcome.dry_run_placement) {
        os << "it would wait: " << outcome.why << "\n";
        return;
      }
      for (const auto& n : outcome.qr.nodes) {
        os << "node " << n.id << ":\n";
        std::vector<std::vector<std::string>> rows;
        for (const auto& w : n.workers) {
          rows.push_back({std::to_string(w.worker), w.host, w.address});
        }
        os << render_table({"WORKER", "HOST", "ADDRESS"}, rows);
      }
    }));
    return 0;
  }
  if (outcome.existed && !ctx.globals.quiet) {
    *ctx.err << "tpuctl: request id '" << f.request_id << "' already created '" << outcome.qr.id
             << "'; not creating it again\n";
  }
  auto carried = carry_on(ctx, *store, outcome.qr, f.async, timeout, drive, f.ssh,
                          "queued resource '" + f.id + "'");
  const QueuedResource& last = carried.qr;
  if (carried.gone && !carried.failed) {
    return Error(ErrorKind::failure, "queued resource '" + f.id + "' was deleted meanwhile");
  }
  if (carried.failed) {
    if (!carried.gone) {
      (void)emit(ctx, qr_json(last), [&](std::ostream& os, const Json&) { print_qr(os, last); });
    }
    return *carried.failed;
  }
  if (!carried.done) {
    TPUCTL_TRY(
        emit(ctx, qr_json(last), [&](std::ostream& os, const Json&) { print_qr(os, last); }));
    return Error(ErrorKind::capacity, "queued resource '" + f.id + "' is still " +
                                          std::string(to_string(last.state)) + " after --timeout " +
                                          f.timeout +
                                          " (it stays queued; follow it with "
                                          "'tpuctl qr wait " +
                                          f.id + " --for=state=ACTIVE')");
  }
  TPUCTL_TRY(emit(ctx, qr_json(last), [&](std::ostream& os, const Json&) { print_qr(os, last); }));
  if (!f.async && last.state == QrState::failed) {
    return Error(ErrorKind::failure,
                 "queued resource '" + f.id + "' FAILED: " +
                     (last.error ? last.error->code + ": " + last.error->message : "no reason"));
  }
  return 0;
}

} // namespace

void add_qr_create(CLI::App& group, Registry& registry, bool tpu_vm) {
  auto f = std::make_shared<CreateFlags>();
  f->tpu_vm = tpu_vm;
  CLI::App* cmd = registry.add(group, "create",
                               tpu_vm ? "create a node: a queued resource of one node, named alike"
                                      : "request a slice; it is queued until it fits",
                               [f](Context& ctx) {
                                 CreateFlags flags = *f;
                                 if (flags.tpu_vm) {
                                   flags.node_id = flags.id;
                                   flags.node_id_given = true;
                                 }
                                 return run_create(ctx, flags);
                               });
  if (tpu_vm) {
    cmd->add_option("TPU_NAME", f->id, "the node's name (lowercase, digits, '-')")->required();
  } else {
    cmd->add_option("QR_ID", f->id, "the queued resource's id (lowercase, digits, '-')")
        ->required();
  }
  cmd->add_option("--accelerator-type", f->accelerator_type, "e.g. v5litepod-16, v4-32, v5p-4x4x4")
      ->type_name("TYPE");
  cmd->add_option("--type", f->type, "generation, with --topology (e.g. v5p)")->type_name("GEN");
  cmd->add_option("--topology", f->topology, "chip grid, with --type (e.g. 4x4x4)")
      ->type_name("AxB[xC]");
  if (!tpu_vm) {
    cmd->add_option("--node-id", f->node_id, "one node with this id (default: the QR id)")
        ->type_name("ID")
        ->each([f](const std::string&) { f->node_id_given = true; });
    cmd->add_option("--node-count", f->node_count,
                    "N nodes PREFIX-0..N-1, all or nothing (multislice)")
        ->type_name("N")
        ->check(count_in(1, 1024));
    cmd->add_option("--node-prefix", f->node_prefix, "node name prefix (default: the QR id)")
        ->type_name("P")
        ->each([f](const std::string&) { f->node_prefix_given = true; });
  }
  cmd->add_option(tpu_vm ? "--version" : "--runtime-version", f->runtime_version,
                  "the runtime version: recorded for your scripts (your hosts keep their OS)")
      ->type_name("V");
  cmd->add_flag("--reserved", f->reserved, "reserved tier: queued before everything else");
  cmd->add_option("--reservation", f->reservation,
                  "reserved tier (tpuctl has one reservation per pool; the name is not used)")
      ->type_name("NAME");
  cmd->add_flag("--spot", f->spot, "spot tier: preempted when a higher tier needs its hosts");
  if (tpu_vm) {
    cmd->add_flag("--preemptible", f->preemptible, "spot tier (gcloud's older name)");
  }
  cmd->add_flag("--best-effort", f->best_effort, "best-effort tier (preemptible, as --spot)");
  cmd->add_flag("--guaranteed", f->guaranteed, "standard tier (the default): never preempted");
  cmd->add_option("--provisioning-model", f->provisioning_model,
                  "standard, spot, reservation-bound or flex-start (any case)")
      ->type_name("MODEL");
  cmd->add_option("--valid-until-duration", f->valid_until_duration,
                  "fail if not placed within this long (e.g. 30m)")
      ->type_name("D")
      ->check(positive_duration());
  cmd->add_option("--valid-until-time", f->valid_until_time, "fail if not placed by this time")
      ->type_name("RFC3339");
  cmd->add_option("--valid-after-duration", f->valid_after_duration,
                  "do not place before this long")
      ->type_name("D")
      ->check(timeout_duration("now"));
  cmd->add_option("--valid-after-time", f->valid_after_time, "do not place before this time")
      ->type_name("RFC3339");
  cmd->add_option("--max-run-duration", f->max_run_duration,
                  "suspend the slice after it has been ACTIVE this long")
      ->type_name("D")
      ->check(positive_duration());
  cmd->add_option("--on-preemption", f->on_preemption,
                  "suspend (default, as gcloud): a preempted slice stays SUSPENDED; requeue: it "
                  "goes back to the queue in its place")
      ->type_name("P");
  cmd->add_option("--labels", f->labels, "k=v,...")->type_name("K=V");
  cmd->add_option("--metadata", f->metadata, "k=v,...")->type_name("K=V");
  cmd->add_option("--env-secret", f->env_secrets,
                  "give the startup script NAME with its value from this environment, kept in "
                  "the store and sent on stdin: never in metadata, output or logs (repeatable)")
      ->type_name("NAME");
  cmd->add_option("--metadata-from-file", f->metadata_from_file,
                  "startup-script=FILE: run on every worker while provisioning")
      ->type_name("K=FILE");
  cmd->add_option("--request-id", f->request_id, "makes a retried create idempotent")
      ->type_name("ID");
  cmd->add_flag("--async", f->async, "return at once; a background tpuctl carries it on");
  cmd->add_flag("--dry-run", f->dry_run, "show which hosts would become workers; change nothing");
  cmd->add_option("--timeout", f->timeout,
                  "without --async: stop waiting after this long (exit 3; 0: no limit)")
      ->type_name("D")
      ->check(timeout_duration());
  add_ssh_policy_flags(*cmd, f->ssh);
  cmd->footer("Without --async, waits until the request is ACTIVE (exit 0) or FAILED (exit 1),\n"
              "printing each state on stderr. A request the pool could never hold is refused at\n"
              "once (exit 3) and nothing is stored.\n\nExamples:\n"
              "  tpuctl qr create qr-1 --accelerator-type v5litepod-16\n"
              "  tpuctl qr create big --type v4 --topology 4x4x4 --reserved --async\n"
              "  tpuctl qr create ms --accelerator-type v5litepod-8 --node-count 2 --dry-run");
  if (tpu_vm) {
    cmd->footer(
        "A node is a queued resource of one node with the same name: it waits in the\n"
        "queue like any request, and 'tpuctl tpu-vm delete NODE' frees its hosts.\n"
        "Without --async, waits until ACTIVE (exit 0) or FAILED (exit 1).\n\nExample:\n"
        "  tpuctl tpu-vm create my-node --accelerator-type v5litepod-16 --version v2-alpha");
  }
}

namespace {

// ---- list / describe ----

struct ListFlags {
  bool watch = false;
  std::string timeout;
};

void add_qr_list(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<ListFlags>();
  CLI::App* cmd = registry.add(
      group, "list", "queued resources of the pool, oldest first",
      [f](Context& ctx) -> Expected<int> {
        std::chrono::milliseconds timeout{0};
        if (!f->timeout.empty()) {
          if (!f->watch) {
            return usage_error("--timeout goes with --watch: it says how long to watch");
          }
          TPUCTL_TRY_ASSIGN(timeout, util::parse_duration(f->timeout, "--timeout"));
        }
        if (ctx.json_lines && !f->watch) {
          return usage_error("--format jsonl is for qr list --watch; use --format json");
        }
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
        if (f->watch) {
          return watch_queued_resources(ctx, *store, pool, timeout);
        }
        TPUCTL_TRY_ASSIGN(auto all, provision::list_queued_resources(*store, pool));
        std::sort(all.begin(), all.end(), [](const QueuedResource& a, const QueuedResource& b) {
          return a.create_revision < b.create_revision;
        });
        Json rows = Json::array();
        for (const auto& q : all) {
          rows.push_back(qr_json(q)); // every field, so --filter can use any (labels.team=...)
        }
        TPUCTL_TRY(emit_list(ctx, rows, k_qr_columns, qr_json(QueuedResource{})));
        return 0;
      });
  cmd->add_flag("--watch", f->watch,
                "print each state change as it happens (--format jsonl: one JSON object a line)");
  cmd->add_option("--timeout", f->timeout,
                  "with --watch: stop after this long (default, or 0: never)")
      ->type_name("DURATION")
      ->check(timeout_duration());
  cmd->footer("Filter with the global --filter (e.g. --filter 'state=ACTIVE AND "
              "labels.team=ml') and print fields with --format 'value(id,state)'.");
}

void add_qr_describe(CLI::App& group, Registry& registry) {
  auto id = std::make_shared<std::string>();
  CLI::App* cmd = registry.add(
      group, "describe", "state, history, workers in worker order, pending reason or error",
      [id](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
        TPUCTL_TRY_ASSIGN(auto qr, provision::load_queued_resource(*store, pool, *id));
        TPUCTL_TRY(
            emit(ctx, qr_json(qr), [&](std::ostream& os, const Json&) { print_qr(os, qr); }));
        return 0;
      });
  cmd->add_option("QR_ID", *id, "the queued resource")->required();
}

} // namespace

void add_qr_lifecycle(CLI::App& group, Registry& registry); // cmd_qr_lifecycle.cpp

void setup_queued_resources(CLI::App& group, Registry& registry) {
  add_qr_create(group, registry, false);
  add_qr_list(group, registry);
  add_qr_describe(group, registry);
  add_qr_lifecycle(group, registry);
  setup_slice_ssh_scp(group, registry, true);
}

} // namespace tpuctl::cli
