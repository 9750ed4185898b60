// A minimal fork-join pool for the GEMM. run_team(threads, body) runs body(team) on a team of
// threads at once, member 0 on the calling thread and the others on pool threads that are
// started on first use and kept (sleeping on a condition variable) until the process exits.
// Team::sync() is a barrier across the team, for phases such as "pack a shared block of B, then
// everyone computes with it".
#pragma once

#include <barrier>
#include <functional>

namespace tpuctl::kernels {

class Team {
public:
  Team(int rank, int size, std::barrier<>* barrier)
      : m_rank(rank), m_size(size), m_barrier(barrier) {}
  int rank() const { return m_rank; }
  int size() const { return m_size; }
  // Waits until every member of the team has called sync() (the same number of times).
  void sync() {
    if (m_barrier) {
      m_barrier->arrive_and_wait();
    }
  }

private:
  int m_rank;
  int m_size;
  std::barrier<>* m_barrier;
};

// Runs body on a team of `threads` members and returns when all are done. Never fails: when the
// pool is already busy (a nested or concurrent call) or threads <= 1, the team has one member,
// the caller, so bodies must split their work by team.size(), not by `threads`. Exceptions
// thrown by a body are not supported (GEMM bodies do not throw); one would end the process.
void run_team(int threads, const std::function<void(Team&)>& body);

// body(i) for every i in [0, count), spread over a team of up to `threads` members.
void parallel_for(int count, int threads, const std::function<void(int)>& body);

} // namespace tpuctl::kernels
