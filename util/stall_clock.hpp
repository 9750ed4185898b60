// How long this process did not get to run: stopped (SIGSTOP, a debugger), starved of CPU, or
// its machine suspended. A watcher that counts silence against others must not count its own
// absence: a worker that was not heard from because the watcher itself was not running is not
// a lost worker.
//
// A ticker thread wakes every `tick`; a gap between two wake-ups longer than `slack` counts,
// less one tick, as stalled time. Threads of one process stop together, so a stop anywhere in
// the process is seen. Resolution: one tick; short stalls under `slack` are not counted.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace tpuctl::util {

class StallClock {
public:
  explicit StallClock(std::chrono::milliseconds tick = std::chrono::milliseconds(200),
                      std::chrono::milliseconds slack = std::chrono::milliseconds(1000));
  ~StallClock();
  StallClock(const StallClock&) = delete;
  StallClock& operator=(const StallClock&) = delete;

  // Stalled time so far, in milliseconds (monotonic: only grows).
  int64_t stalled_ms() const { return m_stalled_ms.load(std::memory_order_relaxed); }

private:
  void run();

  std::chrono::milliseconds m_tick;
  std::chrono::milliseconds m_slack;
  std::atomic<int64_t> m_stalled_ms{0};
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_stop = false;
  std::thread m_thread;
};

} // namespace tpuctl::util
