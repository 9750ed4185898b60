#include "provision/slice/preflight_peers.hpp"

#include <algorithm>
#include <map>

#include "topology/torus.hpp"

namespace tpuctl::provision {

Expected<std::vector<WorkerLinks>> preflight_links(const topology::AcceleratorType& type,
                                                   int slices) {
  if (slices < 1) {
    return usage_error("a slice count of " + std::to_string(slices) + " has no workers");
  }
  // The torus of hosts: the host grid, wrapping where the chip torus wraps (an axis of one host
  // has no neighbours along it).
  topology::Torus hosts{type.host_bounds, type.wrap};
  const int per_slice = hosts.chips();
  const int total = per_slice * slices;
  // caller -> peer -> labels, so a peer reached for two reasons is one call.
  std::vector<std::map<int, std::vector<std::string>>> calls(static_cast<size_t>(total));
  static const char* const k_axis[] = {"x", "y", "z"};
  for (int s = 0; s < slices; ++s) {
    for (int w = 0; w < per_slice; ++w) {
      auto& mine = calls[static_cast<size_t>(s * per_slice + w)];
      if (w != 0) {
        mine[s * per_slice].push_back("coordinator");
      }
      const auto at = hosts.coord_of(w);
      for (int n : hosts.neighbours(w)) {
        const auto there = hosts.coord_of(n);
        std::string axis;
        for (int a = 0; a < 3; ++a) {
          if (at[static_cast<size_t>(a)] != there[static_cast<size_t>(a)]) {
            axis = k_axis[a];
          }
        }
        mine[s * per_slice + n].insert(mine[s * per_slice + n].begin(), "ICI " + axis);
      }
      for (int other = 0; other < slices; ++other) {
        if (other != s) {
          mine[other * per_slice + w].push_back("DCN");
        }
      }
    }
  }
  std::vector<WorkerLinks> out(static_cast<size_t>(total));
  for (int from = 0; from < total; ++from) {
    for (const auto& [peer, labels] : calls[static_cast<size_t>(from)]) {
      std::string label;
      for (const auto& l : labels) {
        label += (label.empty() ? "" : ", ") + l;
      }
      out[static_cast<size_t>(from)].calls.push_back({peer, label});
      out[static_cast<size_t>(peer)].expects.push_back(from);
    }
  }
  for (auto& w : out) {
    std::sort(w.expects.begin(), w.expects.end());
  }
  return out;
}

std::string link_label(const std::vector<WorkerLinks>& links, int from, int to) {
  if (from < 0 || static_cast<size_t>(from) >= links.size()) {
    return "";
  }
  for (const auto& l : links[static_cast<size_t>(from)].calls) {
    if (l.peer == to) {
      return l.label;
    }
  }
  return "";
}

} // namespace tpuctl::provision
