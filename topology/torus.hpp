// Torus geometry of a slice: chip coordinates, neighbours across wraparound links, the host
// (worker) grid, and the network figures of merit (diameter, mean hops, bisection).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "topology/accelerator_type.hpp"
#include "util/expected.hpp"

namespace tpuctl::topology {

// A position in a chip or host grid: x, y, z.
using Coord = std::array<int, 3>;

// A chip grid with per-axis wraparound. Chips are numbered with x fastest:
// index = x + X * (y + Y * z). That index is also tpuctl's JAX device id within a slice.
struct Torus {
  Dims dims{1, 1, 1};
  Wrap wrap{false, false, false};

  int chips() const { return dims[0] * dims[1] * dims[2]; }
  bool contains(const Coord& c) const;
  // Precondition: contains(c).
  int index_of(const Coord& c) const;
  // Precondition: 0 <= index < chips().
  Coord coord_of(int index) const;
  // The chips one ICI link away from `index` (precondition: a valid index), ascending. A
  // wrapped axis of size 2 yields its neighbour once; a size-1 axis yields none.
  std::vector<int> neighbours(int index) const;
  // Shortest hop count between two chips (ring distance on wrapped axes, line distance else).
  int hops(const Coord& a, const Coord& b) const;
  // The largest hop count between two chips: sum over axes of floor(k/2) (wrapped) or k-1.
  int diameter() const;
  // The mean hop count over all ordered pairs of chips, self-pairs included: sum over axes of
  // k/4 or (k^2-1)/(4k) (wrapped, even or odd k) or (k^2-1)/(3k) (not wrapped).
  double mean_hops() const;
  // Links cut by the most balanced axis-aligned halving with the fewest links: across an axis
  // of size k, N/k links (2N/k when the axis wraps and k > 2). For a real slice (every size 1,
  // 2 or even) that is the longest axis. 0 for a single chip.
  int64_t bisection_links() const;
};

// The chip torus of `slice`.
Torus torus_of(const AcceleratorType& slice);

// Bisection bandwidth of `slice` in GB/s, one direction: bisection links x one-way link
// bandwidth (double it for both directions).
double bisection_gbytes_per_s(const AcceleratorType& slice);

// Where worker `worker` sits in the host grid. tpuctl's convention (real TPUs learn it from the
// hardware): x fastest, worker w at (w mod hx, (w / hx) mod hy, w / (hx * hy)).
// Fails with usage naming the worker when it is not in 0 .. hosts-1.
Expected<Coord> worker_coords(const AcceleratorType& slice, int worker);

// The chips (indices, ascending) that worker `worker` holds: its block of
// chips_per_host_bounds chips at worker_coords * chips_per_host_bounds. Fails with usage when
// the worker does not exist.
Expected<std::vector<int>> worker_chips(const AcceleratorType& slice, int worker);

// The worker holding chip `chip`. Fails with usage when the chip does not exist.
Expected<int> worker_of_chip(const AcceleratorType& slice, int chip);

} // namespace tpuctl::topology
