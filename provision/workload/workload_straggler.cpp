#include "provision/workload/workload_straggler.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "util/strings.hpp"

namespace tpuctl::provision {

std::vector<StragglerFinding> find_stragglers(const std::vector<BusySample>& interval,
                                              int64_t interval_ms) {
  std::vector<double> share(interval.size(), -1.0);
  for (size_t i = 0; i < interval.size(); ++i) {
    if (interval[i].samples >= k_straggler_min_samples) {
      share[i] = static_cast<double>(interval[i].busy) / static_cast<double>(interval[i].samples);
    }
  }
  std::vector<StragglerFinding> out;
  for (size_t i = 0; i < share.size(); ++i) {
    if (share[i] < 0) {
      continue;
    }
    std::vector<double> peers;
    for (size_t j = 0; j < share.size(); ++j) {
      if (j != i && share[j] >= 0) {
        peers.push_back(share[j]);
      }
    }
    if (peers.size() < 2) {
      continue; // a pair cannot say which of two is the odd one
    }
    std::sort(peers.begin(), peers.end());
    const size_t n = peers.size();
    const double median = n % 2 ? peers[n / 2] : (peers[n / 2 - 1] + peers[n / 2]) / 2;
    const double score = share[i] > 0 ? median / share[i] : 1.0;
    if (share[i] >= median + k_straggler_margin && score < k_straggler_score) {
      char text[200];
      std::snprintf(text, sizeof text, "busy %.0f%% of the last %s (its peers %.0f%%): score %.2f < %.2f",
                    share[i] * 100, util::format_duration(std::chrono::milliseconds(interval_ms)).c_str(),
                    median * 100, score, k_straggler_score);
      out.push_back({i, share[i], median, score, text});
    }
  }
  return out;
}

} // namespace tpuctl::provision
