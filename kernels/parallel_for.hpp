// A small fork-join pool for the GEMM, built for shared and virtual machines where waking a
// sleeping thread can take longer than the work it is woken for.
//
// run_shared(threads, body) runs body() on the calling thread at once and on up to threads - 1
// pool workers as they become ready. The copies share the work through atomic counters (claim
// the next chunk until none is left), so a worker that wakes late simply finds less to do, and
// one that wakes after the caller has finished finds the job closed and skips it: the caller
// never waits for a thread to start, only for the copies that joined to finish. A worker that
// joins on the caller's CPU runs its copy on another CPU the process may use (see the .cpp).
#pragma once

#include <atomic>
#include <functional>

namespace tpuctl::kernels {

// Runs body() on the caller and on up to threads - 1 pool workers, and returns when every
// copy that started has returned. Never fails; with threads <= 1, or when the pool is busy (a
// nested or concurrent call), the caller runs the only copy. Bodies must not wait for a given
// number of copies to be running, and must not throw (an exception would end the process).
void run_shared(int threads, const std::function<void()>& body);

// body(i) for every i in [0, count), claimed one at a time by up to `threads` copies.
void parallel_for(int count, int threads, const std::function<void(int)>& body);

// Adds one to `counter` and wakes its waiters (the release half of a dependency).
void count_up(std::atomic<int>& counter);

// Returns once counter >= target (the acquire half): spins briefly, then sleeps.
void wait_for(const std::atomic<int>& counter, int target);

} // namespace tpuctl::kernels
