// tpuctl state: where tpuctl keeps its state, and keeping it safe.
//   info           the store --state names: backend, location, schema, revision, whether it
//                  may be written and why not
//   migrate        copies a store into an empty one, typically a machine's SQLite file into the
//                  etcd a team shares (state/migrate.hpp does the copying)
//   backup FILE    a consistent snapshot of the store, as a 0600 SQLite store file
//   restore FILE   the backup into the store; one that holds anything only with --force
//                  (state/backup.hpp says what is atomic where)
//   check          the backend's integrity checks and tpuctl's invariants
//                  (provision/queue/state_check.hpp); exit 1 with every finding listed
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/state_access.hpp"
#include "provision/pool/pools.hpp"
#include "provision/workload/workload_check.hpp"
#include "state/backup.hpp"
#include "state/location.hpp"
#include "state/migrate.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

struct MigrateFlags {
  std::string from;
  std::string to;
};

void add_info(CLI::App& group, Registry& registry) {
  registry.add(group, "info", "show the state store in use: backend, location, schema, revision",
               [](Context& ctx) -> Expected<int> {
                 TPUCTL_TRY_ASSIGN(auto store, open_store_only(ctx, ctx.globals.state));
                 TPUCTL_TRY_ASSIGN(auto pools, store->list(state::Kind::pool, ""));
                 state::StoreInfo i = store->info();
                 Json out{{"backend", i.backend},
                          {"location", i.location},
                          {"schema_version", i.schema_version},
                          {"supported_schema", i.supported_schema},
                          {"writable", i.writable},
                          {"read_only_because", i.read_only_because},
                          {"revision", pools.revision},
                          {"pools", pools.records.size()}};
                 TPUCTL_TRY(emit(ctx, out));
                 return 0;
               });
}

// The counts of a copy (migrate, backup, restore), as JSON fields and as words.
Json copied_json(const state::MigrationReport& r) {
  return Json{{"pools", r.pools},
              {"hosts", r.hosts},
              {"queued_resources", r.queued_resources},
              {"clusters", r.clusters},
              {"workloads", r.workloads},
              {"claims", r.claims},
              {"events", r.events}};
}

std::string copied_text(const Json& c) {
  const auto n = [&](const char* key, std::string_view noun) {
    return util::counted(c[key].get<size_t>(), noun);
  };
  return n("pools", "pool") + ", " + n("hosts", "host") + ", " +
         n("queued_resources", "queued resource") + ", " + n("clusters", "cluster") + ", " +
         n("workloads", "workload") + ", " + n("claims", "claim") + " and " + n("events", "event");
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
  options.create = state::Creation::on_first_write; // the target may be new
  TPUCTL_TRY_ASSIGN(auto target, state::open_store(to_loc.url(), options));
  TPUCTL_TRY_ASSIGN(auto report, state::migrate_store(*source, *target));
  Json out{{"from", from_loc.url()}, {"to", to_loc.url()}};
  out.update(copied_json(report));
  out["target_revision"] = report.target_revision;
  TPUCTL_TRY(emit(ctx, out, [](std::ostream& os, const Json& r) {
    os << "copied " << copied_text(r) << " from " << r["from"].get<std::string>() << " to "
       << r["to"].get<std::string>() << "\n";
  }));
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

struct BackupFlags {
  std::string file;
  bool force = false;
};

void add_backup(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<BackupFlags>();
  CLI::App* cmd =
      registry.add(group, "backup", "write a consistent snapshot of the store to FILE (0600)",
                   [f](Context& ctx) -> Expected<int> {
                     TPUCTL_TRY_ASSIGN(auto store, open_store_only(ctx, ctx.globals.state));
                     TPUCTL_TRY_ASSIGN(auto report, state::backup_store(*store, f->file, f->force));
                     std::error_code ec;
                     Json out{{"file", std::filesystem::absolute(report.file, ec).string()},
                              {"from", store->info().location},
                              {"revision", report.source_revision},
                              {"copied", copied_json(report.copied)}};
                     TPUCTL_TRY(emit(ctx, out, [](std::ostream& os, const Json& r) {
                       os << "backed up " << copied_text(r["copied"]) << " of "
                          << r["from"].get<std::string>() << " (revision "
                          << r["revision"].get<int64_t>() << ") to " << r["file"].get<std::string>()
                          << "\n";
                     }));
                     return 0;
                   });
  cmd->add_option("FILE", f->file, "the backup file to write (an SQLite tpuctl store)")->required();
  cmd->add_flag("--force", f->force, "replace FILE when it exists");
  cmd->footer("Works while other tpuctl processes use the store: the backup is the store at one\n"
              "revision. Restore it with 'tpuctl state restore FILE'; read it with\n"
              "'tpuctl --state sqlite:FILE qr list'.\n");
}

void add_restore(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<BackupFlags>();
  CLI::App* cmd = registry.add(
      group, "restore", "restore a backup into the store (a non-empty one only with --force)",
      [f](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto store, open_store_only(ctx, ctx.globals.state, Access::create));
        if (f->force) { // replacing every pool there: each one's admins may
          TPUCTL_TRY(provision::require_admin_of_every_pool(*store, "restore a backup over"));
        }
        TPUCTL_TRY_ASSIGN(auto report, state::restore_store(f->file, *store, f->force));
        Json out{{"file", f->file},
                 {"to", store->info().location},
                 {"replaced_pools", report.replaced_pools},
                 {"copied", copied_json(report.copied)}};
        TPUCTL_TRY(emit(ctx, out, [](std::ostream& os, const Json& r) {
          os << "restored " << copied_text(r["copied"]) << " from " << r["file"].get<std::string>()
             << " into " << r["to"].get<std::string>();
          if (r["replaced_pools"].get<size_t>() > 0) {
            os << ", replacing its " << r["replaced_pools"].get<size_t>() << " pools";
          }
          os << "\n";
        }));
        return 0;
      });
  cmd->add_option("FILE", f->file, "a backup written by 'tpuctl state backup'")->required();
  cmd->add_flag("--force", f->force, "replace everything the store holds");
  cmd->footer("The backup is checked before anything changes. On SQLite the restore is one\n"
              "transaction; on etcd it is several commits: stop other tpuctl processes first.\n"
              "Requests that were provisioning when the backup was taken are carried on by the\n"
              "next command. With --force, the caller must be allowed to change every pool\n"
              "the store holds (each pool's admins and owner, see 'tpuctl pool set-admins').\n");
}

void add_check(CLI::App& group, Registry& registry) {
  registry.add(
      group, "check",
      "check the store: the backend's integrity and tpuctl's invariants; exit 1 on findings",
      [](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto store, open_store_only(ctx, ctx.globals.state));
        Json rows = Json::array();
        auto add = [&](const std::string& pool, const std::string& subject,
                       const std::string& problem) {
          rows.push_back(Json{{"pool", pool}, {"subject", subject}, {"problem", problem}});
        };
        TPUCTL_TRY_ASSIGN(auto integrity, store->check_integrity());
        for (const auto& problem : integrity) {
          add("", "store", problem);
        }
        if (auto found = provision::check_state(*store, ""); !found) {
          add("", "store", "its records cannot be read: " + found.error().message);
        } else {
          for (const auto& f : *found) {
            add(f.pool, f.subject, f.problem);
          }
        }
        const std::string where = store->info().location;
        if (!rows.empty() || ctx.machine_format()) {
          TPUCTL_TRY(emit_list(ctx, rows,
                               {{"pool", "pool"}, {"subject", "subject"}, {"problem", "problem"}}));
        }
        if (rows.empty()) {
          if (!ctx.globals.quiet && !ctx.machine_format()) {
            ctx.stderr_stream() << "tpuctl: " << where << ": no problems found\n";
          }
          return 0;
        }
        return Error(ErrorKind::failure, "state store " + where + " has " +
                                             util::counted(rows.size(), "problem") +
                                             " (listed above); restore a backup "
                                             "('tpuctl state restore FILE --force') or repair "
                                             "what they name");
      });
}

} // namespace

void setup_state(CLI::App& group, Registry& registry) {
  add_info(group, registry);
  add_migrate(group, registry);
  add_backup(group, registry);
  add_restore(group, registry);
  add_check(group, registry);
}

} // namespace tpuctl::cli
