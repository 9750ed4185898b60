// The exit statuses tpuctl promises to scripts (README "Exit status", man tpuctl(1)).
// Only cli/ chooses an exit code; everything below it returns an Error with an ErrorKind.
#pragma once

#include "util/error.hpp"

namespace tpuctl::cli {

enum ExitCode : int {
  k_exit_ok = 0,
  k_exit_failure = 1,      // the operation failed
  k_exit_usage = 2,        // usage error or invalid input (bad flag, malformed topology)
  k_exit_capacity = 3,     // no capacity for the request, or timed out waiting
  k_exit_not_found = 4,    // a named pool, host, queued resource... does not exist
  k_exit_auth = 5,         // authentication or host-key failure
  k_exit_partial = 6,      // created what it names (stdout/stderr say its state), then failed
  k_exit_timeout = 124,    // a remote command timed out (as timeout(1))
  k_exit_transport = 255,  // a host could not be reached over SSH (as ssh(1))
  k_exit_interrupted = 130 // interrupted by SIGINT
};

int exit_code_for(ErrorKind kind);

// The error of a command that recorded `what` ("queued resource 'b60'"), which exists now in
// `state` ("PROVISIONING"), and then failed with `later`: kind partial (exit 6), saying what
// exists, why the command stopped, and `next` (how to carry on or undo it).
Error recorded_then_failed(const std::string& what, const std::string& state, const Error& later,
                           const std::string& next);

} // namespace tpuctl::cli
