// A pool's geometry: hosts of one generation laid out in (a part of) that generation's pod grid.
// Each host owns a block of chips (`chips_per_host_bounds`, e.g. 2x2x1); the pool's extent in
// chips (`shape`) divided by that block is the host grid, and every host has a position in it.
// Positions are numbered x fastest, the same convention as worker ids inside a slice.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/generation.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

using topology::Dims;

struct PoolLayout {
  const topology::Generation* generation = nullptr;
  int chips_per_host = 4;
  Dims chips_per_host_bounds{2, 2, 1};
  Dims shape{1, 1, 1};     // chips along x, y, z
  Dims host_grid{1, 1, 1}; // hosts along x, y, z = shape / chips_per_host_bounds

  int capacity() const { return host_grid[0] * host_grid[1] * host_grid[2]; }
  int rank() const { return generation->rank; }
};

// The chip block one host owns for `chips_per_host` on `gen`: 1 -> 1x1x1, 4 -> 2x2x1,
// 8 -> 2x4x1 (v5e/v6e only). Fails (usage) for counts the generation has no hosts for.
Expected<Dims> host_chip_bounds(const topology::Generation& gen, int chips_per_host);

// Builds a layout. `chips_per_host` defaults to 4; `shape` (a topology string such as "8x4" or
// "4x4x4") defaults to the generation's pod. Every problem is reported: unknown generation, a
// shape of the wrong rank, a shape larger than the pod, a shape not divisible by the host block.
Expected<PoolLayout> make_pool_layout(const std::string& generation,
                                      std::optional<int> chips_per_host, const std::string& shape);

// The smallest compact layout that holds `hosts` hosts and, where it can, the generation's
// bigger slices: v5e/v6e 8 hosts -> 8x4 chips (two 4x4 slices), 16 -> 8x8; v4/v5p/tpu7x
// 16 hosts -> one 4x4x4 cube; other counts -> the most square block of whole hosts.
Expected<PoolLayout> compact_layout(const std::string& generation,
                                    std::optional<int> chips_per_host, int hosts);

// Position <-> index in the host grid, x fastest.
int position_index(const PoolLayout& layout, const Dims& pos);
Dims position_of(const PoolLayout& layout, int index);
bool in_grid(const PoolLayout& layout, const Dims& pos);

// Parses "--coords x,y[,z]" into a position inside the layout's host grid (z defaults to 0).
Expected<Dims> parse_position(const PoolLayout& layout, const std::string& text);

// "x,y,z".
std::string format_position(const Dims& pos);

} // namespace tpuctl::provision
