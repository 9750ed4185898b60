// How the monitor hears from a running workload's workers: pushed, not polled.
//
// Polling (one new SSH session per worker per second, each with its key exchange, login shell,
// reaper and status command) costs the watched hosts and the watching machine in proportion to
// workers x polls: at 256 workers on one box it kept the load average at 150 and, once that load
// made a session late, declared healthy workers lost. So the monitor opens one stream per worker
// instead and keeps it for the attempt: `tpuctl agent supervise-watch` on the worker writes a
// status line at once, within a moment of every change (inotify on the worker's directory: an
// exit is seen as it happens) and every 3 s otherwise (a heartbeat the worker pushes). The
// monitor's threads only read; the stream's agent ends when its channel does (it waits on its
// stdin), so nothing outlives the connection and no reaper or kill script is needed.
//
// Each turn (every second) the monitor takes what the streams said. A worker is suspect when
// its stream ended, or it has been silent for suspect_after (7 s: two lines missed) in the
// monitor's own running time: util::StallClock subtracts the time this process did not run
// (stopped, starved), so a monitor that was stopped for 30 s resumes to streams full of lines
// and blames nobody. A suspect gets a second, independent check: a new SSH session running
// `agent supervise-status` (5 s connect timeout, no retry). Reached, it is heard (and its stream
// opened again if it ended, at most every 10 s); not reached, it stays silent, and it is LOST
// only when silent for lost_after (10 s) with a failed check, or when two checks in a row are
// refused (workload_policy.hpp). A host whose sshd and processes die closes its stream at once
// and refuses the checks: LOST two turns later, about 2 s after it died; a host that hangs
// (connections accepted, never answered) is
// suspected at most 7 s after it hung, and LOST when its check times out 5 s later (plus a turn):
// within 14 s.
//
// The streams also stop the workers (stop()): a delete asks the monitor, which holds a
// connection to every worker already, instead of opening a new session to every host, so a
// workload of 256 workers stops in a fraction of one SSH round (workload_ops.cpp). And they
// start the next attempt (start()): after a restart, or a repair that placed one slice again,
// the watch is kept (retarget(): only the workers that moved get new streams), so only the
// moved workers need new sessions; the others start in a fraction of a round.
//
// Cost at 256 workers on the watching machine: 256 threads that sleep until a line comes (85
// lines a second), one turn a second on this process's copy of the workload, and the store read
// only every 5 s or when something changed (workload_ops.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "provision/slice/slice_workers.hpp"
#include "provision/workload/workload.hpp"
#include "provision/workload/workload_policy.hpp"
#include "remote/ssh_types.hpp"
#include "util/stall_clock.hpp"

namespace tpuctl::provision {

class WorkerWatch {
public:
  // Opens a stream to every worker of `plans` (in the background: returns at once).
  WorkerWatch(const Workload& workload, const std::vector<WorkerPlan>& plans,
              const remote::SshOptions& ssh, const PolicyConfig& policy);
  // Closes every stream (each worker's agent ends with its channel) and joins the threads.
  ~WorkerWatch();
  WorkerWatch(const WorkerWatch&) = delete;
  WorkerWatch& operator=(const WorkerWatch&) = delete;

  // One turn: per worker, what is new since the last turn (nullopt: nothing, and no reason to
  // worry), a line it sent, the answer of an independent check of a suspect, or, when that
  // check failed too, an unreached observation with its silence and failed checks. Blocks for
  // the checks of suspects only (5 s at most).
  std::vector<std::optional<WorkerObservation>> turn();

  // Waits up to `timeout` for news worth a turn at once: a worker whose job changed state (it
  // exited, its supervisor died) or whose stream ended; heartbeats are not news. True when some
  // came (since the last call).
  bool wait_for_news(std::chrono::milliseconds timeout);

  // Stops every worker through its stream (agent supervise-watch's stop line: TERM through
  // its supervisor, `grace`, KILL, the tag scan for orphans, then with `remove` its files) and
  // waits for the answers: the agent's acknowledgement within 15 s, its result within `grace`
  // + 15 s. Returns, per worker, whether it confirmed the stop (and the removal). A worker whose
  // stream is not open, or that did not answer, is not confirmed: stop it another way.
  std::vector<bool> stop(std::chrono::milliseconds grace, const std::string& tag, bool remove);

  // Asks every worker's agent for its job's Python stacks (a dump line: SIGUSR1 to the process
  // that registered faulthandler for it, agent/python/sitecustomize.py) and waits up to
  // `timeout` for the answers. Per worker: the stacks it wrote to its log (or why there are
  // none), nullopt when its stream is not open or it did not answer in time.
  std::vector<std::optional<std::string>> dump_stacks(std::chrono::milliseconds timeout);

  // Starts the next attempt through the streams: `commands[i]` (launch_command's line; empty:
  // not this worker) is sent to worker i's agent when its stream is open and its agent takes
  // start lines, and runs there as a new session would run it. Returns, per worker, whether it
  // was sent; start the others over new sessions meanwhile.
  std::vector<bool> send_start(const std::vector<std::string>& commands,
                               const std::string& input = "");
  // Waits up to `timeout` for the answers to send_start. Per worker sent: its result (as a
  // fan-out's; a stream that ended or did not answer in time is a failure, never retried
  // elsewhere, since the start may have happened); nullopt for the others.
  std::vector<std::optional<remote::HostResult>> collect_started(std::chrono::milliseconds timeout);

  // The next attempt's workers, after a repair or a requeue: a worker whose host and directory
  // are unchanged keeps its stream (and what it heard); one placed elsewhere gets a new stream,
  // the old one told to close. False (nothing changed) when the number of workers differs: make
  // a new watch.
  bool retarget(const Workload& workload, const std::vector<WorkerPlan>& plans);

  // Counters for tests and benchmarks.
  struct Stats {
    uint64_t lines = 0;     // status lines received
    uint64_t checks = 0;    // independent checks made
    uint64_t reopened = 0;  // streams opened again
    uint64_t started = 0;   // workers started through their streams
    uint64_t moved = 0;     // workers retargeted to a new host (a new stream)
    int64_t stalled_ms = 0; // time this process did not run while watching
  };
  Stats stats() const;

private:
  struct Seen; // per worker, shared with the stream threads
  struct Group;
  void open(const std::vector<size_t>& workers);

  Workload m_workload;
  std::vector<WorkerPlan> m_plans;
  remote::SshOptions m_ssh;
  PolicyConfig m_policy;
  util::StallClock m_stall;
  mutable std::mutex m_mutex;
  std::condition_variable m_changed; // a stop's answer came, a stream ended, or news
  bool m_news = false;               // (under m_mutex) see wait_for_news
  std::vector<Seen> m_seen;
  std::vector<std::unique_ptr<Group>> m_groups;
  // The monitor's side, touched only by turn().
  struct Track {
    uint64_t lines = 0;
    int64_t silent_ms = 0;
    int failed_checks = 0;
    std::chrono::steady_clock::time_point reopened{};
  };
  std::vector<Track> m_track;
  std::vector<size_t> m_unopened; // workers retargeted elsewhere, their streams not yet open
  std::chrono::steady_clock::time_point m_last_turn;
  int64_t m_last_stalled = 0;
  Stats m_stats;
};

} // namespace tpuctl::provision
