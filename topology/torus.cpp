// Torus geometry.
//
// A TPU slice is a grid of chips, X x Y (x Z), each chip wired by ICI to its nearest neighbour
// along every axis. When an axis "wraps", the last chip of each line along it is also wired to
// the first, so the line becomes a ring: on 3D generations that happens on every axis of a
// slice made of whole 4x4x4 cubes (the optical switches close the rings), on 2D generations
// only along an axis that spans the whole pod. Everything here follows from treating the
// slice as a product of independent lines and rings:
//
//  * Distance is the L1 sum of per-axis distances: |a-b| on a line, min(|a-b|, k-|a-b|) on a
//    ring of k chips. The diameter is therefore the sum of the per-axis maxima (k-1 on a line,
//    floor(k/2) on a ring) and the mean over all ordered pairs is the sum of the per-axis means:
//    on a line E|a-b| over uniform a, b in 0..k-1 is (k^2-1)/(3k); on a ring the distance from
//    any chip takes each value 1..k/2-1 twice and k/2 once (k even), giving k/4, or each value
//    1..(k-1)/2 twice (k odd), giving (k^2-1)/(4k). A ring of 2 is a line of 2: both give 1/2.
//
//  * Neighbours: +-1 along each axis, across the wrap link when the axis wraps. On a ring of 2
//    "+1" and "-1" are the same chip, so it is listed once; a size-1 axis has no neighbours.
//
//  * Bisection: cut the slice into two halves with a plane across one axis. Every line along
//    that axis crosses the plane once (N/k lines), every ring twice. A ring of 2 has one
//    physical link between its chips, so it counts as a line. We take the most balanced cut
//    (an even axis splits exactly) and, among equally balanced ones, the fewest links: for
//    slices whose axes are all equally wrapped that is the longest axis, as in the usual
//    "2N/L" formula. Bandwidth is links x one-way link bandwidth.
//
//  * Hosts: a worker (TPU VM) owns a block of chips_per_host_bounds chips; workers form the
//    host_bounds grid. Worker ids run x fastest over that grid. This order is a tpuctl
//    convention: real TPU VMs learn their coordinates from the hardware, and no public source
//    fixes the order, so every tpuctl component (placement, worker environment) uses this one.
#include "topology/torus.hpp"

#include <algorithm>
#include <cassert>

namespace tpuctl::topology {

bool Torus::contains(const Coord& c) const {
  for (size_t a = 0; a < 3; ++a) {
    if (c[a] < 0 || c[a] >= dims[a]) {
      return false;
    }
  }
  return true;
}

int Torus::index_of(const Coord& c) const {
  assert(contains(c));
  return c[0] + dims[0] * (c[1] + dims[1] * c[2]);
}

Coord Torus::coord_of(int index) const {
  assert(index >= 0 && index < chips());
  return {index % dims[0], (index / dims[0]) % dims[1], index / (dims[0] * dims[1])};
}

std::vector<int> Torus::neighbours(int index) const {
  Coord c = coord_of(index);
  std::vector<int> out;
  for (size_t a = 0; a < 3; ++a) {
    int k = dims[a];
    if (k == 1) {
      continue;
    }
    for (int step : {-1, 1}) {
      Coord n = c;
      n[a] += step;
      if (n[a] < 0 || n[a] >= k) {
        if (!wrap[a]) {
          continue;
        }
        n[a] = (n[a] + k) % k;
      }
      int ni = index_of(n);
      bool seen = false;
      for (int o : out) {
        seen = seen || o == ni;
      }
      if (!seen) {
        out.push_back(ni);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

int Torus::hops(const Coord& a, const Coord& b) const {
  int total = 0;
  for (size_t i = 0; i < 3; ++i) {
    int d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
    if (wrap[i] && dims[i] - d < d) {
      d = dims[i] - d;
    }
    total += d;
  }
  return total;
}

int Torus::diameter() const {
  int total = 0;
  for (size_t a = 0; a < 3; ++a) {
    total += wrap[a] ? dims[a] / 2 : dims[a] - 1;
  }
  return total;
}

double Torus::mean_hops() const {
  double total = 0;
  for (size_t a = 0; a < 3; ++a) {
    double k = dims[a];
    if (!wrap[a]) {
      total += (k * k - 1) / (3 * k);
    } else if (dims[a] % 2 == 0) {
      total += k / 4;
    } else {
      total += (k * k - 1) / (4 * k);
    }
  }
  return total;
}

int64_t Torus::bisection_links() const {
  int64_t n = chips();
  int64_t best_imbalance = -1;
  int64_t best_links = 0;
  for (size_t a = 0; a < 3; ++a) {
    int64_t k = dims[a];
    if (k < 2) {
      continue;
    }
    int64_t lines = n / k;
    int64_t imbalance = (k % 2) * lines;
    int64_t links = (wrap[a] && k > 2 ? 2 : 1) * lines;
    if (best_imbalance < 0 || imbalance < best_imbalance ||
        (imbalance == best_imbalance && links < best_links)) {
      best_imbalance = imbalance;
      best_links = links;
    }
  }
  return best_links;
}

Torus torus_of(const AcceleratorType& slice) {
  return Torus{slice.dims, slice.wrap};
}

double bisection_gbytes_per_s(const AcceleratorType& slice) {
  return static_cast<double>(torus_of(slice).bisection_links()) *
         slice.generation->ici_link_gbytes_per_s;
}

Expected<Coord> worker_coords(const AcceleratorType& slice, int worker) {
  if (worker < 0 || worker >= slice.hosts) {
    return usage_error("worker " + std::to_string(worker) + " does not exist: " + slice.name +
                       " (" + slice.topology() + ") has workers 0 to " +
                       std::to_string(slice.hosts - 1));
  }
  const Dims& h = slice.host_bounds;
  return Coord{worker % h[0], (worker / h[0]) % h[1], worker / (h[0] * h[1])};
}

Expected<std::vector<int>> worker_chips(const AcceleratorType& slice, int worker) {
  TPUCTL_TRY_ASSIGN(Coord host, worker_coords(slice, worker));
  const Dims& b = slice.chips_per_host_bounds;
  Torus t = torus_of(slice);
  std::vector<int> chips;
  for (int z = 0; z < b[2]; ++z) {
    for (int y = 0; y < b[1]; ++y) {
      for (int x = 0; x < b[0]; ++x) {
        chips.push_back(t.index_of({host[0] * b[0] + x, host[1] * b[1] + y, host[2] * b[2] + z}));
      }
    }
  }
  return chips;
}

Expected<int> worker_of_chip(const AcceleratorType& slice, int chip) {
  if (chip < 0 || chip >= slice.chips) {
    return usage_error("chip " + std::to_string(chip) + " does not exist: " + slice.name +
                       " has chips 0 to " + std::to_string(slice.chips - 1));
  }
  Coord c = torus_of(slice).coord_of(chip);
  const Dims& b = slice.chips_per_host_bounds;
  const Dims& h = slice.host_bounds;
  return c[0] / b[0] + h[0] * (c[1] / b[1] + h[1] * (c[2] / b[2]));
}

} // namespace tpuctl::topology
