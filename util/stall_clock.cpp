#include "util/stall_clock.hpp"

namespace tpuctl::util {

StallClock::StallClock(std::chrono::milliseconds tick, std::chrono::milliseconds slack)
    : m_tick(tick), m_slack(slack), m_thread([this] { run(); }) {}

StallClock::~StallClock() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_cv.notify_all();
  m_thread.join();
}

void StallClock::run() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(m_mutex);
  auto last = Clock::now();
  while (!m_stop) {
    m_cv.wait_for(lock, m_tick, [this] { return m_stop; });
    const auto now = Clock::now();
    const auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(now - last);
    if (gap > m_slack) {
      m_stalled_ms.fetch_add((gap - m_tick).count(), std::memory_order_relaxed);
    }
    last = now;
  }
}

} // namespace tpuctl::util
