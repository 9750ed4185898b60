// `tpuctl agent supervise`: how a workload runs on a worker, detached from the SSH session that
// started it.
//
// The caller (an SSH command) forks a supervisor into its own session and returns as soon as the
// command has started, printing the pids; the supervisor then runs `/bin/sh -c COMMAND` in a new
// process group, appends its stdout and stderr to <dir>/log, writes a heartbeat (unix ms) to
// <dir>/heartbeat every interval, and records the outcome in <dir>/status.json:
//   {"attempt", "state": "running"|"exited", "supervisor_pid", "pid", "started_ms",
//    "log_start", "finished_ms", "exit_code" (128+N for signal N), "signal", "stopped",
//    "last_line"}
// ("log_start": where the attempt's part of the log begins.)
// ("last_line": the log's last non-empty line when the command ended, at most 300 bytes: what a
// failure says, e.g. a Python exception).
// The command gets TPUCTL_EVENTS=<dir>/events, emptied at each attempt's start: a file of JSON
// lines ({"event": KIND, ...}) that the program (or tpuctl's Python start-up,
// agent/python/sitecustomize.py) appends to, one line per write; supervise-status and
// supervise-watch report the latest line of each kind. With a compilation cache directory, it
// also gets JAX_COMPILATION_CACHE_DIR (made 0700 when missing),
// JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 and JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=-1
// (every compiled program is kept), each unless the environment already sets it.
// The supervisor is a child subreaper: whatever the command starts stays below it, even after a
// double fork or setsid. SIGTERM, SIGINT or SIGHUP to the supervisor stops that whole tree (TERM,
// then KILL after the grace period) and records the command as exited with "stopped": true. When
// the command exits by itself, whatever it left running is stopped the same way, so a workload's
// processes end with its command (as a container's do).
//
// Every process inherits the caller's environment, so the tag the controller exports
// (TPUCTL_WORKLOAD_UID) marks all of them, including any that leave the group.
// Files are 0600 in a 0700 directory.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace tpuctl::agent {

struct SuperviseOptions {
  std::string dir;     // created (0700) when missing
  int attempt = 0;     // recorded in status.json; > 0 adds a marker line to the log
  std::string command; // run by /bin/sh -c
  std::chrono::milliseconds heartbeat_interval{2000};
  std::chrono::milliseconds kill_grace{2000};
  std::string compilation_cache; // JAX's persistent compilation cache directory; "" for none
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
// null, "heartbeat_ms" (0 when none), "supervisor_alive", "events": {KIND: the latest line of
// that kind in <dir>/events}}. A status.json that cannot be parsed is reported as null with
// "error". Never fails.
// `with_events` false leaves "events" out (supervise-watch reads the event file on its own,
// incrementally).
nlohmann::json supervised_status(const std::string& dir, bool with_events = true);

// The latest event of each kind in an events file (JSON lines with a string "event"): {KIND:
// line}. Reads at most its last 256 KiB; lines that are not such objects are skipped. Never
// fails ({} for a missing file).
nlohmann::json latest_events(const std::string& path);

// `tpuctl agent supervise-watch`: the controller's view of one worker, pushed instead of polled.
// Writes supervised_status(dir) as one JSON line to `out_fd` at once, again within a moment of
// every change of status.json, of the supervisor's liveness or of an event other than a step,
// and at least every `interval` (a heartbeat line). It also reads the attempt's progress
// (agent/step_source.hpp: the event file, and the log's lines matching `step_pattern` when one
// is given): each line carries "events" (the latest of each kind) and "progress", and the steps
// read since the last line go out as "steps": [[N, unix ms], ...] (with `report_steps` only:
// the monitor needs process 0's), at most one line a second for them (a job of 10 steps a
// second costs one line a second); returns when `in_fd` reaches end-of-file or hangs up (the SSH channel
// that runs it closed: nothing outlives its connection) or `out_fd` cannot be written. Uses
// inotify on `dir` where it can, else wakes every `interval`.
// The controller may stop the worker through the stream instead of a new session: a line
// {"stop": {"grace_ms": G, "tag": "VAR=value", "remove": true}} on `in_fd` is answered with
// {"stopping": true} at once, then stop_supervised({dir}, tag, G) and, with remove, the
// worker's directory (and the workload's, its parent under workloads/, once no other worker's
// directory is left in it), then {"stopped": {"supervisors", "terminated", "killed",
// "scanned", "removed"}}; with remove it returns then, else it goes on watching. It may start
// the worker's next attempt the same way: {"start": {"command": C}}, where C is the command line
// the controller would send over a new SSH session (environment assignments, then `tpuctl agent
// supervise ...`), runs as that session would (the login shell's -c, stdin empty) and is answered
// with {"started": {"exit_code", "out", "err"}}; the controller then needs no new session to
// restart a worker it watches. {"close": {}} ends the stream (the controller moved the worker
// elsewhere). {"dump": {}} asks for the job's Python stacks: SIGUSR1 to the process that
// registered faulthandler for it (its "stack_dump" event), answered with {"dumped": {"pid",
// "text"}}, what it wrote to the log, or {"dumped": {"error"}}. The stream's first line,
// {"watching": {"accepts": ["stop", "start", "close", "dump"]}}, says which control lines this
// agent takes. Other lines are ignored.
// Errors: usage (interval under 100 ms, a step pattern that does not compile).
struct WatchOptions {
  std::string dir;
  std::chrono::milliseconds interval{2000};
  std::string step_pattern; // "": the event protocol's steps only
  // Send the steps themselves (process 0's: the goodput ledger's source); every worker sends
  // its progress counters either way, with its regular lines.
  bool report_steps = false;
};
Status watch_supervised(const WatchOptions& options, int in_fd, int out_fd);

struct SupervisedStop {
  int supervisors = 0;  // live supervisors told to stop, each stopping its own tree
  int terminated = 0;   // processes found by the tag scan (no supervisor left): got TERM
  int killed = 0;       // ... still there after the grace: got KILL
  bool scanned = false; // the tag scan ran (a supervisor was gone while its status said running)
};

// `tpuctl agent supervise-stop`: stops the supervised commands of `dirs` (one host's workers of
// a workload). A live supervisor gets SIGTERM queued with `grace` (sigqueue), stops its
// command's whole tree (the lesser of `grace` and its own, then KILL) and records the exit; this waits for it (up to `grace` + 10 s). Only where a
// supervisor is gone while its status says running (it was killed, its orphans went to init)
// are the processes whose environment holds `tag` (VAR=value) found, in one pass over /proc,
// stopped (TERM, `grace`, KILL), and one more pass catches what they forked meanwhile. Cost:
// the workload's own processes, not the host's process table. Never fails.
SupervisedStop stop_supervised(const std::vector<std::string>& dirs, const std::string& tag,
                               std::chrono::milliseconds grace);

} // namespace tpuctl::agent
