// Several steps on every host over one SSH session per host: connect once, then run each step's
// command (or a file push) on a new channel of the same session.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "remote/push.hpp"
#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

struct StepPush {
  PushOptions options;
  std::vector<std::string> remote_paths; // one per target
  // Hosts that may receive the file in this step (null: all). A host that may not, and whose
  // copy differs, ends ok with `unchanged` false and nothing sent: a later step brings it.
  std::function<bool(size_t host)> may_upload;
};

struct Step {
  std::string name;
  // Hosts in this step at once (a sliding window); 0: every host at once, for a step whose
  // hosts must meet each other (a preflight).
  size_t concurrency = 0;
  std::chrono::milliseconds timeout{0}; // per host; 0: none
  // One command per target ("" runs nothing on that host: its result is ok with no output),
  // with `stdin_data` on every one. Ignored when `push` is set.
  std::vector<std::string> commands;
  std::shared_ptr<const InputBytes> stdin_data;
  std::optional<StepPush> push; // push_file's check and upload instead of a command
  // Decided when the step starts, after `proceed` saw the step before (so they may depend on
  // it): the command of a host, instead of `commands` (null: use `commands`), and whether a
  // host takes part at all (null: all; a host left out ends ok, nothing run, not even a connect,
  // and its end is not reported to `callbacks`).
  std::function<std::string(size_t host)> command_of;
  std::function<bool(size_t host)> runs_on;
  // Hosts left out by runs_on still connect in this step's window, for the steps after it (a
  // connection that fails is retried, and reported, by the next step that runs on the host).
  bool connect_all = false;
  // See detail::ExecRequest::reap: false only for commands bounded by themselves.
  bool reap = true;
  // The index of a later step to hold this one into (0: none). On a host where this step runs
  // a command, the command's channel stays open when it ends: the step's result is reported
  // (its exit status; the session's output so far), and if the host takes part in none of the
  // steps in between and in that later one, the later step's command runs on the same channel,
  // started by the same shell, when that step starts: one process and one channel fewer per
  // host (a check, then the agent). Else the channel ends and the host goes on as usual. Both
  // steps must be command steps without stdin data; the command runs with stdin on /dev/null.
  size_t hold_into = 0;
  FanoutCallbacks callbacks; // this step's lines and per-host ends
};

// After step k, with every host's result in target order: true to go on to step k + 1.
using StepGate = std::function<bool(size_t step, const std::vector<HostResult>& results)>;

// Runs the steps in order on every target. Every host is in step with the others: step k + 1
// starts on any host only once step k ended on all of them and `proceed` said to go on, so a
// step may rely on every host having finished the one before (the agent pushed everywhere) and
// on its peers running at the same moment (concurrency 0). Each host connects in its first
// step, within that step's window, retrying transient failures as run_fanout does, and keeps
// the session to the end; a session lost between steps is connected again. A host whose
// connection fails gets that failure as its result and is left out of the later steps (their
// results repeat the failure). One thread per host: options.batch_size does not apply, each
// step's concurrency does. Output is kept in the results when options.keep_output.
// Returns the results of the steps that ran (fewer than `steps` when `proceed` stopped it).
// Errors (before any connection): as run_fanout's and push_file's.
Expected<std::vector<std::vector<HostResult>>> run_steps(const std::vector<SshTarget>& targets,
                                                         const SshOptions& options,
                                                         const std::vector<Step>& steps,
                                                         const StepGate& proceed,
                                                         const CancelToken* cancel = nullptr);

} // namespace tpuctl::remote
