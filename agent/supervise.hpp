// `tpuctl agent supervise`: how a workload runs on a worker, detached from the SSH session that
// started it.
//
// The caller (an SSH command) forks a supervisor into its own session and returns as soon as the
// command has started, printing the pids; the supervisor then runs `/bin/sh -c COMMAND` in a new
// process group, appends its stdout and stderr to <dir>/log, writes a heartbeat (unix ms) to
// <dir>/heartbeat every interval, and records the outcome in <dir>/status.json:
//   {"attempt", "state": "running"|"exited", "supervisor_pid", "pid", "started_ms",
//    "finished_ms", "exit_code" (128+N for signal N), "signal", "stopped"}
// SIGTERM, SIGINT or SIGHUP to the supervisor stops the command's whole group (TERM, then KILL
// after the grace period) and records it as exited with "stopped": true. When the command exits
// by itself, whatever it left running in its group is stopped the same way.
//
// Every process inherits the caller's environment, so the tag the controller exports
// (TPUCTL_WORKLOAD_UID) marks all of them, including any that leave the group.
// Files are 0600 in a 0700 directory.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace tpuctl::agent {

struct SuperviseOptions {
  std::string dir;     // created (0700) when missing
  int attempt = 0;     // recorded in status.json; > 0 adds a marker line to the log
  std::string command; // run by /bin/sh -c
  std::chrono::milliseconds heartbeat_interval{2000};
  std::chrono::milliseconds kill_grace{2000};
};

struct Supervised {
  int supervisor_pid = 0;
  int pid = 0; // the command's process (and group) id
  std::string dir;
};

// Starts the supervisor and returns once the command runs. Errors: usage (empty command or
// directory, bad intervals), failure (the directory or log cannot be created, fork or exec
// failed: the message says which).
Expected<Supervised> start_supervised(const SuperviseOptions& options);

// What `tpuctl agent supervise-status --dir D` prints: {"now_ms", "status": <status.json> or
// null, "heartbeat_ms" (0 when none), "supervisor_alive"}. A status.json that cannot be parsed
// is reported as null with "error". Never fails.
nlohmann::json supervised_status(const std::string& dir);

// True while process group `pgid` has a member that is not a zombie (scans /proc).
bool group_has_live_members(int pgid);

} // namespace tpuctl::agent
