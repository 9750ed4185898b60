// How busy a worker's job is, sampled from the outside: the signal tpuctl's straggler detection
// compares across the workers of a job (provision/workload/workload_straggler.hpp).
//
// In a synchronous job every worker's step takes the same time, so step times cannot tell the
// worker the others wait for. What differs is what each process does meanwhile: the straggler
// is working (its threads running or runnable), held (stopped: SIGSTOP, a debugger; in D state,
// waiting on its disk) or starved (runnable while another process has its CPU: a cgroup's
// quota, a busier host), while the others sleep in the collective, waiting for it. So each
// sample looks at every thread of the job (the supervisor's descendants, /proc/PID/task/TID/stat)
// and counts the sample busy when any of them is in state R, D, T or t. A worker's busy share
// over an interval, against its peers', is the signal: a straggler's is well above theirs. On a
// machine that is loaded as a whole every worker's share rises alike, so the comparison holds.
#pragma once

#include <cstdint>

namespace tpuctl::agent {

class JobSampler {
public:
  // One sample of the job below `supervisor_pid`; a job with no thread counts nothing.
  void sample(int supervisor_pid);
  int64_t samples() const { return m_samples; }
  int64_t busy() const { return m_busy; }

private:
  int64_t m_samples = 0;
  int64_t m_busy = 0;
};

// True when a thread state letter (the third field of /proc/PID/task/TID/stat) means the thread
// works or is held from working: R (running or runnable), D (uninterruptible), T/t (stopped).
bool busy_state(char state);

} // namespace tpuctl::agent
