#include "cli/app.hpp"

#include <algorithm>
#include <memory>

#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/config.hpp"
#include "cli/exit_codes.hpp"
#include "cli/list_filter.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

constexpr const char* k_description =
    "tpuctl: TPU-style slices, queued resources and --worker=all broadcast on your own SSH hosts";

void add_global_flags(CLI::App& app, GlobalOptions& g) {
  const char* group = "Global flags";
  app.add_option("--format", g.format,
                 "output format: table (default), json, yaml, or value(FIELD,...) for lists")
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
      ->type_name("N")
      ->group(group);
  app.add_option("--pool", g.pool, "host pool to use (default: the only pool, or 'default')")
      ->envname("TPUCTL_POOL")
      ->type_name("NAME")
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
  app->footer("Run 'tpuctl COMMAND --help' for a command's flags. Exit status: see README.md.\n");
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
  return app;
}

// Every name (and alias) of the subcommands of `app`.
std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_group().empty()) {
      continue; // hidden
    }
    names.push_back(sub->get_name());
    for (const auto& a : sub->get_aliases()) {
      names.push_back(a);
    }
  }
  return names;
}

// Every long flag usable at `app` (its own and, through fallthrough, its parents').
std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* a = &app; a; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const auto& l : opt->get_lnames()) {
        names.push_back("--" + l);
      }
    }
  }
  return names;
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  auto best = util::nearest(word, candidates, 1);
  return best.empty() ? "" : "; did you mean '" + best.front() + "'?";
}

std::string lower_first(std::string s) {
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z' && !(s.size() > 1 && s[1] >= 'A' && s[1] <= 'Z')) {
    s[0] = static_cast<char>(s[0] - 'A' + 'a');
  }
  return s;
}

// Rewrites a CLI11 parse error into tpuctl's message style: what is wrong, the offending value,
// and how to fix it.
std::vector<std::string> describe_parse_error(const CLI::App& root, const CLI::ParseError& e) {
  const CLI::App& where = deepest_parsed(root);
  std::string path = command_path(where);
  std::string help_hint = " (see '" + path + " --help')";
  std::vector<std::string> lines;

  std::vector<std::string> extras = where.remaining();
  if (extras.empty()) {
    extras = root.remaining(true);
  }
  // A missing positional next to an unknown flag: most likely a value starting with '-' (a
  // name such as '-rf'), which is never taken as a value; name it rather than the positional.
  const bool required = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr &&
                        std::any_of(extras.begin(), extras.end(),
                                    [](const std::string& w) { return util::starts_with(w, "-"); });
  if (dynamic_cast<const CLI::ExtrasError*>(&e) || required) {
    for (const auto& word : extras) {
      if (util::starts_with(word, "-")) {
        std::string flag = word.substr(0, word.find('='));
        lines.push_back("unknown flag '" + flag + "' for '" + path + "'" +
                        suggestion(flag, flag_names(where)) + help_hint);
      } else if (!subcommand_names(where).empty()) {
        lines.push_back("unknown command '" + word + "' for '" + path + "'" +
                        suggestion(word, subcommand_names(where)) + help_hint);
      } else {
        lines.push_back("unexpected argument '" + word + "' for '" + path + "'" + help_hint);
      }
    }
    if (!lines.empty()) {
      return lines;
    }
  }
  std::string what = e.what();
  if (what.find("subcommand is required") != std::string::npos ||
      what.find("A subcommand") != std::string::npos) {
    return {"'" + path + "' needs a command: " + util::join(subcommand_names(where), ", ") +
            help_hint};
  }
  return {lower_first(what) + help_hint};
}

Status validate_globals(Context& ctx) {
  ErrorList problems;
  const std::string& f = ctx.globals.format;
  if (f == "table") {
    ctx.format = Format::table;
  } else if (f == "json") {
    ctx.format = Format::json;
  } else if (f == "yaml") {
    ctx.format = Format::yaml;
  } else if (f == "none") {
    // gcloud's --format=none: the command runs, its result is not printed.
    static std::ostream null_stream(nullptr);
    ctx.format = Format::json;
    ctx.out = &null_stream;
  } else if (f == "default") {
    ctx.format = Format::table;
  } else if (util::starts_with(f, "value") || util::starts_with(f, "table") ||
             util::starts_with(f, "csv")) {
    auto fields = parse_value_format(f);
    if (!fields) {
      problems.add(fields.error());
    } else if (fields->empty()) {
      problems.add(ErrorKind::usage, "--format: '" + f +
                                         "' is not an output format (use table, "
                                         "json, yaml, value(FIELD,...), table(FIELD,...), "
                                         "csv(FIELD,...) or none)");
    } else {
      ctx.format = Format::value;
      ctx.value_fields = *fields;
      ctx.value_table = util::starts_with(f, "table");
      ctx.value_csv = util::starts_with(f, "csv");
      ctx.value_heading = f.find("no-heading") == std::string::npos;
    }
  } else if (f == "dotenv") {
    ctx.format = Format::table; // `tpuctl env` only: its table form is the dotenv text
  } else if (f == "jsonl") {
    ctx.format = Format::json; // `qr list --watch` only: one JSON object per line
    ctx.json_lines = true;
  } else {
    problems.add(ErrorKind::usage,
                 "--format: '" + f +
                     "' is not an output format (use table, json, yaml, value(FIELD,...), "
                     "table(FIELD,...), csv(FIELD,...) or none; "
                     "dotenv for tpuctl env, jsonl for qr list --watch)");
  }
  if (!ctx.globals.limit.empty() && ctx.globals.limit != "unlimited") {
    if (auto n = util::parse_int(ctx.globals.limit, "--limit", 1); !n) {
      problems.add(usage_error(n.error().message + " (a number of rows, or unlimited)"));
    } else {
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
    return k_exit_interrupted;
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
  const std::vector<std::string> words =
      agent_only ? args : take_compat_flags(*app, normalize_aliases(args), compat);
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
    for (const auto& line : describe_parse_error(*app, e)) {
      err << "tpuctl: error: " << line << "\n";
    }
    return k_exit_usage;
  }

  if (auto valid = validate_globals(ctx); !valid) {
    return report(err, valid.error());
  }
  if (auto compatible = apply_compat(ctx, compat); !compatible) {
    return report(err, compatible.error());
  }
  const Runner* runner = registry.find(*app);
  if (!runner) {
    out << deepest_parsed(*app).help();
    return k_exit_ok;
  }
  try {
    Expected<int> result = (*runner)(ctx);
    spdlog::default_logger()->flush();
    if (!result) {
      return report(err, result.error());
    }
    return *result;
  } catch (const std::exception& e) {
    return report(err, make_error(ErrorKind::failure,
                                  std::string("internal error: ") + e.what() +
                                      " (please report this with --verbosity=debug output)"));
  }
}

} // namespace tpuctl::cli
