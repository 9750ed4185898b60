// tpuctl ssh / env: `gcloud compute tpus tpu-vm ssh --worker=all` on the workers of a queued
// resource or node, with the worker environment (provision/worker_env) in front of every command.
// `env` prints exactly what one worker gets, without connecting, so launch scripts can be tested
// anywhere. Both build the environment through provision/slice_env, as provisioning does.
#include "cli/commands.hpp"
#include "cli/copy_files.hpp"
#include "cli/output.hpp"
#include "cli/ssh_flags.hpp"
#include "cli/state_access.hpp"
#include "provision/pools.hpp"
#include "provision/queued_resource.hpp"
#include "provision/slice_env.hpp"
#include "provision/slice_workers.hpp"
#include "provision/worker_env.hpp"
#include "remote/fanout.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

struct SliceFlags {
  std::string target;
  std::string worker = "0";
  std::string node = "all";
  std::vector<std::string> env;
  std::string env_profile = "none";
  std::string command;
  std::vector<std::string> argv;
  std::vector<std::string> paths; // scp: SRC... TARGET:DEST
  bool recurse = false;
  SshFlags ssh;
};

// The workers `f` selects, each with its environment (provision/slice_workers).
Expected<std::vector<provision::WorkerPlan>> plan_workers(Context& ctx, const SliceFlags& f) {
  provision::WorkerSelection selection;
  selection.worker = f.worker;
  selection.node = f.node;
  TPUCTL_TRY_ASSIGN(selection.user_env, provision::parse_env_items(f.env));
  TPUCTL_TRY_ASSIGN(selection.profile, provision::parse_env_profile(f.env_profile));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, provision::resolve_pool_name(*store, ctx.globals.pool));
  TPUCTL_TRY_ASSIGN(auto target, provision::resolve_target(*store, pool, f.target));
  TPUCTL_TRY_ASSIGN(auto view, provision::load_pool(*store, pool));
  return provision::plan_workers(target, view, selection);
}

// --worker and --node: which workers of the target a command reaches.
void add_selection_flags(CLI::App& cmd, SliceFlags& f, const std::string& worker_help) {
  cmd.add_option("--worker", f.worker, worker_help)->type_name("W");
  cmd.add_option("--node", f.node, "all (default) or a node id of the queued resource")
      ->type_name("ID");
}

// TARGET, the selection, and what is added to the worker environment (ssh, env).
void add_env_flags(CLI::App& cmd, SliceFlags& f, const std::string& worker_help) {
  cmd.add_option("TARGET", f.target, "a queued resource (all its nodes) or one node")->required();
  add_selection_flags(cmd, f, worker_help);
  cmd.add_option("--env", f.env, "add KEY=VALUE to every worker's environment (repeatable)")
      ->type_name("K=V");
  cmd.add_option("--env-profile", f.env_profile,
                 "also export torchrun, slurm or skypilot variables (default none)")
      ->type_name("P");
}

const char* const k_worker_help = "all, N, a list (0,2) or a range (1-3); default 0";

Expected<int> run_ssh(Context& ctx, const SliceFlags& f) {
  if (f.command.empty() == f.argv.empty()) {
    return usage_error("give the command either as --command 'CMD' or after '--' (not both)");
  }
  TPUCTL_TRY_ASSIGN(auto options, ssh_options(f.ssh));
  TPUCTL_TRY_ASSIGN(auto mode, parse_fanout_output(f.ssh.output));
  TPUCTL_TRY_ASSIGN(auto plans, plan_workers(ctx, f));
  const std::string command = f.command.empty() ? util::shell_join(f.argv) : f.command;
  std::vector<remote::Job> jobs;
  for (const auto& p : plans) {
    remote::Job job;
    job.target = p.target;
    if (plans.size() > 1 && p.node != plans.front().node) {
      job.target.name = p.node + "/" + (p.target.name.empty() ? p.target.address : p.target.name);
    }
    job.command = provision::env_command_prefix(p.env, p.agent_dir) + command;
    job.index = jobs.size();
    jobs.push_back(std::move(job));
  }
  return run_broadcast(ctx, jobs, options, mode, f.ssh.stdin_broadcast);
}

Expected<int> run_env(Context& ctx, const SliceFlags& f) {
  TPUCTL_TRY_ASSIGN(auto plans, plan_workers(ctx, f));
  if (plans.size() != 1) {
    return usage_error("tpuctl env shows one worker: give --worker N (and --node ID for a queued "
                       "resource with several nodes)");
  }
  const auto& p = plans.front();
  Json vars = Json::object();
  for (const auto& [k, v] : p.env) {
    vars[k] = v;
  }
  emit(ctx, vars, [&](std::ostream& os, const Json&) { os << provision::to_dotenv(p.env); });
  return 0;
}

Expected<int> run_scp(Context& ctx, SliceFlags f) {
  if (f.paths.size() < 2) {
    return usage_error("give at least one SRC and a TARGET:DEST (e.g. tpuctl scp data.bin "
                       "qr-1:~/data/ --worker=all)");
  }
  const std::string& last = f.paths.back();
  auto colon = last.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == last.size()) {
    return usage_error("'" + util::printable(last) +
                       "' is not TARGET:DEST (a queued resource or node, ':', a remote path)");
  }
  f.target = last.substr(0, colon);
  const std::string dest = last.substr(colon + 1);
  std::vector<std::string> sources(f.paths.begin(), f.paths.end() - 1);
  TPUCTL_TRY_ASSIGN(auto options, ssh_options(f.ssh));
  TPUCTL_TRY_ASSIGN(auto plans, plan_workers(ctx, f));
  std::vector<remote::SshTarget> targets;
  for (const auto& p : plans) {
    targets.push_back(p.target);
  }
  return copy_files(ctx, targets, sources, dest, f.recurse, options);
}

} // namespace

void setup_scp(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<SliceFlags>();
  registry.bind(group, [f](Context& ctx) { return run_scp(ctx, *f); });
  group.add_option("PATHS", f->paths, "SRC... TARGET:DEST (TARGET a queued resource or node)")
      ->required();
  add_selection_flags(group, *f, k_worker_help);
  group.add_flag("--recurse", f->recurse, "copy directories with their whole tree");
  add_ssh_flags(group, f->ssh, false);
  group.footer("Each file is streamed to every selected worker, checked by sha256 on the worker,\n"
               "then renamed into place with its mode. Example:\n"
               "  tpuctl scp ./model qr-1:~/ --worker=all --recurse");
}

void setup_ssh(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<SliceFlags>();
  registry.bind(group, [f](Context& ctx) { return run_ssh(ctx, *f); });
  add_env_flags(group, *f, k_worker_help);
  group.add_option("--command", f->command, "the command line, run by each worker's login shell")
      ->type_name("CMD");
  group.add_option("CMD", f->argv, "after '--': the command and its arguments (quoted for you)");
  add_ssh_flags(group, f->ssh);
  group.footer("Every command runs with the worker environment (TPU_WORKER_ID,\n"
               "TPU_WORKER_HOSTNAMES, JAX_COORDINATOR_ADDRESS, ...; see 'tpuctl env') and the\n"
               "agent's directory first on PATH. Exit status: 0 when every worker succeeded,\n"
               "else the first failing worker's (255 unreachable, 124 timed out).\n\nExamples:\n"
               "  tpuctl ssh qr-1 --worker=all -- tpuctl kernel run --m 512 --n 512 --k 512\n"
               "  tpuctl ssh qr-1 --worker=1-3 --output=jsonl --command 'echo $TPU_WORKER_ID'");
}

void setup_env(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<SliceFlags>();
  registry.bind(group, [f](Context& ctx) { return run_env(ctx, *f); });
  add_env_flags(group, *f, "the worker to show (default 0)");
  group.footer("Prints, without connecting, the environment `tpuctl ssh` gives that worker:\n"
               "KEY='value' lines by default (--format dotenv), or --format json.\n"
               "  set -a; . ./worker.env; set +a   reproduces it in a shell.");
}

} // namespace tpuctl::cli
