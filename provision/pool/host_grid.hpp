// The occupancy of a pool's host grid: which positions hold a host, and whether that host is
// free, claimed by a queued resource, or drained. `pool describe` draws it and lists the largest
// free blocks; placement searches it.
#pragma once

#include <string>
#include <vector>

#include "provision/pool/pool_layout.hpp"

namespace tpuctl::provision {

// spare: a free host the pool holds back for repairs (pools.hpp set_spares): never placed for
// an ordinary request; a repair (node_repair.hpp) places on it as on a free one.
enum class CellState { empty, free, claimed, drained, spare };

struct GridCell {
  CellState state = CellState::empty;
  std::string host;  // host name, empty for an empty position
  std::string owner; // claimant (queued resource id) or drain reason
};

class HostGrid {
public:
  HostGrid() : HostGrid(PoolLayout{}) {}
  explicit HostGrid(const PoolLayout& layout);

  const PoolLayout& layout() const { return m_layout; }
  GridCell& at(const Dims& pos) {
    return m_cells[static_cast<size_t>(position_index(m_layout, pos))];
  }
  const GridCell& at(const Dims& pos) const {
    return m_cells[static_cast<size_t>(position_index(m_layout, pos))];
  }
  const std::vector<GridCell>& cells() const { return m_cells; }

  // Every spare host counts as free (a repair's view: it may place on them); call refresh().
  void free_spares() {
    for (auto& cell : m_cells) {
      if (cell.state == CellState::spare) {
        cell.state = CellState::free;
      }
    }
  }

  // True when every position of the block [origin, origin+size) is a free host.
  bool block_free(const Dims& origin, const Dims& size) const;
  int count(CellState state) const;

private:
  PoolLayout m_layout;
  std::vector<GridCell> m_cells; // x fastest
  std::vector<int> m_prefix;     // 3D prefix sums of free cells, (gx+1)*(gy+1)*(gz+1)

public:
  // Call after changing cells, before block_free().
  void refresh();
};

struct Block {
  Dims origin{0, 0, 0};
  Dims size{0, 0, 0};
  int volume() const { return size[0] * size[1] * size[2]; }
};

// The largest all-free blocks (axis-aligned boxes of free hosts), biggest first, at most
// `limit`, none contained in another one listed. Ties: the more compact box, then the lower
// position.
std::vector<Block> largest_free_blocks(const HostGrid& grid, size_t limit);

// "2x4" (rank 2) or "2x2x4" (rank 3) hosts.
std::string format_block_size(const Block& block, int rank);

} // namespace tpuctl::provision
