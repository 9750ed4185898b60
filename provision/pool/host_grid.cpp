#include "provision/pool/host_grid.hpp"

#include <algorithm>

#include "topology/generation.hpp"

namespace tpuctl::provision {

HostGrid::HostGrid(const PoolLayout& layout)
    : m_layout(layout), m_cells(static_cast<size_t>(layout.capacity())) {
  refresh();
}

void HostGrid::refresh() {
  const Dims& g = m_layout.host_grid;
  size_t sx = static_cast<size_t>(g[0] + 1), sy = static_cast<size_t>(g[1] + 1),
         sz = static_cast<size_t>(g[2] + 1);
  m_prefix.assign(sx * sy * sz, 0);
  auto p = [&](int x, int y, int z) -> int& {
    return m_prefix[static_cast<size_t>(x) +
                    sx * (static_cast<size_t>(y) + sy * static_cast<size_t>(z))];
  };
  for (int z = 1; z <= g[2]; ++z) {
    for (int y = 1; y <= g[1]; ++y) {
      for (int x = 1; x <= g[0]; ++x) {
        int v = at(Dims{x - 1, y - 1, z - 1}).state == CellState::free ? 1 : 0;
        p(x, y, z) = v + p(x - 1, y, z) + p(x, y - 1, z) + p(x, y, z - 1) - p(x - 1, y - 1, z) -
                     p(x - 1, y, z - 1) - p(x, y - 1, z - 1) + p(x - 1, y - 1, z - 1);
      }
    }
  }
}

bool HostGrid::block_free(const Dims& o, const Dims& s) const {
  const Dims& g = m_layout.host_grid;
  for (int a = 0; a < 3; ++a) {
    if (o[a] < 0 || s[a] < 1 || o[a] + s[a] > g[a]) {
      return false;
    }
  }
  size_t sx = static_cast<size_t>(g[0] + 1), sy = static_cast<size_t>(g[1] + 1);
  auto p = [&](int x, int y, int z) {
    return m_prefix[static_cast<size_t>(x) +
                    sx * (static_cast<size_t>(y) + sy * static_cast<size_t>(z))];
  };
  int x0 = o[0], y0 = o[1], z0 = o[2], x1 = o[0] + s[0], y1 = o[1] + s[1], z1 = o[2] + s[2];
  int sum = p(x1, y1, z1) - p(x0, y1, z1) - p(x1, y0, z1) - p(x1, y1, z0) + p(x0, y0, z1) +
            p(x0, y1, z0) + p(x1, y0, z0) - p(x0, y0, z0);
  return sum == s[0] * s[1] * s[2];
}

int HostGrid::count(CellState state) const {
  return static_cast<int>(std::count_if(m_cells.begin(), m_cells.end(),
                                        [&](const GridCell& c) { return c.state == state; }));
}

namespace {

bool contains(const Block& outer, const Block& inner) {
  for (int a = 0; a < 3; ++a) {
    if (inner.origin[a] < outer.origin[a] ||
        inner.origin[a] + inner.size[a] > outer.origin[a] + outer.size[a]) {
      return false;
    }
  }
  return true;
}

int surface(const Block& b) {
  return b.size[0] * b.size[1] + b.size[1] * b.size[2] + b.size[0] * b.size[2];
}

} // namespace

std::vector<Block> largest_free_blocks(const HostGrid& grid, size_t limit) {
  const Dims& g = grid.layout().host_grid;
  // Every maximal free box: for each origin and each (sx, sy), the deepest sz that stays free.
  std::vector<Block> all;
  for (int z = 0; z < g[2]; ++z) {
    for (int y = 0; y < g[1]; ++y) {
      for (int x = 0; x < g[0]; ++x) {
        if (grid.at(Dims{x, y, z}).state != CellState::free) {
          continue;
        }
        for (int sy = 1; y + sy <= g[1]; ++sy) {
          if (!grid.block_free(Dims{x, y, z}, Dims{1, sy, 1})) {
            break;
          }
          for (int sx = 1; x + sx <= g[0]; ++sx) {
            if (!grid.block_free(Dims{x, y, z}, Dims{sx, sy, 1})) {
              break;
            }
            int sz = 1;
            while (z + sz < g[2] && grid.block_free(Dims{x, y, z}, Dims{sx, sy, sz + 1})) {
              ++sz;
            }
            all.push_back(Block{Dims{x, y, z}, Dims{sx, sy, sz}});
          }
        }
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const Block& a, const Block& b) {
    if (a.volume() != b.volume()) {
      return a.volume() > b.volume();
    }
    if (surface(a) != surface(b)) {
      return surface(a) < surface(b);
    }
    return std::lexicographical_compare(a.origin.rbegin(), a.origin.rend(), b.origin.rbegin(),
                                        b.origin.rend());
  });
  std::vector<Block> out;
  for (const auto& b : all) {
    if (out.size() >= limit) {
      break;
    }
    bool inside =
        std::any_of(out.begin(), out.end(), [&](const Block& o) { return contains(o, b); });
    if (!inside) {
      out.push_back(b);
    }
  }
  return out;
}

std::string format_block_size(const Block& block, int rank) {
  return topology::format_dims(block.size, rank);
}

} // namespace tpuctl::provision
