// Failpoints: named places where a chaos test can make this process die or be interrupted at an
// exact step, instead of guessing with timers. Off unless TPUCTL_FAILPOINT is set, and then only
// a getenv and a string compare per point; nothing else changes.
//
//   TPUCTL_FAILPOINT=<name>[:<action>][,<name>[:<action>]...]
//     actions: kill (default) SIGKILL this process at once, as `kill -9` or the OOM killer would
//              sigint raise SIGINT once, as Ctrl-C would (the process's handler runs)
//              stop   SIGSTOP this process, until the test sends SIGCONT (say, after filling
//                     the disk the state store is on)
//     An action may end in `@FILE`: the point then fires in the first process that creates FILE
//     (O_EXCL) only, whichever of the processes carrying the variable gets there first (a test
//     gives it to every command, so the detached process that takes a step over fires too).
//
// The points (see where failpoint() is called): provision.claimed (hosts claimed, lease taken,
// nothing pushed yet), provision.push, provision.probe, provision.startup and provision.preflight
// (the first worker finished that step, the others are still in it), workload.repair (a
// workload's monitor drained its lost hosts and has not yet sent the slice back to the queue).
#pragma once

#include <string_view>

namespace tpuctl::util {

// Acts on `name` if TPUCTL_FAILPOINT names it. A point fires at most once per process.
void failpoint(std::string_view name);

} // namespace tpuctl::util
