// Finding and stopping processes without scanning the whole process table (for workers, and
// for the local pool on this machine).
//
// A workload's supervisor makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so
// everything its command starts stays below it even after a double fork or setsid: the
// supervisor's descendants are exactly the workload's processes, and walking them costs the
// size of that tree (Linux's /proc/PID/task/TID/children), not the size of the host's process
// table. On a local pool, where every "host" is this machine, a scan of every process's
// environment per host is quadratic in the pool's size; a walk of one's own tree is not.
//
// The tag scan (processes_tagged: one pass over /proc reading each environment) remains for
// what no tree holds any more: a supervisor that was killed left its orphans to init.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace tpuctl::util {

// True while `pid` runs (a zombie, dead and waiting to be reaped, does not count).
bool process_running(int pid);
// True when process `pid` exists and is stopped (SIGSTOP, a debugger: state T or t): it runs
// nothing until it is continued.
bool process_stopped(int pid);

// Every running descendant of `pid`, not `pid` itself, parents before their children. Reads
// /proc/PID/task/TID/children; on a kernel without it, one pass over /proc's parent links.
std::vector<int> descendants(int pid);

// The running processes whose environment holds exactly `entry` ("VAR=value"), other than
// `exclude`: one pass over /proc.
std::vector<int> processes_tagged(const std::string& entry, int exclude = 0);

struct StopCount {
  int terminated = 0; // got SIGTERM
  int killed = 0;     // still there after the grace: got SIGKILL
};

// SIGTERM to each of `pids`, up to `grace` for them to end (checking only those pids), then
// SIGKILL to the ones left. `reap`: also reap this process's own children meanwhile (a
// subreaper's orphans turn into its zombies).
StopCount stop_processes(const std::vector<int>& pids, std::chrono::milliseconds grace,
                         bool reap = false);

} // namespace tpuctl::util
