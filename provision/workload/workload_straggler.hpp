// Stragglers: the worker a synchronous job waits for. Pure logic over what each worker's agent
// samples (agent/job_sampler.hpp: how often any thread of its job works or is held, twice a
// second); the monitor (workload_ops.cpp) asks this every tenth of an interval about the last
// whole interval (a sliding window), and records the answer.
//
// In a synchronous job every worker's step time is the same, so the signal is what each does
// while the step lasts: the others sleep in the collective, the straggler works or is held. Over
// one interval (--straggler-interval, 60 s by default) each worker's busy share is its busy
// samples over its samples. A worker is a straggler when its share is at least 0.3 above the
// median of its peers' and its score, the peers' median over its own share, is below 0.7
// (NVIDIA's resiliency extension flags a rank at 0.7 of the best; here the reference is the
// peers' median, since a job's healthy workers are alike). A machine loaded as a whole raises
// every share alike: nothing is flagged. Intervals with fewer than 10 samples for a worker
// decide nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpuctl::provision {

inline constexpr int64_t k_default_straggler_interval_ms = 60'000;
inline constexpr double k_straggler_score = 0.7;
inline constexpr double k_straggler_margin = 0.3;
inline constexpr int64_t k_straggler_min_samples = 10;

struct BusySample {
  int64_t samples = 0; // over the interval
  int64_t busy = 0;
};

struct StragglerFinding {
  size_t worker = 0;
  double share = 0;       // its busy share over the interval
  double peers = 0;       // the median of the others'
  double score = 0;       // peers / share
  std::string evidence;   // "busy 92% of the last 1m (its peers 31%): score 0.34 < 0.70"
};

// The stragglers among the workers' samples over one interval of `interval_ms`.
std::vector<StragglerFinding> find_stragglers(const std::vector<BusySample>& interval,
                                              int64_t interval_ms);

} // namespace tpuctl::provision
