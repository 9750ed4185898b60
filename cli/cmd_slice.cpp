// tpuctl ssh / env, and gcloud's `queued-resources ssh QR` and `tpu-vm ssh NODE`: a command on
// the workers of a queued resource or node (`--worker=all`), with the worker environment
// (provision/worker_env) in front of it; no command and one worker is an interactive shell with
// a tty, as `gcloud compute tpus tpu-vm ssh NODE` opens. ssh's -L/-R/-N/-4 (--ssh-flag, or first
// after `--`: cli/ssh_args.hpp) forward ports through one worker's session while its shell or
// command runs, or alone with -N (remote/forwarding.hpp). `env` prints exactly what one worker
// gets, without connecting, so launch scripts can be tested anywhere. The three ssh shapes are
// one implementation (cli/slice_flags.hpp says where they differ).
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/slice_flags.hpp"
#include "cli/ssh_args.hpp"
#include "provision/slice/secrets.hpp"
#include "provision/slice/worker_env.hpp"
#include "remote/fanout.hpp"
#include "remote/forwarding.hpp"
#include "remote/interactive.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

namespace fs = std::filesystem;

// The command to run: --command, or the words after "--" that follow the ssh options
// (`words`; see slice_flags.hpp for how each shape reads them). Empty: none given.
Expected<std::string> slice_command(const SliceFlags& f, const std::vector<std::string>& words) {
  const std::string joined =
      f.shape == SliceShape::tpuctl ? util::shell_join(words) : util::join(words, " ");
  if (!f.command.empty() && !joined.empty()) {
    return usage_error("give the command either as --command 'CMD' or after '--' (not both)");
  }
  return f.command.empty() ? joined : f.command;
}

// `ssh ...` that reaches the same worker as tpuctl does (same port, user, key and known_hosts),
// for --dry-run: what a user would paste to debug one worker by hand.
// `word` as a shell reads it: as it is when it holds nothing a shell would change, else quoted.
std::string shell_word(const std::string& word) {
  for (char c : word) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("-_.:/@%+=,").find(c) == std::string_view::npos) {
      return util::shell_quote(word);
    }
  }
  return word.empty() ? util::shell_quote(word) : word;
}

// `ssh_args.options`: the forwarding options given (-4, -L SPEC, ...); with -N no command
// follows.
std::string ssh_line(const remote::SshTarget& t, const std::string& command, bool tty,
                     const SshArgs& ssh_args) {
  std::string line = ssh_args.no_command ? "ssh" : tty ? "ssh -t" : "ssh";
  for (const auto& o : ssh_args.options) {
    line += " " + shell_word(o);
  }
  if (t.port != 0) {
    line += " -p " + std::to_string(t.port);
  }
  if (!t.identity_file.empty()) {
    line += " -i " + util::shell_quote(t.identity_file);
  }
  if (!t.known_hosts_file.empty()) {
    line += " -o UserKnownHostsFile=" + util::shell_quote(t.known_hosts_file);
  }
  line += " " + util::shell_quote((t.user.empty() ? "" : t.user + "@") + t.address);
  return ssh_args.no_command ? line : line + " " + util::shell_quote(command);
}

Expected<int> print_dry_run(Context& ctx, const std::vector<provision::WorkerPlan>& plans,
                            const std::vector<remote::Job>& jobs, bool tty,
                            const SshArgs& ssh_args) {
  Json rows = Json::array();
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto& p = plans[i];
    Json row = plan_json(p);
    row["address"] = p.target.address;
    row["port"] = p.target.port;
    row["user"] = p.target.user;
    row["command"] = ssh_args.no_command ? std::string() : jobs[i].command;
    row["ssh"] = ssh_line(p.target, jobs[i].command, tty, ssh_args);
    rows.push_back(std::move(row));
  }
  if (!ctx.machine_format()) {
    for (const auto& r : rows) {
      ctx.stdout_stream() << r["ssh"].get<std::string>() << "\n";
    }
    return 0;
  }
  TPUCTL_TRY(emit_list(ctx, rows,
                       {{"NODE", "node"}, {"WORKER", "worker"}, {"HOST", "host"}, {"SSH", "ssh"}}));
  return 0;
}

// --output-directory: each worker's output (stdout and stderr as they arrive) into
// DIR/<label>.log instead of the terminal; one row per worker says where it went.
Expected<int> run_into_files(Context& ctx, const std::vector<provision::WorkerPlan>& plans,
                             std::vector<remote::Job> jobs, remote::SshOptions options,
                             const std::string& dir) {
  std::vector<std::shared_ptr<std::ofstream>> files;
  std::vector<std::string> names;
  for (size_t i = 0; i < jobs.size(); ++i) {
    names.push_back((fs::path(dir) / (worker_file_name(plans, plans[i]) + ".log")).string());
    auto file = std::make_shared<std::ofstream>(names.back(), std::ios::binary | std::ios::trunc);
    if (!*file) {
      return Error(ErrorKind::failure, "cannot write '" + names.back() + "'");
    }
    files.push_back(file);
    jobs[i].on_bytes = [file](remote::Stream, const char* data, size_t size) {
      file->write(data, static_cast<std::streamsize>(size));
    };
  }
  options.keep_output = false;
  remote::CancelToken token;
  InterruptGuard guard(token);
  TPUCTL_TRY_ASSIGN(auto results, remote::run_fanout(jobs, options, {}, &token));
  files.clear(); // flushed and closed
  ctx.stderr_stream() << failure_report(results, "workers");
  Json rows = Json::array();
  for (const auto& r : results) {
    Json row = plan_json(plans[r.index]);
    row["exit_status"] = host_exit_status(r);
    row["log"] = names[r.index];
    rows.push_back(std::move(row));
  }
  TPUCTL_TRY(emit_list(ctx, rows,
                       {{"NODE", "node"},
                        {"WORKER", "worker"},
                        {"HOST", "host"},
                        {"EXIT_STATUS", "exit_status"},
                        {"LOG", "log"}}));
  return guard.interrupted() ? guard.exit_status() : broadcast_exit_status(results);
}

// ssh -N: the -L ports already bound, the session carries the forwards until SIGINT/SIGTERM,
// then exits 0 (stopping is how a tunnel ends), or 130/143 when interrupted before they were up.
Expected<int> forward_only(const remote::Job& job, const remote::SshOptions& options,
                           remote::ForwardSet& forwards) {
  remote::CancelToken token;
  InterruptGuard guard(token);
  auto done = remote::run_forwarding(job.target, options, forwards, token);
  if (!done && guard.interrupted()) {
    return guard.exit_status();
  }
  return done;
}

Expected<int> run_ssh(Context& ctx, const SliceFlags& f) {
  TPUCTL_TRY_ASSIGN(auto target, split_user_target(f.target));
  TPUCTL_TRY_ASSIGN(auto ssh_args, parse_ssh_args(f.ssh_flags, f.argv));
  TPUCTL_TRY_ASSIGN(auto command, slice_command(f, ssh_args.command));
  if (ssh_args.no_command && !command.empty()) {
    return usage_error("-N runs no remote command, and a command was given ('" +
                       util::printable(command) +
                       "'): drop -N to forward while it runs, or "
                       "drop the command to only forward");
  }
  TPUCTL_TRY_ASSIGN(auto options, ssh_options(f.ssh));
  TPUCTL_TRY_ASSIGN(auto mode, parse_fanout_output(f.ssh.output));
  if (!f.output_directory.empty()) {
    std::error_code ec;
    if (!fs::is_directory(f.output_directory, ec)) {
      return usage_error("--output-directory '" + util::printable(f.output_directory) +
                         "' is not an existing directory (make it first: mkdir -p " +
                         util::shell_quote(f.output_directory) + ")");
    }
    if (command.empty()) {
      return usage_error("--output-directory needs a command (--command 'CMD')");
    }
  }
  TPUCTL_TRY_ASSIGN(auto secrets, provision::secrets_from_environment(f.env_secrets));
  if (!secrets.empty() && command.empty()) {
    return usage_error("--env-secret needs a command (--command 'CMD'): an interactive shell "
                       "reads its stdin from you");
  }
  TPUCTL_TRY_ASSIGN(auto plans, plan_slice_workers(ctx, f, target, !f.dry_run));
  provision::mark_partial_job(plans); // no JAX start-up for a part of the job
  TPUCTL_TRY(provision::check_secrets_apart(
      secrets, provision::parse_env_items(f.env).value_or(provision::EnvVars{})));
  if (ssh_args.any() && plans.size() != 1) {
    return usage_error("port forwarding (" + util::join(ssh_args.options, " ") +
                       ") reaches one worker at a time, and this selects " +
                       std::to_string(plans.size()) +
                       " workers: give --worker N (and --node ID), one tpuctl per worker, each "
                       "with its own local ports");
  }
  if (command.empty() && !ssh_args.no_command && plans.size() != 1) {
    return usage_error("cannot open a shell on " + std::to_string(plans.size()) +
                       " workers at once: give --command 'CMD' to run it on each, or --worker N "
                       "(and --node N) for a shell on one");
  }
  std::vector<remote::Job> jobs;
  for (const auto& p : plans) {
    remote::Job job;
    job.target = labelled_target(p);
    job.command = provision::secret_read_prefix(secrets) +
                  provision::env_command_prefix(p.env, p.agent_dir) +
                  (command.empty() ? "exec \"${SHELL:-/bin/sh}\" -l" : command);
    job.index = jobs.size();
    jobs.push_back(std::move(job));
  }
  if (f.dry_run) {
    return print_dry_run(ctx, plans, jobs, command.empty(), ssh_args);
  }
  // Port forwards (one worker): the -L ports bound before connecting (a port in use: one line,
  // exit 1, nothing connected), then carried by the session of the shell or the command, until
  // it ends, or alone with -N.
  std::shared_ptr<remote::ForwardSet> forwards;
  if (ssh_args.any()) {
    auto notice = [&ctx](const std::string& text) {
      ctx.stderr_stream() << "tpuctl: notice: " << text << "\n";
      ctx.stderr_stream().flush();
    };
    TPUCTL_TRY_ASSIGN(forwards,
                      remote::bind_forwards(ssh_args.forwards, ssh_args.ipv4, std::move(notice)));
    if (ssh_args.no_command) {
      return forward_only(jobs.front(), options, *forwards);
    }
    jobs.front().forwards = forwards;
  }
  if (command.empty()) {
    if (!forwards) {
      return remote::run_interactive(jobs.front().target, options, jobs.front().command);
    }
    remote::CancelToken token;
    InterruptGuard guard(token);
    auto status = remote::run_interactive(jobs.front().target, options, jobs.front().command,
                                          forwards.get(), &token);
    if (guard.interrupted()) {
      return guard.exit_status();
    }
    return status;
  }
  if (!secrets.empty()) { // the values on stdin, read first; never in the command
    options.stdin_data = remote::InputBytes::of(provision::secret_input(secrets));
  }
  if (!f.output_directory.empty()) {
    return run_into_files(ctx, plans, std::move(jobs), options, f.output_directory);
  }
  return run_broadcast(ctx, jobs, options, mode, f.ssh.stdin_broadcast, job_identities(plans));
}

Expected<int> run_env(Context& ctx, const SliceFlags& f) {
  TPUCTL_TRY_ASSIGN(auto target, split_user_target(f.target));
  TPUCTL_TRY_ASSIGN(auto plans, plan_slice_workers(ctx, f, target, false));
  if (plans.size() != 1) {
    return usage_error("tpuctl env shows one worker: give --worker N (and --node ID for a queued "
                       "resource with several nodes)");
  }
  const auto& p = plans.front();
  Json vars = Json::object();
  for (const auto& [k, v] : p.env) {
    vars[k] = v;
  }
  TPUCTL_TRY(
      emit(ctx, vars, [&](std::ostream& os, const Json&) { os << provision::to_dotenv(p.env); }));
  return 0;
}

const char* target_help(SliceShape shape) {
  switch (shape) {
  case SliceShape::queued_resource:
    return "[USER@]QR: a queued resource";
  case SliceShape::tpu_vm:
    return "[USER@]NODE: a node of a queued resource";
  case SliceShape::tpuctl:
    break;
  }
  return "[USER@]TARGET: a queued resource (all its nodes) or one node";
}

// TARGET, the selection, and what is added to the worker environment (ssh, env).
void add_env_flags(CLI::App& cmd, SliceFlags& f) {
  cmd.add_option("TARGET", f.target, target_help(f.shape))->required();
  add_selection_flags(cmd, f);
  cmd.add_option("--env", f.env, "add KEY=VALUE to every worker's environment (repeatable)")
      ->type_name("K=V");
  cmd.add_option("--env-profile", f.env_profile,
                 "also export torchrun, slurm or skypilot variables (default none)")
      ->type_name("P");
  cmd.add_option("--python-env", f.python_env,
                 "the workers' Python environment, put on PATH (default: config python-env, "
                 "else /opt/tpuctl/frameworks)")
      ->type_name("DIR");
}

} // namespace

void setup_slice_ssh(CLI::App& cmd, Registry& registry, SliceShape shape) {
  auto f = std::make_shared<SliceFlags>();
  f->shape = shape;
  registry.bind(cmd, [f](Context& ctx) { return run_ssh(ctx, *f); });
  add_env_flags(cmd, *f);
  cmd.add_option("--env-secret", f->env_secrets,
                 "add NAME with its value from this environment, sent on stdin: never on a "
                 "command line, in output or logs (repeatable)")
      ->type_name("NAME");
  cmd.add_option("--command", f->command, "the command line, run by each worker's login shell")
      ->type_name("CMD");
  cmd.add_option("CMD", f->argv,
                 shape == SliceShape::tpuctl
                     ? "after '--': ssh's -L/-R/-N/-4 if any, then the command and its "
                       "arguments (quoted for you)"
                     : "after '--': ssh's -L/-R/-N/-4 if any, then the command, its words "
                       "joined with spaces as ssh does");
  cmd.add_option("--ssh-flag", f->ssh_flags,
                 "ssh options, split on spaces as gcloud does: -L [BIND:]PORT:HOST:HOSTPORT, "
                 "-R [BIND:]PORT:HOST:HOSTPORT, -N (forward only), -4 (repeatable; one worker)")
      ->type_name("FLAGS");
  cmd.add_option("--output-directory", f->output_directory,
                 "write each worker's output to DIR/<worker>.log (DIR must exist)")
      ->type_name("DIR");
  cmd.add_flag("--dry-run", f->dry_run,
               "print the ssh command line of each worker (same port, key, known_hosts) and run "
               "nothing");
  add_ssh_flags(cmd, f->ssh);
  const std::string name = shape == SliceShape::queued_resource ? "tpuctl queued-resources ssh"
                           : shape == SliceShape::tpu_vm        ? "tpuctl tpu-vm ssh"
                                                                : "tpuctl ssh";
  const std::string target = shape == SliceShape::tpu_vm ? "my-node" : "qr-1";
  const std::string nodes = shape == SliceShape::queued_resource ? " --node=all" : "";
  cmd.footer("Every command runs with the worker environment (TPU_WORKER_ID,\n"
             "TPU_WORKER_HOSTNAMES, JAX_COORDINATOR_ADDRESS, ...; see 'tpuctl env') and the\n"
             "agent's directory first on PATH. With no command and one worker, an interactive\n"
             "shell with a tty opens. Exit status: 0 when every worker succeeded, else the first\n"
             "failing worker's (255 unreachable, 124 timed out).\n\n"
             "Port forwarding, on one worker: -L [BIND:]PORT:HOST:HOSTPORT listens here\n"
             "(loopback unless BIND; '*' for every interface) and reaches HOST:HOSTPORT as the\n"
             "worker sees it; -R [BIND:]PORT:HOST:HOSTPORT the other way (PORT 0: the worker\n"
             "picks, told on stderr). The forwards live as long as the shell or command, or\n"
             "with -N until Ctrl-C/SIGTERM (then exit 0). A -L port in use exits 1 before\n"
             "connecting; other ssh options exit 2.\n\nExamples:\n  " +
             name + " " + target + " --worker=all" + nodes + " --command 'python3 train.py'\n  " +
             name + " " + target +
             " --worker=1-3 --output=jsonl --command 'echo $TPU_WORKER_ID'\n  " + name + " " +
             target + " --worker=0                # a shell on worker 0\n  " + name + " " + target +
             " --ssh-flag=\"-4 -L 9001:localhost:9001\"   # a shell, and a tunnel\n  " + name +
             " " + target + " -- -N -L 6006:localhost:6006   # only the tunnel");
}

void setup_slice_ssh_scp(CLI::App& group, Registry& registry, bool queued_resources) {
  const auto shape = queued_resources ? SliceShape::queued_resource : SliceShape::tpu_vm;
  const char* of = queued_resources ? "a queued resource's" : "a node's";
  setup_slice_ssh(*group.add_subcommand("ssh", std::string("run a command on ") + of +
                                                   " workers (--worker=all), or open a shell"),
                  registry, shape);
  setup_slice_scp(*group.add_subcommand("scp", std::string("copy files to or from ") + of +
                                                   " workers, sha256-verified"),
                  registry, shape);
}

void setup_ssh(CLI::App& group, Registry& registry) {
  setup_slice_ssh(group, registry, SliceShape::tpuctl);
}

void setup_env(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<SliceFlags>();
  registry.bind(group, [f](Context& ctx) { return run_env(ctx, *f); });
  add_env_flags(group, *f);
  group.footer("Prints, without connecting, the environment `tpuctl ssh` gives that worker:\n"
               "KEY='value' lines by default (--format dotenv), or --format json.\n"
               "  set -a; . ./worker.env; set +a   reproduces it in a shell.");
}

} // namespace tpuctl::cli
