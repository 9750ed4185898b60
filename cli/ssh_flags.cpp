#include "cli/ssh_flags.hpp"

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <unistd.h>

#include "cli/config.hpp"
#include "cli/values.hpp"
#include "remote/fanout.hpp"
#include "remote/passphrase.hpp"
#include "remote/ssh_settings.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

void add_ssh_policy_flags(CLI::App& app, SshFlags& f) {
  const char* group = "SSH";
  // Defaults from `tpuctl config` (checked when they were set); the flags override them.
  f.batch_size = active_config().get("ssh.batch_size").value_or(f.batch_size);
  f.strict = active_config().get("ssh.strict_host_key_checking").value_or(f.strict);
  app.add_option("--batch-size", f.batch_size, "hosts in flight at once: N or all (default 64)")
      ->check(count_or(1, 4096, "all"))
      ->type_name("N")
      ->group(group);
  app.add_option("--connect-timeout", f.connect_timeout,
                 "connect + key exchange timeout per host (default 10s)")
      ->type_name("D")
      ->group(group)
      ->check(positive_duration());
  app.add_option("--strict-host-key-checking", f.strict,
                 "yes (default; ask is yes): refuse unknown hosts; accept-new: record them; no")
      ->type_name("POLICY")
      ->group(group);
  app.add_option("--ssh-config", f.ssh_config, "an ssh_config to read instead of ~/.ssh/config")
      ->envname("TPUCTL_SSH_CONFIG")
      ->type_name("FILE")
      ->group(group);
  app.add_option("--identity-passphrase-file", f.passphrase_file,
                 "the passphrase of an encrypted identity file, its first line (else ssh-agent, "
                 "SSH_ASKPASS or a prompt)")
      ->type_name("FILE")
      ->group(group);
}

void add_ssh_flags(CLI::App& app, SshFlags& f, bool with_output) {
  const char* group = "SSH";
  add_ssh_policy_flags(app, f);
  app.add_option("--timeout", f.timeout,
                 "kill the remote command after this long (e.g. 5m; 0: no limit)")
      ->type_name("D")
      ->group(group)
      ->check(timeout_duration());
  if (with_output) {
    app.add_option("--output", f.output,
                   "prefixed (default: [HOST] or [NODE/WORKER@HOST] line), grouped (identical "
                   "outputs once) or jsonl")
        ->type_name("MODE")
        ->group(group);
    app.add_flag("--stdin", f.stdin_broadcast, "send this command's stdin to every host")
        ->group(group);
    app.add_flag("--tty", f.tty, "allocate a pseudo-terminal on each host")->group(group);
  }
}

Expected<remote::SshOptions> ssh_options(const SshFlags& f) {
  ErrorList problems;
  remote::SshOptions o;
  if (util::to_lower(f.batch_size) == "all") {
    o.batch_size = 4096;
  } else if (auto n = util::parse_int(f.batch_size, "--batch-size", 1, 4096); !n) {
    problems.add(usage_error(n.error().message + " (or all)"));
  } else {
    o.batch_size = static_cast<size_t>(*n);
  }
  if (auto d = util::parse_duration(f.connect_timeout, "--connect-timeout"); !d) {
    problems.add(d.error());
  } else {
    o.connect_timeout = *d;
  }
  if (!f.timeout.empty()) {
    if (auto d = util::parse_duration(f.timeout, "--timeout"); !d) {
      problems.add(d.error());
    } else {
      o.command_timeout = *d;
    }
  }
  // gcloud's "ask" is "yes" here: tpuctl never prompts, and an unknown key is refused with how
  // to accept it (pool add-hosts, or --strict-host-key-checking=accept-new).
  if (auto policy = remote::parse_host_key_policy(f.strict); !policy) {
    problems.add(policy.error());
  }
  if (auto mode = parse_fanout_output(f.output); !mode) {
    problems.add(mode.error());
  }
  o.tty = f.tty;
  o.passphrase_source = remote::passphrase_source("");
  if (!problems.empty()) {
    return problems.combined();
  }
  return remote::with_settings(std::move(o), ssh_settings(f));
}

remote::SshSettings ssh_settings(const SshFlags& f) {
  // Absolute paths: whoever reads them later (a detached driver, a monitor) may run elsewhere.
  auto absolute = [](const std::string& path) {
    std::error_code ec;
    auto p = path.empty() ? std::filesystem::path() : std::filesystem::absolute(path, ec);
    return ec ? path : p.lexically_normal().string();
  };
  remote::SshSettings s;
  s.strict = f.strict;
  s.config_file = absolute(f.ssh_config);
  s.passphrase_file = absolute(f.passphrase_file);
  if (auto d = util::parse_duration(f.connect_timeout, "--connect-timeout")) {
    s.connect_timeout_ms = d->count();
  }
  return s;
}

namespace {

std::atomic<remote::CancelToken*> g_token{nullptr};
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0}; // the last one caught, for the exit status
struct sigaction g_old_int {};
struct sigaction g_old_term {};

void on_signal(int signo) {
  g_signal.store(signo);
  g_interrupted.store(true);
  if (auto* t = g_token.load()) {
    t->cancel();
  }
}

} // namespace

InterruptGuard::InterruptGuard(remote::CancelToken& token) {
  g_interrupted.store(false);
  g_token.store(&token);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_token.store(nullptr);
}

bool InterruptGuard::interrupted() const {
  return g_interrupted.load();
}

int InterruptGuard::exit_status() const {
  return interrupted_exit_status();
}

int interrupted_exit_status() {
  const int signo = g_signal.load();
  return 128 + (signo == 0 ? SIGINT : signo);
}

Expected<int> run_broadcast(Context& ctx, const std::vector<remote::Job>& jobs,
                            remote::SshOptions options, FanoutOutput mode, bool stdin_broadcast,
                            std::vector<JobIdentity> identities) {
  if (stdin_broadcast) { // after what the caller put first (secrets); spooled, any size
    std::string first;
    std::string buffer;
    if (options.stdin_data) {
      first = std::string(options.stdin_data->read(0, options.stdin_data->size(), buffer));
    }
    TPUCTL_TRY_ASSIGN(options.stdin_data, remote::InputBytes::spool(first, STDIN_FILENO));
  }
  // Grouped and jsonl print after a host ends: its output waits in spools (bounded memory).
  options.keep_output = false;
  options.spool_output = mode != FanoutOutput::prefixed;
  remote::CancelToken token;
  InterruptGuard guard(token);
  FanoutPrinter printer(mode, ctx.stdout_stream(), ctx.stderr_stream(), std::move(identities));
  TPUCTL_TRY_ASSIGN(auto results, remote::run_fanout(jobs, options, printer.callbacks(), &token));
  printer.finish(results);
  return guard.interrupted() ? guard.exit_status() : broadcast_exit_status(results);
}

} // namespace tpuctl::cli
