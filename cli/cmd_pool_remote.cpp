// tpuctl pool check / ssh / scp: the fan-out engine (remote/) on a pool's raw hosts.
#include <iostream>
#include <iterator>
#include <set>

#include "agent/probe.hpp"
#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/copy_files.hpp"
#include "cli/output.hpp"
#include "cli/ssh_flags.hpp"
#include "cli/state_access.hpp"
#include "remote/fanout.hpp"
#include "remote/grouping.hpp"
#include "remote/push.hpp"
#include "util/hostlist.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

struct Selection {
  provision::PoolView view;
  std::vector<remote::SshTarget> targets;
  std::vector<const provision::HostEntry*> hosts;
};

// The pool's hosts named by `spec` (names with ranges, comma lists), or all of them.
Expected<Selection> select_hosts(Context& ctx, const std::string& spec) {
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  Selection sel{};
  TPUCTL_TRY_ASSIGN(sel.view, provision::load_pool(*store, pool));
  std::set<std::string> wanted;
  if (!spec.empty()) {
    ErrorList problems;
    for (const auto& part : util::split(spec, ',')) {
      auto names = util::expand_hostlist(part);
      if (!names) {
        problems.add(names.error());
        continue;
      }
      wanted.insert(names->begin(), names->end());
    }
    for (const auto& w : wanted) {
      bool known = std::any_of(sel.view.hosts.begin(), sel.view.hosts.end(),
                               [&](const provision::HostEntry& h) { return h.name == w; });
      if (!known) {
        problems.add(Error(ErrorKind::not_found,
                           "--hosts: host '" + w + "' is not in pool '" + pool + "'", "not_found"));
      }
    }
    if (!problems.empty()) {
      return problems.combined();
    }
  }
  for (const auto& h : sel.view.hosts) {
    if (wanted.empty() || wanted.count(h.name)) {
      sel.targets.push_back(provision::ssh_target(sel.view.info, h));
      sel.hosts.push_back(&h);
    }
  }
  if (sel.targets.empty()) {
    return Error(ErrorKind::not_found,
                 "pool '" + pool + "' has no hosts (add some with 'tpuctl pool add-hosts')",
                 "not_found");
  }
  return sel;
}

int finish_broadcast(const InterruptGuard& guard, const std::vector<remote::HostResult>& results) {
  if (guard.interrupted()) {
    return guard.exit_status();
  }
  return broadcast_exit_status(results);
}

struct SshCommandOptions {
  SshFlags ssh;
  std::string hosts;
  std::string command;
  std::vector<std::string> argv;
};

void add_ssh(CLI::App& group, Registry& registry) {
  auto o = std::make_shared<SshCommandOptions>();
  CLI::App* cmd = registry.add(
      group, "ssh", "run a command on the pool's hosts in parallel (all by default)",
      [o](Context& ctx) -> Expected<int> {
        if (o->command.empty() == o->argv.empty()) {
          return usage_error("give the command either as --command 'CMD' or after '--' (not both)");
        }
        TPUCTL_TRY_ASSIGN(auto options, ssh_options(o->ssh));
        TPUCTL_TRY_ASSIGN(auto mode, parse_fanout_output(o->ssh.output));
        TPUCTL_TRY_ASSIGN(auto sel, select_hosts(ctx, o->hosts));
        std::string command = o->command.empty() ? util::shell_join(o->argv) : o->command;
        return run_broadcast(ctx, remote::make_jobs(sel.targets, command), options, mode,
                             o->ssh.stdin_broadcast);
      });
  cmd->add_option("--hosts", o->hosts, "hosts to use: names, ranges, comma lists (default all)")
      ->type_name("SPEC");
  cmd->add_option("--command", o->command, "the command line, run by each host's login shell")
      ->type_name("CMD");
  cmd->add_option("CMD", o->argv, "after '--': the command and its arguments (quoted for you)");
  add_ssh_flags(*cmd, o->ssh);
}

struct ScpOptions {
  SshFlags ssh;
  std::string hosts;
  std::vector<std::string> paths;
  bool recurse = false;
};

void add_scp(CLI::App& group, Registry& registry) {
  auto o = std::make_shared<ScpOptions>();
  CLI::App* cmd =
      registry.add(group, "scp", "copy local files to the pool's hosts (verified by sha256)",
                   [o](Context& ctx) -> Expected<int> {
                     if (o->paths.size() < 2) {
                       return usage_error(
                           "give at least one SRC and a DEST (e.g. tpuctl pool scp a.txt ~/data/)");
                     }
                     std::string dest = o->paths.back();
                     std::vector<std::string> sources(o->paths.begin(), o->paths.end() - 1);
                     TPUCTL_TRY_ASSIGN(auto options, ssh_options(o->ssh));
                     TPUCTL_TRY_ASSIGN(auto sel, select_hosts(ctx, o->hosts));
                     return copy_files(ctx, sel.targets, sources, dest, o->recurse, options);
                   });
  cmd->add_option("PATHS", o->paths, "SRC... DEST: local files, then the remote path")->required();
  cmd->add_option("--hosts", o->hosts, "hosts to use: names, ranges, comma lists (default all)")
      ->type_name("SPEC");
  cmd->add_flag("--recurse", o->recurse, "copy directories with their whole tree");
  add_ssh_flags(*cmd, o->ssh, false);
}

// The facts `pool check` gathers, as one shell script; sections split by a marker line.
constexpr const char* k_marker = "---tpuctl-check---";

std::string check_script(const std::string& workdir) {
  std::string m = std::string("echo ") + k_marker;
  return "cat /etc/os-release 2>/dev/null; " + m + "; nproc; " + m + "; cat /proc/meminfo; " + m +
         "; d=" + util::shell_quote_path(workdir) +
         "; while [ ! -e \"$d\" ]; do d=$(dirname -- \"$d\"); done; df -Pk -- \"$d\"; " + m +
         "; grep -m 1 -E '^(flags|Features)' /proc/cpuinfo";
}

std::string host_key_status(remote::Outcome o) {
  switch (o) {
  case remote::Outcome::host_key_unknown:
    return "unknown";
  case remote::Outcome::host_key_changed:
    return "changed";
  case remote::Outcome::refused:
  case remote::Outcome::unreachable:
    return "";
  default:
    return "ok";
  }
}

void add_check(CLI::App& group, Registry& registry) {
  auto o = std::make_shared<ScpOptions>();
  CLI::App* cmd = registry.add(
      group, "check",
      "connect to every host: reachability, auth, host key, OS, cores, memory, disk",
      [o](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto options, ssh_options(o->ssh));
        TPUCTL_TRY_ASSIGN(auto sel, select_hosts(ctx, o->hosts));
        std::vector<remote::Job> jobs;
        for (size_t i = 0; i < sel.targets.size(); ++i) {
          jobs.push_back(remote::Job{sel.targets[i], check_script(sel.hosts[i]->workdir), i, {}});
        }
        options.keep_output = true;
        remote::CancelToken token;
        InterruptGuard guard(token);
        TPUCTL_TRY_ASSIGN(auto results, remote::run_fanout(jobs, options, {}, &token));
        Json rows = Json::array();
        for (const auto& r : results) {
          bool connected =
              r.outcome != remote::Outcome::refused && r.outcome != remote::Outcome::unreachable &&
              r.outcome != remote::Outcome::host_key_unknown &&
              r.outcome != remote::Outcome::host_key_changed &&
              r.outcome != remote::Outcome::auth && r.outcome != remote::Outcome::error;
          Json row{{"host", r.host},
                   {"status",
                    r.outcome == remote::Outcome::ok ? std::string("ok") : remote::short_reason(r)},
                   {"reachable", r.outcome != remote::Outcome::refused &&
                                     r.outcome != remote::Outcome::unreachable},
                   {"authenticated", connected},
                   {"host_key", host_key_status(r.outcome)},
                   {"os", ""},
                   {"cores", nullptr},
                   {"memory_total_mib", nullptr},
                   {"disk_free_mib", nullptr},
                   {"units", Json::array()},
                   {"error", error_json(std::string(remote::to_string(r.outcome)), r.error)}};
          if (r.outcome == remote::Outcome::ok) {
            std::vector<std::string> parts;
            std::string out = r.out;
            size_t pos = 0;
            std::string marker = std::string(k_marker) + "\n";
            while (true) {
              size_t next = out.find(marker, pos);
              parts.push_back(
                  out.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
              if (next == std::string::npos) {
                break;
              }
              pos = next + marker.size();
            }
            if (parts.size() == 5) {
              row["os"] = agent::parse_os_release(parts[0]);
              if (auto cores = util::parse_int(util::trim(parts[1]), "nproc", 1, 1 << 20)) {
                row["cores"] = *cores;
              }
              if (auto mem = agent::parse_meminfo(parts[2])) {
                row["memory_total_mib"] = mem->first;
              }
              if (auto disk = agent::parse_df_free_mib(parts[3])) {
                row["disk_free_mib"] = *disk;
              }
              row["units"] = agent::matrix_units(agent::parse_cpu_flags(parts[4]));
            }
          }
          rows.push_back(row);
        }
        TPUCTL_TRY(emit_list(ctx, rows,
                             {{"host", "host"},
                              {"status", "status"},
                              {"host_key", "host_key"},
                              {"os", "os"},
                              {"cores", "cores"},
                              {"memory_total_mib", "memory_total_mib"},
                              {"disk_free_mib", "disk_free_mib"},
                              {"units", "units"}}));
        if (!ctx.machine_format()) {
          ctx.stderr_stream() << failure_report(results);
        }
        return finish_broadcast(guard, results);
      });
  cmd->add_option("--hosts", o->hosts, "hosts to check: names, ranges, comma lists (default all)")
      ->type_name("SPEC");
  add_ssh_flags(*cmd, o->ssh, false);
}

} // namespace

void setup_pool_remote(CLI::App& group, Registry& registry) {
  add_check(group, registry);
  add_ssh(group, registry);
  add_scp(group, registry);
}

} // namespace tpuctl::cli
