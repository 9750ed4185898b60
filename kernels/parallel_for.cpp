// The pool behind run_team. One job runs at a time: the caller publishes the body and a new
// generation number, wakes the workers it needs, runs body(0) itself and waits until the
// workers report done. Workers sleep on a condition variable between jobs, so an idle pool costs
// nothing; waking one costs a few microseconds, small next to a GEMM worth splitting.
#include "kernels/parallel_for.hpp"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tpuctl::kernels {

namespace {

class Pool {
public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stop = true;
    }
    m_wake.notify_all();
    for (auto& t : m_threads) {
      t.join();
    }
  }

  // Runs the job; the caller holds m_busy.
  void run(int count, const std::function<void(int)>& body) {
    int workers = count - 1;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      while (static_cast<int>(m_threads.size()) < workers) {
        int index = static_cast<int>(m_threads.size()) + 1;
        m_threads.emplace_back([this, index] { worker(index); });
      }
      m_body = &body;
      m_active = workers;
      m_pending = workers;
      ++m_generation;
    }
    m_wake.notify_all();
    body(0);
    std::unique_lock<std::mutex> lock(m_mutex);
    m_done.wait(lock, [this] { return m_pending == 0; });
    m_body = nullptr;
  }

  std::mutex m_busy; // held by the thread running a job

private:
  void worker(int index) {
    unsigned long seen = 0;
    std::unique_lock<std::mutex> lock(m_mutex);
    while (true) {
      m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
      if (m_stop) {
        return;
      }
      seen = m_generation;
      if (index > m_active) {
        continue; // this job needs fewer threads
      }
      const std::function<void(int)>* body = m_body;
      lock.unlock();
      (*body)(index);
      lock.lock();
      if (--m_pending == 0) {
        m_done.notify_one();
      }
    }
  }

  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::condition_variable m_done;
  std::vector<std::thread> m_threads;
  const std::function<void(int)>* m_body = nullptr;
  unsigned long m_generation = 0;
  int m_active = 0;
  int m_pending = 0;
  bool m_stop = false;
};

Pool& pool() {
  static Pool instance;
  return instance;
}

} // namespace

void run_team(int threads, const std::function<void(Team&)>& body) {
  if (threads > 1) {
    Pool& p = pool();
    std::unique_lock<std::mutex> busy(p.m_busy, std::try_to_lock);
    if (busy.owns_lock()) {
      std::barrier<> barrier(threads);
      p.run(threads, [&](int rank) {
        Team team(rank, threads, &barrier);
        body(team);
      });
      return;
    }
  }
  Team solo(0, 1, nullptr);
  body(solo);
}

void parallel_for(int count, int threads, const std::function<void(int)>& body) {
  run_team(std::min(count, threads), [&](Team& team) {
    for (int i = team.rank(); i < count; i += team.size()) {
      body(i);
    }
  });
}

} // namespace tpuctl::kernels
