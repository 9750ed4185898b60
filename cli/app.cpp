#include "cli/app.hpp"

#include <algorithm>
#include <memory>

#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/config.hpp"
#include "cli/exit_codes.hpp"
#include "cli/list_filter.hpp"
#include "cli/output.hpp"
#include "cli/reference_text.hpp"
#include "cli/ssh_flags.hpp"
#include "cli/usage_errors.hpp"
#include "cli/values.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

// The largest --limit: more rows than any list has.
constexpr int64_t k_max_limit = 1'000'000'000;

constexpr const char* k_description =
    "tpuctl: TPU-style slices, queued resources and --worker=all broadcast on your own SSH hosts";

void add_global_flags(CLI::App& app, GlobalOptions& g) {
  const char* group = "Global flags";
  app.add_option("--format", g.format,
                 "output format: table (default), json, yaml, value(F,...), table(F,...), "
                 "csv(F,...) or none")
      ->type_name("FORMAT")
      ->group(group);
  app.add_flag("-q,--quiet", g.quiet, "no progress or notices on stderr")->group(group);
  app.add_option("--verbosity", g.verbosity,
                 "log level on stderr: debug, info, warning (default), error or none")
      ->type_name("LEVEL")
      ->group(group);
  app.add_option("--log-file", g.log_file, "write logs to PATH instead of stderr")
      ->type_name("PATH")
      ->group(group);
  app.add_option("--state", g.state, "state store URL: sqlite:PATH or etcd://HOST:PORT[,...]")
      ->envname("TPUCTL_STATE")
      ->type_name("URL")
      ->group(group);
  app.add_option("--filter", g.filter,
                 "list commands: only rows matching EXPR, e.g. 'state=ACTIVE AND name:train'")
      ->type_name("EXPR")
      ->group(group);
  app.add_option("--sort-by", g.sort_by,
                 "list commands: order rows by FIELD[,FIELD] ('~FIELD' descending), as gcloud")
      ->type_name("FIELDS")
      ->group(group);
  app.add_option("--limit", g.limit,
                 "list commands: at most N rows (after --filter and --sort-by), or unlimited")
      ->check(count_or(1, k_max_limit, "unlimited"))
      ->type_name("N")
      ->group(group);
  app.add_option("--pool", g.pool, "host pool to use (default: the only pool, or 'default')")
      ->envname("TPUCTL_POOL")
      ->type_name("NAME")
      ->group(group);
  app.add_option("--project", g.project,
                 "the project a create is charged to (quotas, usage), and the one a list shows "
                 "(default: CLOUDSDK_CORE_PROJECT, config project, else 'default')")
      ->type_name("ID")
      ->group(group);
  app.add_option("--etcd-user", g.etcd_user, "etcd user name (token auth)")
      ->envname("TPUCTL_ETCD_USER")
      ->type_name("USER")
      ->group(group);
  app.add_option("--etcd-password-file", g.etcd_password_file,
                 "file holding the etcd password (or set TPUCTL_ETCD_PASSWORD)")
      ->envname("TPUCTL_ETCD_PASSWORD_FILE")
      ->type_name("PATH")
      ->group(group);
  app.add_option("--etcd-cacert", g.etcd_cacert, "CA bundle of an etcd+https:// store")
      ->envname("TPUCTL_ETCD_CACERT")
      ->type_name("PATH")
      ->group(group);
  app.add_option("--etcd-cert", g.etcd_cert, "client certificate for etcd (mutual TLS)")
      ->envname("TPUCTL_ETCD_CERT")
      ->type_name("PATH")
      ->group(group);
  app.add_option("--etcd-key", g.etcd_key, "private key of --etcd-cert")
      ->envname("TPUCTL_ETCD_KEY")
      ->type_name("PATH")
      ->group(group);
}

std::unique_ptr<CLI::App> build_app(Registry& registry, GlobalOptions& globals,
                                    const std::string& only_group) {
  auto app = std::make_unique<CLI::App>(k_description, "tpuctl");
  app->fallthrough(); // global flags may follow the command words
  app->require_subcommand(0, 1);
  app->footer("Run 'tpuctl help COMMAND' (or 'tpuctl COMMAND --help') for a command's flags and\n"
              "the fields it prints (json, yaml, --filter, --sort-by and value(...) take them);\n"
              "'man tpuctl' for more.\n\n" +
              exit_status_text());
  add_global_flags(*app, globals);
  for (const auto& row : command_table()) {
    if (!only_group.empty() && row.name != only_group) {
      continue;
    }
    CLI::App* group = app->add_subcommand(row.name, row.summary);
    for (const auto& alias : row.aliases) {
      group->alias(alias);
    }
    if (row.hidden) {
      group->group("");
    }
    group->footer(std::string("Global flags (see 'tpuctl --help'): --format, --quiet, ") +
                  "--verbosity, --log-file, --state, --pool\n");
    row.setup(*group, registry);
  }
  add_field_footers(*app);
  return app;
}

// Checks the global flags of `command` (its path, "tpuctl qr list"), every problem reported.
Status validate_globals(Context& ctx, const std::string& command) {
  ErrorList problems;
  if (auto spec = parse_format(ctx.globals.format); !spec) {
    problems.add(spec.error());
  } else if (!spec->only_for.empty() && spec->only_for != command) {
    problems.add(usage_error("--format " + ctx.globals.format + " is for '" + spec->only_for +
                             "' only; '" + command +
                             "' prints table, json, yaml, value(...), table(...), csv(...) or "
                             "none"));
  } else {
    ctx.format = spec->format;
    ctx.value_fields = spec->value_fields;
    ctx.value_table = spec->value_table;
    ctx.value_csv = spec->value_csv;
    ctx.value_heading = spec->value_heading;
    ctx.json_lines = spec->json_lines;
    if (spec->none) {
      // gcloud's --format=none: the command runs, its result is not printed.
      static std::ostream null_stream(nullptr);
      ctx.out = &null_stream;
    }
  }
  if (!ctx.globals.limit.empty() && util::to_lower(ctx.globals.limit) != "unlimited") {
    // check_entry_values refused anything else (count_or).
    if (auto n = util::parse_int(ctx.globals.limit, "--limit", 1, k_max_limit); n) {
      ctx.row_limit = static_cast<size_t>(*n);
    }
  }
  if (auto filter = RowFilter::parse(ctx.globals.filter); !filter) {
    problems.add(filter.error());
  }
  auto level = util::parse_verbosity(ctx.globals.verbosity);
  if (!level) {
    problems.add(level.error());
  } else {
    auto logging = util::init_logging(*level, ctx.globals.log_file);
    if (!logging) {
      problems.add(logging.error());
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return ok();
}

int report(std::ostream& err, const Error& error) {
  for (const auto& line : error.all_messages()) {
    // escape_controls: a value quoted in a message (a name, a remote host's output) can
    // neither forge a second line nor move the terminal's cursor.
    err << "tpuctl: error: " << util::escape_controls(line) << "\n";
  }
  err.flush();
  return exit_code_for(error.kind);
}

} // namespace

int exit_code_for(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::failure:
    return k_exit_failure;
  case ErrorKind::usage:
    return k_exit_usage;
  case ErrorKind::capacity:
    return k_exit_capacity;
  case ErrorKind::not_found:
    return k_exit_not_found;
  case ErrorKind::auth:
    return k_exit_auth;
  case ErrorKind::timeout:
    return k_exit_timeout;
  case ErrorKind::interrupted:
    return interrupted_exit_status(); // 130 for SIGINT, 143 for SIGTERM
  case ErrorKind::partial:
    return k_exit_partial;
  }
  return k_exit_failure;
}

Error recorded_then_failed(const std::string& what, const std::string& state, const Error& later,
                           const std::string& next) {
  Error e(ErrorKind::partial, what + " was created and exists (" + state +
                                  "), but the command could not carry on: " + later.message + "; " +
                                  next);
  e.more = later.more;
  return e;
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Registry registry;
  Context ctx;
  ctx.out = &out;
  ctx.err = &err;
  // Defaults from the config file, before the flags (and their environment variables) that
  // override them are declared and parsed.
  auto config = Config::load(config_path());
  if (!config) {
    return report(err, config.error());
  }
  ctx.globals.pool = config->get("pool").value_or(ctx.globals.pool);
  ctx.globals.state = config->get("state").value_or(ctx.globals.state);
  ctx.globals.format = config->get("format").value_or(ctx.globals.format);
  set_active_config(std::move(*config));
  // `tpuctl agent ...` runs on every worker of a slice at once (the preflight on all of them
  // in the same second), so it builds its own group only: the whole command tree is a good part
  // of a process's start.
  const bool agent_only = args.size() > 2 && args[1] == "agent";
  std::unique_ptr<CLI::App> app = build_app(registry, ctx.globals, agent_only ? "agent" : "");

  if (args.size() <= 1) {
    out << app->help();
    return k_exit_ok;
  }
  if (auto wanted = help_request(*app, std::vector<std::string>(args.begin() + 1, args.end()))) {
    // `tpuctl help [COMMAND...]`, `tpuctl GROUP help [COMMAND]`: that command's --help.
    const auto target = find_help_target(*app, *wanted);
    if (target.app == nullptr) {
      err << "tpuctl: error: " << target.error << "\n";
      return k_exit_usage;
    }
    const CLI::App* parent = target.app->get_parent();
    out << target.app->help(parent != nullptr ? command_path(*parent) : "");
    return k_exit_ok;
  }
  if (args[1] == "__complete") {
    return run_complete(*app, args, out);
  }
  if (args[1] == "__man") {
    return run_man(*app, args, out, err);
  }
  // gcloud's and xpk's flags and commands (hidden: not in help, completion or man pages).
  CompatValues compat;
  if (!agent_only) {
    add_compat(*app, registry, compat);
  }
  std::vector<std::string> words =
      agent_only ? args : take_compat_flags(*app, normalize_aliases(args), compat);
  if (words.size() > 1 && words[1] == "--version") {
    words[1] = "version"; // gcloud's `--version` right after the program name
  }
  std::vector<const char*> argv;
  for (const auto& a : words) {
    argv.push_back(a.c_str());
  }
  try {
    app->parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    out << app->help();
    return k_exit_ok;
  } catch (const CLI::CallForAllHelp&) {
    out << app->help("", CLI::AppFormatMode::All);
    return k_exit_ok;
  } catch (const CLI::ParseError& e) {
    err << "tpuctl: error: " << util::escape_controls(describe_parse_error(*app, e)) << "\n";
    return k_exit_usage;
  }

  // Every bad value of the command line and every bad global flag, each on its own line.
  ErrorList problems;
  if (auto entry = check_entry_values(*app); !entry) {
    problems.add(entry.error());
  }
  if (auto valid = validate_globals(ctx, command_path(deepest_parsed(*app))); !valid) {
    problems.add(valid.error());
  }
  if (!problems.empty()) {
    return report(err, problems.combined());
  }
  // A flag or TPUCTL_POOL sets the pool; otherwise it is the config file's, which gcloud's
  // --zone (a pool's name) overrides, as --zone overrides `config set compute/zone`.
  if (const CLI::Option* pool_flag = app->get_option_no_throw("--pool");
      pool_flag != nullptr && pool_flag->count() == 0 && !ctx.globals.pool.empty()) {
    ctx.globals.pool_from_config = true;
  }
  if (auto compatible = apply_compat(ctx, compat); !compatible) {
    return report(err, compatible.error());
  }
  const Runner* runner = registry.find(*app);
  if (!runner) {
    out << app->help(); // the chosen group's help, as --help prints it
    return k_exit_ok;
  }
  try {
    Expected<int> result = (*runner)(ctx);
    spdlog::default_logger()->flush();
    if (!result) {
      return report(err, result.error());
    }
    if (ctx.globals.zone_flag && !ctx.globals.zone.empty() && !ctx.globals.quiet) {
      // A zone no pool lookup took (resolve_pool clears it): said, never silently dropped.
      err << "tpuctl: notice: --zone '" << util::escape_controls(ctx.globals.zone)
          << "' ignored: this command uses no pool's zone\n";
    }
    return *result;
  } catch (const std::exception& e) {
    return report(err, make_error(ErrorKind::failure,
                                  std::string("internal error: ") + e.what() +
                                      " (please report this with --verbosity=debug output)"));
  }
}

} // namespace tpuctl::cli
