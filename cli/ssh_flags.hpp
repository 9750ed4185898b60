// The SSH flags shared by every command that reaches hosts (pool check/ssh/scp, and later
// tpuctl ssh/scp and workloads), and the SIGINT handling of a broadcast.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "cli/fanout_output.hpp"
#include "provision/pool/pools.hpp"
#include "remote/ssh_settings.hpp"
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
  std::string ssh_config;      // empty: ~/.ssh/config
  std::string passphrase_file; // --identity-passphrase-file (remote/passphrase.hpp)
};

// Declares --batch-size, --connect-timeout, --timeout, --strict-host-key-checking, and (when
// `with_output`) --output, --stdin, --tty.
void add_ssh_flags(CLI::App& app, SshFlags& flags, bool with_output = true);
// Only how to connect: --batch-size, --connect-timeout, --strict-host-key-checking,
// --ssh-config (for commands that reach hosts but run no user command: qr create, delete...).
void add_ssh_policy_flags(CLI::App& app, SshFlags& flags);

// Checks the flags (every problem reported) and builds the engine's options.
Expected<remote::SshOptions> ssh_options(const SshFlags& flags);
// What a request made with these flags records of them (remote/ssh_settings.hpp), paths made
// absolute, for the processes that carry it on later.
remote::SshSettings ssh_settings(const SshFlags& flags);

// Runs a user's command broadcast (`pool ssh`, `tpuctl ssh`) with the options and output mode
// the caller parsed from its flags: reads stdin first when `stdin_broadcast`, prints live, then
// the failure report. `identities` (by job index) name a slice's workers in jsonl and in the
// report; empty for a pool's hosts. Returns the broadcast exit status (128+N when signal N
// interrupted it). Errors: the engine's.
Expected<int> run_broadcast(Context& ctx, const std::vector<remote::Job>& jobs,
                            remote::SshOptions options, FanoutOutput mode, bool stdin_broadcast,
                            std::vector<JobIdentity> identities = {});

// Installs SIGINT/SIGTERM handlers that cancel `token` for the lifetime of this object.
class InterruptGuard {
public:
  explicit InterruptGuard(remote::CancelToken& token);
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  bool interrupted() const;
  // The shell's status for the signal that interrupted: 130 (SIGINT), 143 (SIGTERM).
  int exit_status() const;
};

// 128 + the last SIGINT/SIGTERM an InterruptGuard caught in this process (130 when none did):
// the status of an ErrorKind::interrupted error (cli/app.cpp).
int interrupted_exit_status();

} // namespace tpuctl::cli
