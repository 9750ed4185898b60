// run_steps: a multi-step fan-out on one session per host.
//
// Why: at pod scale the SSH handshake, not the command, is what a round costs (key exchange,
// authentication and sshd's fork and re-exec: about 10 ms of CPU per host on both ends), and a
// provisioning of N workers used to pay it once per step. Here every host has its own thread and
// keeps its session from its first step to the end; each later step is one channel on that
// session, which costs the server a fork and nothing else.
//
// How the hosts stay in step: every host thread reports the end of step k and waits; the calling
// thread, once all have reported, asks `proceed` (which sees every result of step k) and then
// releases them all into step k + 1, or ends the run. A step's concurrency is a window that
// host threads take before they start the step and give back when they finish, so a step with a
// window of 64 runs like run_fanout's sliding window while a step with no window has every host
// in it at once. The calling thread also watches the CancelToken and interrupts hosts that are
// still connecting (WorkerSlot); a host already running a command kills it itself (ssh_exec.cpp).
//
// Held steps: even a channel costs the host a session process and a shell, and the gate between
// two steps leaves the host idle until the slowest peer is done. A held step's command prints a
// mark with its status when its part is done and waits on stdin; the host thread reports the
// step, waits for the gate, and answers with the later step's command, which the same shell
// then runs: for provisioning, the check of the agent and the agent's preflight on one channel.
#include "remote/session_steps.hpp"

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include <spdlog/spdlog.h>

#include "remote/worker_pool.hpp"

namespace tpuctl::remote {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A counting semaphore whose waiters give up when the run is cancelled, and whose size adapts to
// what the hosts answer (additive increase, multiplicative decrease, as TCP's congestion
// window): a connect that needed a retry (no banner or key exchange in time: hosts too busy
// with the handshakes already in flight) halves the window, down to k_min_window; each connect
// that succeeds at once widens it by one, back up to its size.
constexpr size_t k_min_window = 4;

class Window {
public:
  explicit Window(std::string step, size_t slots)
      : m_step(std::move(step)), m_max(slots), m_limit(slots) {}
  bool acquire(const CancelToken* cancel) {
    std::unique_lock lock(m_mutex);
    while (m_in_use >= m_limit) {
      if (cancel != nullptr && cancel->cancelled()) {
        return false;
      }
      m_cv.wait_for(lock, milliseconds(50));
    }
    ++m_in_use;
    return true;
  }
  void release() {
    {
      std::lock_guard lock(m_mutex);
      --m_in_use;
    }
    m_cv.notify_all();
  }
  // After a connect: `attempts` it took, to `host`.
  void connected(int attempts, const std::string& host) {
    std::lock_guard lock(m_mutex);
    if (attempts > 1) {
      const size_t before = m_limit;
      m_limit = std::max(std::min(k_min_window, m_max), m_limit / 2);
      if (m_limit != before) {
        spdlog::info("step '{}': a connect to {} needed {} attempts: connecting {} hosts at a "
                     "time instead of {}",
                     m_step, host, attempts, m_limit, before);
      }
    } else if (m_limit < m_max) {
      ++m_limit;
    }
  }

private:
  std::string m_step;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  size_t m_max;
  size_t m_limit;
  size_t m_in_use = 0;
};

// What the host threads and the calling thread share about the steps' progress.
struct Progress {
  std::mutex mutex;
  std::condition_variable host_cv; // host threads wait here for the verdict on a step
  std::condition_variable main_cv; // the calling thread waits here for the hosts
  std::vector<size_t> finished;    // per step: hosts done with it
  std::vector<int> verdict;        // per step: -1 pending, 0 stop, 1 go on
};

// Everything of a run the host threads share.
struct Run {
  const std::vector<Step>& steps;
  const std::vector<SshTarget>& targets;
  const SshOptions& options;
  const std::vector<std::optional<detail::PushPayload>>& payloads;
  std::vector<std::unique_ptr<Window>>& windows;
  std::vector<std::unique_ptr<detail::EventSink>>& sinks;
  std::vector<std::vector<HostResult>>& results;
  Progress& progress;

  // Host i is done with step k.
  void report(size_t k, size_t i, HostResult r) {
    results[k][i] = std::move(r);
    {
      std::lock_guard lock(progress.mutex);
      ++progress.finished[k];
    }
    progress.main_cv.notify_one();
  }
  // Waits for the verdict on step k: true to go on.
  bool await(size_t k) {
    std::unique_lock lock(progress.mutex);
    progress.host_cv.wait(lock, [&] { return progress.verdict[k] >= 0; });
    return progress.verdict[k] == 1;
  }
  bool takes_part(size_t k, size_t i) const { return !steps[k].runs_on || steps[k].runs_on(i); }
  std::string command(size_t k, size_t i) const {
    return steps[k].command_of ? steps[k].command_of(i) : steps[k].commands[i];
  }
};

// One host's state across the steps; lives on its thread.
struct HostState {
  SshOptions attempt;
  std::unique_ptr<detail::SshSession> session;
  std::optional<HostResult> dropped; // the connection failure that left it out
};

constexpr size_t k_end = static_cast<size_t>(-1); // run_step_on_host: no more steps

HostResult blank_result(size_t i, const SshTarget& target) {
  HostResult r;
  r.index = i;
  r.host = target.display_name();
  return r;
}

// A held step's command (Step::hold_into): its own part in a subshell (an `exit` in it ends only
// that part), the mark with the part's status, then either "go" and the later step's command
// on stdin, run by this same shell, or anything else and the end. POSIX sh, builtins only.
std::string held_command(const std::string& command, const std::string& mark) {
  return "(\n" + command +
         "\n) </dev/null\n"
         "s=$?\n"
         "printf '\\n%s %d\\n' " +
         mark +
         " \"$s\"\n"
         "IFS= read -r g || exit \"$s\"\n"
         "[ \"$g\" = go ] || exit \"$s\"\n"
         "c=\n"
         "while IFS= read -r l; do c=\"$c$l\n\"; done\n"
         "eval \"$c\"\n";
}

std::string random_mark() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "tpuctl-hold-%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

// Step k's command on host i as a held command (Step::hold_into): once its part is done, step
// k is reported and the host waits on the open channel for the verdicts up to the later step;
// if it takes part in none of the steps between and does in the later one, that step's command
// goes down the same channel; else the channel ends and the host goes on as any other.
size_t run_held(Run& run, size_t k, size_t i, HostState& host, detail::WorkerContext& ctx,
                const std::string& command, HostResult& r_k, Clock::time_point t0) {
  const Step& step = run.steps[k];
  const size_t into = step.hold_into;
  const Step& later = run.steps[into];
  HostResult r_into = blank_result(i, run.targets[i]);
  HostResult scratch = blank_result(i, run.targets[i]); // the end of a stopped command
  const FanoutCallbacks none;
  detail::EventSink quiet(none);
  detail::ExecOutput out{run.sinks[k].get(), &r_k, t0};
  enum class Held { not_yet, ran_on, stopped } held = Held::not_yet;
  bool holds_window = true; // step k's slot
  size_t next = k + 1;
  const std::string mark = random_mark();
  detail::ExecRequest request(held_command(command, mark), nullptr, step.timeout,
                              step.reap || later.reap);
  request.hold_mark = mark;
  const detail::HoldAnswer stop{"stop\n", milliseconds(10000)};
  request.on_hold = [&](int status) -> detail::HoldAnswer {
    spdlog::debug("{}: step '{}' done on a held channel (status {})", r_k.host, step.name, status);
    r_k.outcome = status == 0 ? Outcome::ok : Outcome::exit_code;
    r_k.exit_code = status;
    r_k.duration_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    run.windows[k]->release();
    holds_window = false;
    run.sinks[k]->host_done(r_k);
    run.report(k, i, r_k);
    held = Held::stopped;
    out = detail::ExecOutput{&quiet, &scratch, Clock::now()};
    for (size_t j = k + 1;; ++j) {
      if (!run.await(j - 1)) {
        next = k_end;
        return stop;
      }
      if (j < into) {
        if (run.takes_part(j, i)) {
          next = j;
          return stop;
        }
        HostResult skip = blank_result(i, run.targets[i]);
        skip.outcome = Outcome::ok;
        skip.exit_code = 0;
        skip.duration_ms = 0;
        run.report(j, i, std::move(skip));
        continue;
      }
      const std::string c = run.takes_part(into, i) ? run.command(into, i) : std::string();
      if (c.empty() || !run.windows[into]->acquire(ctx.cancel)) {
        next = into;
        return stop;
      }
      held = Held::ran_on;
      out = detail::ExecOutput{run.sinks[into].get(), &r_into, Clock::now()};
      return detail::HoldAnswer{"go\n" + c + "\n", later.timeout};
    }
  };
  detail::exec_on(*host.session, request, run.options.keep_output, {}, out);
  auto finish = [&](size_t step_index, HostResult& result) {
    result.duration_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - out.t0).count();
    run.sinks[step_index]->host_done(result);
    run.report(step_index, i, std::move(result));
  };
  switch (held) {
  case Held::not_yet: // it ended before its part was done (killed, lost): step k's end
    if (holds_window) {
      run.windows[k]->release();
    }
    finish(k, r_k);
    return k + 1;
  case Held::ran_on:
    run.windows[into]->release();
    finish(into, r_into);
    return into + 1;
  case Held::stopped:
    break;
  }
  return next;
}

// Step k on host i, once the verdict on step k - 1 was to go on. Reports step k (and, for a held
// step, the steps it ran on into) and returns the next step this host must wait for and run, or
// k_end when the run stopped while it was held.
size_t run_step_on_host(Run& run, size_t k, size_t i, HostState& host, detail::WorkerContext& ctx) {
  const Step& step = run.steps[k];
  const SshTarget& target = run.targets[i];
  detail::EventSink& events = *run.sinks[k];
  Window& window = *run.windows[k];
  auto t0 = Clock::now();
  HostResult r = blank_result(i, target);
  auto finish = [&](size_t step_index, HostResult& result, detail::EventSink& sink,
                    Clock::time_point since) {
    result.duration_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - since).count();
    sink.host_done(result);
    run.report(step_index, i, std::move(result));
  };
  if (!run.takes_part(k, i)) {
    if (step.connect_all && !host.session && !host.dropped && !ctx.cancelled() &&
        window.acquire(ctx.cancel)) {
      // Connect now, for a later step; a failure is that step's to report.
      auto [session, failure, attempts] =
          detail::connect_with_retries(ctx, run.options, target, host.attempt);
      window.connected(attempts, r.host);
      window.release();
      if (!failure) {
        host.session = std::move(session);
      }
    }
    r.outcome = Outcome::ok; // not in this step: no callback either
    r.exit_code = 0;
    r.duration_ms = 0;
    run.report(k, i, std::move(r));
    return k + 1;
  }
  if (host.dropped) {
    r = *host.dropped;
    r.duration_ms = 0;
    events.host_done(r);
    run.report(k, i, std::move(r));
    return k + 1;
  }
  if (ctx.cancelled() || !window.acquire(ctx.cancel)) {
    r = detail::not_started(i, r.host);
    finish(k, r, events, t0);
    return k + 1;
  }
  if (!host.session || !host.session->alive()) {
    host.session.reset();
    auto [session, failure, attempts] =
        detail::connect_with_retries(ctx, run.options, target, host.attempt);
    window.connected(attempts, r.host);
    if (failure) {
      r.outcome = failure->outcome;
      r.error = failure->message + " (in step '" + step.name + "')";
      host.dropped = r;
      window.release();
      finish(k, r, events, t0);
      return k + 1;
    }
    host.session = std::move(session);
  }
  const std::string command = step.push ? std::string() : run.command(k, i);
  if (step.push) {
    const bool may_upload = !step.push->may_upload || step.push->may_upload(i);
    detail::push_on(*host.session, step.push->remote_paths[i], *run.payloads[k], step.timeout, r,
                    t0, may_upload);
  } else if (command.empty()) {
    r.outcome = Outcome::ok;
    r.exit_code = 0;
  } else if (step.hold_into > k) {
    return run_held(run, k, i, host, ctx, command, r, t0);
  } else {
    detail::exec_on(*host.session,
                    detail::ExecRequest(command, step.stdin_data, step.timeout, step.reap),
                    run.options.keep_output, {}, events, r, t0);
  }
  window.release();
  finish(k, r, events, t0);
  return k + 1;
}

} // namespace

Expected<std::vector<std::vector<HostResult>>>
run_steps(const std::vector<SshTarget>& targets, const SshOptions& options,
          const std::vector<Step>& steps, const StepGate& proceed, const CancelToken* cancel) {
  const size_t count = targets.size();
  std::vector<const SshTarget*> target_ptrs;
  std::vector<std::string> names;
  for (const auto& t : targets) {
    target_ptrs.push_back(&t);
    names.push_back(t.display_name());
  }
  ErrorList problems;
  std::vector<std::optional<detail::PushPayload>> payloads(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& s = steps[k];
    if (s.push) {
      if (s.push->remote_paths.size() != count) {
        problems.add(ErrorKind::usage, "step '" + s.name + "' names " +
                                           std::to_string(s.push->remote_paths.size()) +
                                           " remote paths for " + std::to_string(count) + " hosts");
        continue;
      }
      auto loaded = detail::load_push_payload(s.push->options, s.push->remote_paths, names);
      if (!loaded) {
        return loaded.error();
      }
      payloads[k] = std::move(*loaded);
    }
    if (s.hold_into != 0 &&
        (s.hold_into <= k || s.hold_into >= steps.size() || s.push || steps[s.hold_into].push ||
         steps[s.hold_into].stdin_data || s.stdin_data)) {
      problems.add(ErrorKind::usage, "step '" + s.name + "' cannot be held into step " +
                                         std::to_string(s.hold_into) +
                                         ": only a later command step, both without stdin data");
    }
    if (!s.push && !s.command_of && s.commands.size() != count) {
      problems.add(ErrorKind::usage, "step '" + s.name + "' has " +
                                         std::to_string(s.commands.size()) + " commands for " +
                                         std::to_string(count) + " hosts");
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  SshOptions checked = options;
  checked.batch_size = std::max<size_t>(1, options.batch_size); // windows are per step here
  TPUCTL_TRY_ASSIGN(auto identities, detail::prepare_run(target_ptrs, checked));

  std::vector<std::vector<HostResult>> results(steps.size(), std::vector<HostResult>(count));
  std::vector<std::unique_ptr<Window>> windows;
  std::vector<std::unique_ptr<detail::EventSink>> sinks;
  for (const auto& s : steps) {
    size_t slots = s.concurrency == 0 ? count : std::min(s.concurrency, count);
    windows.push_back(std::make_unique<Window>(s.name, slots));
    sinks.push_back(std::make_unique<detail::EventSink>(s.callbacks));
  }
  std::vector<std::unique_ptr<detail::WorkerSlot>> slots;
  for (size_t i = 0; i < count; ++i) {
    slots.push_back(std::make_unique<detail::WorkerSlot>());
  }
  Progress progress;
  progress.finished.assign(steps.size(), 0);
  progress.verdict.assign(steps.size(), -1);
  Run run{steps, targets, options, payloads, windows, sinks, results, progress};

  std::vector<std::thread> threads;
  threads.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      detail::install_thread_logging();
      detail::ThreadKeys keys;
      detail::WorkerContext ctx{*slots[i], keys, identities, cancel};
      HostState host;
      size_t k = 0;
      while (k < steps.size()) {
        if (k > 0 && !run.await(k - 1)) {
          break;
        }
        k = run_step_on_host(run, k, i, host, ctx);
      }
      host.session.reset(); // disconnect on this thread, which owns the session
    });
  }

  size_t ran = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    {
      std::unique_lock lock(progress.mutex);
      while (progress.finished[k] < count) {
        progress.main_cv.wait_for(lock, milliseconds(50));
        if (cancel != nullptr && cancel->cancelled()) {
          for (auto& slot : slots) {
            slot->interrupt();
          }
        }
      }
    }
    ran = k + 1;
    // `proceed` runs without the lock: the host threads are all waiting for its verdict.
    const bool go = proceed(k, results[k]) && k + 1 < steps.size();
    {
      std::lock_guard lock(progress.mutex);
      progress.verdict[k] = go ? 1 : 0;
    }
    progress.host_cv.notify_all();
    if (!go) {
      break;
    }
  }
  for (auto& t : threads) {
    t.join();
  }
  results.resize(ran);
  return results;
}

} // namespace tpuctl::remote
