// gcloud and xpk command lines, run as written with only the program name changed.
//
// tpuctl's own commands already speak gcloud's and xpk's language where a flag means something
// on a team's own hosts (--accelerator-type, --worker, --node-count, --tpu-type, ...). Every
// other flag of `gcloud [alpha] compute tpus` and of xpk's cluster and workload commands is a
// row of ONE table (compat.cpp), saying what tpuctl does with it:
//
//   ignore  it has no meaning here (a network, a CPU machine type): accepted, and one
//           notice on stderr says so (--quiet silences it); a script never stops for it;
//   zone    --zone: where capacity lives, which here is a pool: it selects the pool of that name
//           (resolve_pool), or, when none has it, is ignored with a notice;
//   project --billing-project (gcloud's "project charged for quota"): as tpuctl's global
//           --project, which gcloud's and xpk's --project are (provision/pool/projects.hpp);
//   refuse  a feature tpuctl does not have and cannot pretend to (ssh options for an ssh binary
//           it does not run, Pathways): one `tpuctl: error:` line, exit 2, saying why and what
//           to use instead.
//
// Commands of gcloud and xpk that tpuctl has no use for (`tpu-vm start`, `xpk storage`) are rows
// of a second table: each is refused with one line the same way, instead of "unknown command".
// Both tables are declared on the parser (hidden from --help; README "Coming from gcloud and
// xpk" is their documentation) by add_compat(), and acted on by apply_compat() after parsing.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "cli/registry.hpp"
#include "provision/queue/queued_resource.hpp"
#include "state/store.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

enum class CompatAction { ignore, zone, project, refuse };

struct CompatFlag {
  std::string_view names; // "--project" or "--skip-validation,--no-skip-validation"
  // Where it applies: "*" (every command), or command paths below tpuctl separated by '|'
  // ("queued-resources create|tpu-vm create"); a path names a group and all its commands.
  std::string_view scope;
  bool takes_value;
  CompatAction action;
  std::string_view why;     // ignore: why it means nothing here; refuse: why tpuctl cannot
  std::string_view instead; // refuse: what to use instead (empty for ignore)
  bool many = false;        // takes every following word up to the next flag (argparse's '+')
};

struct CompatCommand {
  std::string_view path; // "tpu-vm start"
  std::string_view why;
  std::string_view instead;
};

const std::vector<CompatFlag>& compat_flags();
const std::vector<CompatCommand>& compat_commands();

// The compat flags given on this command line: name -> values (a switch has one empty value).
struct CompatValues {
  std::map<std::string, std::vector<std::string>> given;
  std::vector<const CLI::App*> commands; // the compat commands declared
  std::string refused_command;           // the path of a compat command that was run, if any
  std::string path;                      // the command the words name ("cluster create")
  std::vector<std::string> swallowed;    // the words given to a refused command
};

// Declares, under `root`, every compat command (hidden from help, completion and man pages).
// Call after the command table is built.
void add_compat(CLI::App& root, Registry& registry, CompatValues& values);

// `args` (argv, the program first) without the compat flags (and their values) that apply to
// the command the words name and that it does not define itself; those go to `values`. Words
// after "--" are left alone. The flags never reach the parser, so help stays tpuctl's own.
std::vector<std::string> take_compat_flags(const CLI::App& root, std::vector<std::string> args,
                                           CompatValues& values);

// After parsing: a refused command or flag is an Error (usage) naming it, why and what to use;
// --zone (or CLOUDSDK_COMPUTE_ZONE) goes to ctx.globals.zone; every ignored flag gets one notice
// line on ctx.err unless --quiet.
Status apply_compat(Context& ctx, const CompatValues& values);

// The pool a command acts on: --pool, else the pool --zone names (a zone no pool has is ignored
// with a notice), else the only pool or 'default' (provision::resolve_pool_name).
Expected<std::string> resolve_pool(Context& ctx, state::StateStore& store);

// gcloud's enum values are case-insensitive and take '_' for '-' ("FLEX-START", "flex_start"):
// `value` lower-cased with '_' made '-'.
std::string enum_value(std::string_view value);

// NAME as a positional, or xpk's form `--cluster NAME` (`flag_value`): exactly one of them.
// `what` names the thing ("cluster"), `forms` the two ways ("NAME or --cluster NAME").
// Errors: usage when neither or both are given.
Expected<std::string> positional_or_flag(const std::string& positional,
                                         const std::string& flag_value, const std::string& what,
                                         const std::string& forms);

// The tier that capacity flags ask for (each given flag with its tier; standard when none).
// `exclusive` (xpk's rule): any two flags conflict; otherwise (gcloud's) only two that ask for
// different tiers. Errors: usage, "A and B" followed by `conflict`.
using TierFlag = std::pair<std::string, provision::Tier>;
Expected<provision::Tier> tier_of(const std::vector<TierFlag>& given, bool exclusive,
                                  const std::string& conflict);

// xpk's single-dash long alias (-tgps) as CLI11 can parse it, gcloud's leading `[alpha|beta]
// compute tpus` dropped, and `--ssh-flag VALUE` joined into `--ssh-flag=VALUE` (its value
// starts with '-'); other words unchanged.
std::vector<std::string> normalize_aliases(std::vector<std::string> args);

} // namespace tpuctl::cli
