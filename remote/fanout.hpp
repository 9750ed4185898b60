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
// empty address), auth (an identity file that cannot be read or decrypted).
Expected<std::vector<HostResult>> run_fanout(const std::vector<Job>& jobs,
                                             const SshOptions& options,
                                             const FanoutCallbacks& callbacks = {},
                                             const CancelToken* cancel = nullptr);

// The same command for every target; index = position. Never fails.
std::vector<Job> make_jobs(const std::vector<SshTarget>& targets, const std::string& command);

} // namespace tpuctl::remote
