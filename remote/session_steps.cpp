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
#include "remote/session_steps.hpp"

#include <condition_variable>
#include <mutex>
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

// One host's state across the steps; lives on its thread.
struct HostState {
  SshOptions attempt;
  std::unique_ptr<detail::SshSession> session;
  std::optional<HostResult> dropped; // the connection failure that left it out
};

HostResult run_step_on_host(const Step& step, size_t i, const SshTarget& target,
                            const SshOptions& options, const detail::PushPayload* payload,
                            Window& window, HostState& host, detail::WorkerContext& ctx,
                            detail::EventSink& events) {
  const auto t0 = Clock::now();
  HostResult r;
  r.index = i;
  r.host = target.display_name();
  auto finish = [&]() {
    r.duration_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    events.host_done(r);
    return r;
  };
  if (step.runs_on && !step.runs_on(i)) {
    r.outcome = Outcome::ok; // not in this step: no callback either
    r.exit_code = 0;
    r.duration_ms = 0;
    return r;
  }
  if (host.dropped) {
    r = *host.dropped;
    r.duration_ms = 0;
    events.host_done(r);
    return r;
  }
  if (ctx.cancelled() || !window.acquire(ctx.cancel)) {
    r = detail::not_started(i, r.host);
    return finish();
  }
  if (!host.session || !host.session->alive()) {
    host.session.reset();
    auto [session, failure, attempts] =
        detail::connect_with_retries(ctx, options, target, host.attempt);
    window.connected(attempts, r.host);
    if (failure) {
      r.outcome = failure->outcome;
      r.error = failure->message + " (in step '" + step.name + "')";
      host.dropped = r;
      window.release();
      return finish();
    }
    host.session = std::move(session);
  }
  const std::string command =
      step.push ? std::string() : (step.command_of ? step.command_of(i) : step.commands[i]);
  if (step.push) {
    const bool may_upload = !step.push->may_upload || step.push->may_upload(i);
    detail::push_on(*host.session, step.push->remote_paths[i], *payload, step.timeout, r, t0,
                    may_upload);
  } else if (command.empty()) {
    r.outcome = Outcome::ok;
    r.exit_code = 0;
  } else {
    detail::exec_on(*host.session,
                    detail::ExecRequest{command, step.stdin_data, step.timeout, step.reap},
                    options.keep_output, {}, events, r, t0);
  }
  window.release();
  return finish();
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
    } else if (!s.command_of && s.commands.size() != count) {
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

  std::vector<std::thread> threads;
  threads.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      detail::install_thread_logging();
      detail::ThreadKeys keys;
      detail::WorkerContext ctx{*slots[i], keys, identities, cancel};
      HostState host;
      for (size_t k = 0; k < steps.size(); ++k) {
        if (k > 0) {
          std::unique_lock lock(progress.mutex);
          progress.host_cv.wait(lock, [&] { return progress.verdict[k - 1] >= 0; });
          if (progress.verdict[k - 1] == 0) {
            break;
          }
        }
        results[k][i] = run_step_on_host(steps[k], i, targets[i], options,
                                         payloads[k] ? &*payloads[k] : nullptr, *windows[k], host,
                                         ctx, *sinks[k]);
        {
          std::lock_guard lock(progress.mutex);
          ++progress.finished[k];
        }
        progress.main_cv.notify_one();
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
