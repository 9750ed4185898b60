// The SSH flags shared by every command that reaches hosts (pool check/ssh/scp, and later
// tpuctl ssh/scp and workloads), and the SIGINT handling of a broadcast.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "cli/fanout_output.hpp"
#include "provision/pools.hpp"
#include "remote/ssh_types.hpp"

namespace tpuctl::cli {

struct SshFlags {
  std::string batch_size = "64"; // N, or all (gcloud's form)
  std::string connect_timeout = "10s";
  std::string timeout; // empty: none
  std::string strict = "yes";
  std::string output = "prefixed";
  bool stdin_broadcast = false;
  bool tty = false;
  std::string ssh_config; // empty: ~/.ssh/config
};

// Declares --batch-size, --connect-timeout, --timeout, --strict-host-key-checking, and (when
// `with_output`) --output, --stdin, --tty.
void add_ssh_flags(CLI::App& app, SshFlags& flags, bool with_output = true);
// Only how to connect: --batch-size, --connect-timeout, --strict-host-key-checking,
// --ssh-config (for commands that reach hosts but run no user command: qr create, delete...).
void add_ssh_policy_flags(CLI::App& app, SshFlags& flags);

// Checks the flags (every problem reported) and builds the engine's options.
Expected<remote::SshOptions> ssh_options(const SshFlags& flags);

// Runs a user's command broadcast (`pool ssh`, `tpuctl ssh`) with the options and output mode
// the caller parsed from its flags: reads stdin first when `stdin_broadcast`, prints live, then
// the failure report. Returns the broadcast exit status (130 when interrupted). Errors: the
// engine's.
Expected<int> run_broadcast(Context& ctx, const std::vector<remote::Job>& jobs,
                            remote::SshOptions options, FanoutOutput mode, bool stdin_broadcast);

// Installs SIGINT/SIGTERM handlers that cancel `token` for the lifetime of this object.
class InterruptGuard {
public:
  explicit InterruptGuard(remote::CancelToken& token);
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  bool interrupted() const;
};

} // namespace tpuctl::cli
