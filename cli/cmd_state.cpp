// tpuctl state: where tpuctl keeps its state. `info` shows the store --state names (backend,
// location, schema, revision); `migrate` copies a store into an empty one, typically a machine's
// SQLite file into the etcd a team shares (state/migrate.hpp does the copying).
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/state_access.hpp"
#include "state/location.hpp"
#include "state/migrate.hpp"

namespace tpuctl::cli {

namespace {

struct MigrateFlags {
  std::string from;
  std::string to;
};

// Opens `url` without reconciling anything (these commands only read or copy).
Expected<std::unique_ptr<state::StateStore>> open_plain(const Context& ctx,
                                                        const std::string& url) {
  TPUCTL_TRY_ASSIGN(auto options, open_options(ctx));
  return state::open_store(url, options);
}

void add_info(CLI::App& group, Registry& registry) {
  registry.add(group, "info", "show the state store in use: backend, location, schema, revision",
               [](Context& ctx) -> Expected<int> {
                 TPUCTL_TRY_ASSIGN(auto store, open_plain(ctx, ctx.globals.state));
                 TPUCTL_TRY_ASSIGN(auto pools, store->list(state::Kind::pool, ""));
                 state::StoreInfo i = store->info();
                 Json out{{"backend", i.backend},
                          {"location", i.location},
                          {"schema_version", i.schema_version},
                          {"supported_schema", i.supported_schema},
                          {"writable", i.writable},
                          {"revision", pools.revision},
                          {"pools", pools.records.size()}};
                 TPUCTL_TRY(emit(ctx, out));
                 return 0;
               });
}

std::string migrated_text(const Json& r) {
  return "copied " + std::to_string(r["pools"].get<size_t>()) + " pools, " +
         std::to_string(r["hosts"].get<size_t>()) + " hosts, " +
         std::to_string(r["queued_resources"].get<size_t>()) + " queued resources, " +
         std::to_string(r["clusters"].get<size_t>()) + " clusters, " +
         std::to_string(r["workloads"].get<size_t>()) + " workloads, " +
         std::to_string(r["claims"].get<size_t>()) + " claims and " +
         std::to_string(r["events"].get<size_t>()) + " events from " +
         r["from"].get<std::string>() + " to " + r["to"].get<std::string>() + "\n";
}

Expected<int> run_migrate(Context& ctx, const MigrateFlags& f) {
  std::string from = f.from.empty() ? ctx.globals.state : f.from;
  TPUCTL_TRY_ASSIGN(auto options, open_options(ctx));
  TPUCTL_TRY_ASSIGN(auto from_loc, state::parse_state_url(from, options.env));
  TPUCTL_TRY_ASSIGN(auto to_loc, state::parse_state_url(f.to, options.env));
  if (from_loc.url() == to_loc.url()) {
    return usage_error("--from and --to both name " + to_loc.url() +
                       ": migrate copies one store into another");
  }
  if (from_loc.backend == state::Backend::sqlite && !std::filesystem::exists(from_loc.path)) {
    return not_found_error("the source state store " + from_loc.url() +
                           " does not exist: nothing to migrate (name it with --from)");
  }
  TPUCTL_TRY_ASSIGN(auto source, state::open_store(from_loc.url(), options));
  TPUCTL_TRY_ASSIGN(auto target, state::open_store(to_loc.url(), options));
  TPUCTL_TRY_ASSIGN(auto report, state::migrate_store(*source, *target));
  Json out{{"from", from_loc.url()},
           {"to", to_loc.url()},
           {"pools", report.pools},
           {"hosts", report.hosts},
           {"queued_resources", report.queued_resources},
           {"clusters", report.clusters},
           {"workloads", report.workloads},
           {"claims", report.claims},
           {"events", report.events},
           {"target_revision", report.target_revision}};
  TPUCTL_TRY(emit(ctx, out, [](std::ostream& os, const Json& r) { os << migrated_text(r); }));
  return 0;
}

void add_migrate(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<MigrateFlags>();
  CLI::App* cmd =
      registry.add(group, "migrate",
                   "copy every pool, host, claim, queued resource and event into an empty store",
                   [f](Context& ctx) -> Expected<int> { return run_migrate(ctx, *f); });
  cmd->add_option("--from", f->from, "the store to copy (default: --state, else the local SQLite)")
      ->type_name("URL");
  cmd->add_option("--to", f->to, "the empty store to fill, e.g. etcd://HOST:PORT[,...]")
      ->required()
      ->type_name("URL");
  cmd->footer("Stop other tpuctl processes on the source first. The target must be empty.\n"
              "Global flags (see 'tpuctl --help'): --format, --quiet, --verbosity, --log-file, "
              "--state, --pool\n");
}

} // namespace

void setup_state(CLI::App& group, Registry& registry) {
  add_info(group, registry);
  add_migrate(group, registry);
}

} // namespace tpuctl::cli
