// The fan-out engine: one command per host over in-process libssh sessions, many hosts at once.
#pragma once

#include <vector>

#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

// Runs every job, at most options.batch_size at a time, each host on its own blocking libssh
// session from connect to close. Output streams to `callbacks` line by line as it arrives; each
// host's outcome (ok, exit code, signal, timeout, interrupted, or a transport failure) is in the
// returned results, in job order. stdin gets EOF at once unless options.stdin_data is set. On
// timeout or cancellation the remote command and everything it started is killed.
// Errors (before any connection): usage (batch size 0, unsupported SshTarget::extra keyword,
// empty address, a command too long for a worker: check_command_length), auth (an identity
// file that cannot be read or decrypted).
Expected<std::vector<HostResult>> run_fanout(const std::vector<Job>& jobs,
                                             const SshOptions& options,
                                             const FanoutCallbacks& callbacks = {},
                                             const CancelToken* cancel = nullptr);

// Long-lived commands whose output is the point (the workload monitor's watches), as
// run_fanout but: each command's stdin stays open as long as its channel (the remote command is
// expected to end when it reads end-of-file, so nothing outlives the connection), no reaper is
// started next to it, a cancel cuts the connections instead of killing the commands (at once,
// whatever the session is doing), and each session wakes every 10 s (or on data) instead of
// every 100 ms. options.command_timeout still applies.
Expected<std::vector<HostResult>> run_streams(const std::vector<Job>& jobs,
                                              const SshOptions& options,
                                              const FanoutCallbacks& callbacks,
                                              const CancelToken* cancel);

// The longest command line a worker runs: sshd hands it to the login shell as one argument
// (`$SHELL -c LINE`) and Linux refuses an argument of MAX_ARG_STRLEN (128 KiB) or more; a longer
// one resets the connection, which would look like a transport failure.
constexpr size_t k_max_command_bytes = 128 * 1024 - 1;

// Usage error when `command`, as sent (wrapped with the reaper tpuctl starts next to it), is
// longer than k_max_command_bytes: names its size and the limit, and what to do instead.
Status check_command_length(const std::string& command);

// The same command for every target; index = position. Never fails.
std::vector<Job> make_jobs(const std::vector<SshTarget>& targets, const std::string& command);

} // namespace tpuctl::remote
