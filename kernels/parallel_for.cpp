// The pool behind run_shared.
//
// A job is published as a ticket (generation << 16 | workers wanted) and opened for joining. A
// worker that sees the ticket joins with a compare-and-swap on the join word (generation << 32 |
// open bit | joined count), runs the body and reports done. The caller runs its own copy of
// the body, then closes the join word (an atomic AND) and waits only for the workers that had
// joined. A late worker's CAS fails on the closed or newer join word, so it never touches a job
// whose caller has returned.
//
// Waiting is spin-then-sleep everywhere: spin on an atomic with the CPU's pause hint for up to
// k_spin_budget, then block (condition variable or futex). Sleeping alone costs a futex wake
// plus, on a virtual machine, waking an idle vCPU: measured here at hundreds of microseconds,
// more than a 257^3 GEMM takes. Spinning alone would steal a shared host's CPU for as long as
// the process lives. GEMM calls often come back to back (layers, benchmark reps), so a worker
// that has just finished spins briefly for the next job.
//
// Placement: Linux often wakes a worker on the CPU of the thread that woke it (wake-affine), and
// for a call of a few milliseconds the load balancer does not move it in time: the worker and
// the caller then share one core and the job runs at one thread's speed while the other core
// idles (seen on the 2-vCPU development VM as 2-thread GEMMs at exactly the 1-thread rate). A
// worker that joins a job on the caller's CPU therefore moves itself off that CPU for the job
// (its affinity minus the caller's CPU, restored afterwards); where that is the only CPU it
// may use, it stays.
#include "kernels/parallel_for.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <vector>

namespace tpuctl::kernels {

namespace {

using Clock = std::chrono::steady_clock;

// How long a waiter spins before it blocks.
constexpr auto k_spin_budget = std::chrono::microseconds(300);

constexpr uint64_t k_open = uint64_t{1} << 31;
constexpr uint64_t k_joined_mask = k_open - 1;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or the budget runs out; returns done().
template <typename Done>
bool spin_until(Done done) {
  auto deadline = Clock::now() + k_spin_budget;
  for (int i = 0;; ++i) {
    if (done()) {
      return true;
    }
    cpu_relax();
    if (i % 64 == 63 && Clock::now() > deadline) {
      return done();
    }
  }
}

class Pool {
public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stop.store(true);
    }
    m_wake.notify_all();
    for (auto& t : m_threads) {
      t.join();
    }
  }

  // Runs the job; the caller holds m_busy.
  void run(int workers, const std::function<void()>& body) {
    while (static_cast<int>(m_threads.size()) < workers) {
      int index = static_cast<int>(m_threads.size()) + 1;
      m_threads.emplace_back([this, index] { worker(index); });
    }
    uint64_t generation = (m_ticket.load(std::memory_order_relaxed) >> 16) + 1;
    m_body = &body;
    m_caller_cpu = sched_getcpu();
    m_finished.store(0, std::memory_order_relaxed);
    m_join.store((generation << 32) | k_open, std::memory_order_relaxed);
    {
      // Publishing under the mutex pairs with a worker's check-then-sleep: no wake is lost.
      std::lock_guard<std::mutex> lock(m_mutex);
      m_ticket.store((generation << 16) | static_cast<uint64_t>(workers),
                     std::memory_order_release);
    }
    m_wake.notify_all();
    body();
    uint64_t joined = m_join.fetch_and(~k_open, std::memory_order_acq_rel) & k_joined_mask;
    auto finished = [&] {
      return static_cast<uint64_t>(m_finished.load(std::memory_order_acquire)) == joined;
    };
    if (!spin_until(finished)) {
      std::unique_lock<std::mutex> lock(m_mutex);
      m_done.wait(lock, finished);
    }
  }

  std::mutex m_busy; // held by the thread running a job

private:
  // Joins generation `generation` if it is still open.
  bool try_join(uint64_t generation) {
    uint64_t word = m_join.load(std::memory_order_acquire);
    while ((word >> 32) == generation && (word & k_open) != 0) {
      if (m_join.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel)) {
        return true;
      }
    }
    return false;
  }

  void worker(int index) {
    uint64_t seen = 0; // the generation last handled
    while (true) {
      auto ready = [&] {
        return m_stop.load(std::memory_order_acquire) ||
               (m_ticket.load(std::memory_order_acquire) >> 16) != seen;
      };
      if (!spin_until(ready)) {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_wake.wait(lock, ready);
      }
      if (m_stop.load(std::memory_order_acquire)) {
        return;
      }
      uint64_t ticket = m_ticket.load(std::memory_order_acquire);
      seen = ticket >> 16;
      if (static_cast<uint64_t>(index) > (ticket & 0xffff) || !try_join(seen)) {
        continue; // not needed, or the caller has already finished
      }
      bool moved = false;
      cpu_set_t allowed;
      if (m_caller_cpu >= 0 && sched_getcpu() == m_caller_cpu &&
          pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) == 0 &&
          CPU_COUNT(&allowed) > 1) {
        cpu_set_t away = allowed;
        CPU_CLR(m_caller_cpu, &away);
        moved =
            CPU_COUNT(&away) > 0 && pthread_setaffinity_np(pthread_self(), sizeof away, &away) == 0;
      }
      (*m_body)();
      if (moved) {
        pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
      }
      m_finished.fetch_add(1, std::memory_order_acq_rel);
      std::lock_guard<std::mutex> lock(m_mutex);
      m_done.notify_one();
    }
  }

  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::condition_variable m_done;
  std::vector<std::thread> m_threads; // touched only by the thread holding m_busy (and ~Pool)
  // Written before the ticket is published; read only by workers that joined, whom the caller
  // waits for before it returns.
  const std::function<void()>* m_body = nullptr;
  int m_caller_cpu = -1; // the caller's CPU when it published the job (same rule as m_body)
  std::atomic<uint64_t> m_ticket{0}; // generation << 16 | workers wanted
  std::atomic<uint64_t> m_join{0};   // generation << 32 | open | joined
  std::atomic<int> m_finished{0};
  std::atomic<bool> m_stop{false};
};

Pool& pool() {
  static Pool instance;
  return instance;
}

} // namespace

void run_shared(int threads, const std::function<void()>& body) {
  if (threads > 1) {
    Pool& p = pool();
    std::unique_lock<std::mutex> busy(p.m_busy, std::try_to_lock);
    if (busy.owns_lock()) {
      p.run(threads - 1, body);
      return;
    }
  }
  body();
}

void parallel_for(int count, int threads, const std::function<void(int)>& body) {
  std::atomic<int> next{0};
  run_shared(std::min(count, threads), [&] {
    for (int i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      body(i);
    }
  });
}

void count_up(std::atomic<int>& counter) {
  counter.fetch_add(1, std::memory_order_acq_rel);
  counter.notify_all();
}

void wait_for(const std::atomic<int>& counter, int target) {
  auto reached = [&] { return counter.load(std::memory_order_acquire) >= target; };
  while (!spin_until(reached)) {
    int seen = counter.load(std::memory_order_acquire);
    if (seen >= target) {
      return;
    }
    counter.wait(seen, std::memory_order_acquire);
  }
}

} // namespace tpuctl::kernels
