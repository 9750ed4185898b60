// Placement: choosing the hosts of a slice.
//
// The 2D model (v2, v3, v5e, v6e). A pod is one fixed 2D torus; a slice is an axis-aligned
// rectangle of the grid, exactly the type's host bounds (never rotated: TPU_TOPOLOGY "4x8" means
// x = 4, y = 8). Every origin whose rectangle is all free hosts is feasible; among them we pick
//   1. an aligned origin (x a multiple of the block's width, y of its height): blocks of a size
//      then tile the grid like a buddy allocator and never straddle a boundary that a larger
//      aligned block of the same family would need;
//   2. then the origin whose rectangle touches the most "walls" (grid edges, and positions that
//      are not free hosts) along its perimeter (the touching-perimeter heuristic of rectangle
//      packing): slices hug each other and the edges, leaving the free area in one piece;
//   3. then the lowest position (y, then x).
//
// The 3D model (v4, v5p, tpu7x). The pool is cut into 4x4x4-chip cubes: with 2x2x1-chip hosts a
// cube is 2x2x4 hosts, and cube boundaries sit at multiples of that in host coordinates (a cube
// cut off by the pool's edge is a partial cube). Two kinds of slice:
//   * Sub-cube slices (2x2x1, 2x2x2, 2x2x4, 2x4x4 chips: no wraparound, no optical switches) are a
//     block of whole hosts inside one cube. We pack: among the cubes where the block fits we take
//     the one with the fewest free hosts (a partly used cube before a whole free one, which
//     stays available for multi-cube slices), then an aligned offset inside the cube, then the
//     touching-perimeter rule, then the lowest cube and offset.
//   * Slices of whole cubes (every chip dimension a multiple of 4, wraparound on every axis)
//     need (A/4)(B/4)(C/4) cubes whose hosts are all present and free. A partial cube never
//     counts. The optical circuit switches can join any set of cubes into the slice's logical
//     cube grid, so this is counting, not geometry: we take the free cubes in pool order (lowest
//     index first) and map the logical cube grid onto them x fastest.
//
// Worker order is x fastest over the slice's logical host grid (TPU_HOST_BOUNDS). For a
// multi-cube slice, logical host position p lies in logical cube p / cube and at offset
// p % cube inside it; that cube's physical cube gives the host.
#include "provision/queue/placement.hpp"

#include <algorithm>
#include <tuple>

#include "util/strings.hpp"

namespace tpuctl::provision {

using topology::AcceleratorType;
using topology::format_dims;

namespace {

constexpr int k_cube_chips = 4; // a cube is 4x4x4 chips
constexpr size_t k_max_named_hosts = 5;

int volume(const Dims& d) {
  return d[0] * d[1] * d[2];
}

Dims add(const Dims& a, const Dims& b) {
  return Dims{a[0] + b[0], a[1] + b[1], a[2] + b[2]};
}

std::string pool_text(std::string_view pool) {
  return pool.empty() ? std::string("the pool") : "pool '" + std::string(pool) + "'";
}

// The slice's logical host grid positions, x fastest.
template <typename F>
void for_each_position(const Dims& size, F&& f) {
  for (int z = 0; z < size[2]; ++z) {
    for (int y = 0; y < size[1]; ++y) {
      for (int x = 0; x < size[0]; ++x) {
        f(Dims{x, y, z});
      }
    }
  }
}

bool is_multi_cube(const AcceleratorType& type) {
  return type.rank() == 3 && type.cubes() > 0;
}

// A region a block must stay inside: the whole grid (2D) or one (possibly partial) cube.
struct Region {
  Dims origin{0, 0, 0};
  Dims size{0, 0, 0};
  bool whole_cube = false;
};

std::vector<Region> regions(const PoolLayout& layout) {
  const Dims& g = layout.host_grid;
  if (layout.rank() != 3) {
    return {Region{Dims{0, 0, 0}, g, false}};
  }
  Dims c = cube_hosts(layout);
  std::vector<Region> out;
  for (int z = 0; z < g[2]; z += c[2]) {
    for (int y = 0; y < g[1]; y += c[1]) {
      for (int x = 0; x < g[0]; x += c[0]) {
        Region r;
        r.origin = Dims{x, y, z};
        for (int a = 0; a < 3; ++a) {
          r.size[a] = std::min(c[a], g[a] - r.origin[a]);
        }
        r.whole_cube = r.size == c;
        out.push_back(r);
      }
    }
  }
  return out;
}

// Pool cubes along each axis (partial cubes excluded).
Dims pool_cubes(const PoolLayout& layout) {
  Dims c = cube_hosts(layout);
  return Dims{layout.host_grid[0] / c[0], layout.host_grid[1] / c[1], layout.host_grid[2] / c[2]};
}

bool free_at(const HostGrid& grid, const Dims& p) {
  return in_grid(grid.layout(), p) && grid.at(p).state == CellState::free;
}

// Positions next to the block's faces that are walls: outside `region` or not a free host.
int touching_walls(const HostGrid& grid, const Dims& origin, const Dims& size,
                   const Region& region) {
  int walls = 0;
  auto wall = [&](const Dims& p) {
    for (int a = 0; a < 3; ++a) {
      if (p[a] < region.origin[a] || p[a] >= region.origin[a] + region.size[a]) {
        return true;
      }
    }
    return !free_at(grid, p);
  };
  for (int a = 0; a < 3; ++a) {
    if (grid.layout().host_grid[a] == 1) {
      continue; // a flat axis has no neighbours
    }
    Dims face = size;
    face[a] = 1;
    for_each_position(face, [&](const Dims& off) {
      Dims lo = add(origin, off);
      Dims hi = lo;
      lo[a] -= 1;
      hi[a] += size[a];
      walls += (wall(lo) ? 1 : 0) + (wall(hi) ? 1 : 0);
    });
  }
  return walls;
}

int free_count(const HostGrid& grid, const Region& r) {
  int n = 0;
  for_each_position(r.size,
                    [&](const Dims& off) { n += free_at(grid, add(r.origin, off)) ? 1 : 0; });
  return n;
}

Placement contiguous_placement(const HostGrid& grid, const Dims& origin, const Dims& size) {
  Placement p;
  p.block = Block{origin, size};
  for_each_position(size, [&](const Dims& off) {
    Dims pos = add(origin, off);
    p.hosts.push_back(PlacedHost{static_cast<int>(p.hosts.size()), grid.at(pos).host, pos, off});
  });
  return p;
}

std::optional<Placement> place_contiguous(const HostGrid& grid, const Dims& size) {
  // key: (whole free cube, free hosts in region, unaligned, -walls, region, offset)
  using Key = std::tuple<int, int, int, int, size_t, int>;
  std::optional<Key> best;
  Dims best_origin{0, 0, 0};
  auto rs = regions(grid.layout());
  bool packing = grid.layout().rank() == 3;
  for (size_t ri = 0; ri < rs.size(); ++ri) {
    const Region& r = rs[ri];
    Dims span{r.size[0] - size[0] + 1, r.size[1] - size[1] + 1, r.size[2] - size[2] + 1};
    if (span[0] < 1 || span[1] < 1 || span[2] < 1) {
      continue;
    }
    int free_hosts = -1;
    int offset_index = 0;
    for_each_position(span, [&](const Dims& off) {
      int oi = offset_index++;
      Dims origin = add(r.origin, off);
      if (!grid.block_free(origin, size)) {
        return;
      }
      if (packing && free_hosts < 0) {
        free_hosts = free_count(grid, r);
      }
      bool aligned = off[0] % size[0] == 0 && off[1] % size[1] == 0 && off[2] % size[2] == 0;
      bool whole_free = packing && r.whole_cube && free_hosts == volume(r.size);
      Key key{whole_free ? 1 : 0,
              packing ? free_hosts : 0,
              aligned ? 0 : 1,
              -touching_walls(grid, origin, size, r),
              ri,
              oi};
      if (!best || key < *best) {
        best = key;
        best_origin = origin;
      }
    });
  }
  if (!best) {
    return std::nullopt;
  }
  return contiguous_placement(grid, best_origin, size);
}

std::optional<Placement> place_cubes(const HostGrid& grid, const AcceleratorType& type) {
  const PoolLayout& layout = grid.layout();
  Dims c = cube_hosts(layout);
  Dims pc = pool_cubes(layout);
  Dims cg{type.host_bounds[0] / c[0], type.host_bounds[1] / c[1], type.host_bounds[2] / c[2]};
  int needed = volume(cg);
  std::vector<Dims> chosen;
  for_each_position(pc, [&](const Dims& cube) {
    if (static_cast<int>(chosen.size()) < needed &&
        grid.block_free(Dims{cube[0] * c[0], cube[1] * c[1], cube[2] * c[2]}, c)) {
      chosen.push_back(cube);
    }
  });
  if (static_cast<int>(chosen.size()) < needed) {
    return std::nullopt;
  }
  Placement p;
  p.cube_grid = cg;
  size_t i = 0;
  for_each_position(cg, [&](const Dims& logical) {
    p.cubes.push_back(CubeAssignment{logical, chosen[i++]});
  });
  for_each_position(type.host_bounds, [&](const Dims& logical) {
    Dims lc{logical[0] / c[0], logical[1] / c[1], logical[2] / c[2]};
    const Dims& phys = chosen[static_cast<size_t>(lc[0] + cg[0] * (lc[1] + cg[1] * lc[2]))];
    Dims pos{phys[0] * c[0] + logical[0] % c[0], phys[1] * c[1] + logical[1] % c[1],
             phys[2] * c[2] + logical[2] % c[2]};
    p.hosts.push_back(
        PlacedHost{static_cast<int>(p.hosts.size()), grid.at(pos).host, pos, logical});
  });
  return p;
}

std::string describe_cell(const GridCell& cell) {
  if (cell.state == CellState::drained) {
    return cell.host + " (drained: " + (cell.owner.empty() ? "no reason" : cell.owner) + ")";
  }
  if (cell.state == CellState::spare) {
    return cell.host + " (a spare: held back for repairs, tpuctl pool spares)";
  }
  return cell.host + " (claimed by " + (cell.owner.empty() ? "?" : cell.owner) + ")";
}

// "hosts a and b are in the way" / "host a is in the way" / "hosts a, b, c and 4 more ...".
std::string in_the_way_text(const std::vector<std::string>& named, size_t total, int empty) {
  std::string out;
  if (!named.empty()) {
    out = total == 1 ? "host " : "hosts ";
    for (size_t i = 0; i < named.size(); ++i) {
      if (i > 0) {
        out += (i + 1 == named.size() && total == named.size()) ? " and " : ", ";
      }
      out += named[i];
    }
    if (total > named.size()) {
      out += " and " + std::to_string(total - named.size()) + " more";
    }
    out += total == 1 ? " is in the way" : " are in the way";
  }
  if (empty > 0) {
    out += std::string(out.empty() ? "" : "; ") + std::to_string(empty) +
           (empty == 1 ? " position has no host" : " positions have no host");
  }
  return out;
}

// The blockers of the candidate block (inside one region) with the fewest non-free positions.
void nearest_blockers(const HostGrid& grid, const Dims& size, NoFit& out, int& empty_count,
                      size_t& total) {
  int best = -1;
  Dims best_origin{0, 0, 0};
  for (const Region& r : regions(grid.layout())) {
    Dims span{r.size[0] - size[0] + 1, r.size[1] - size[1] + 1, r.size[2] - size[2] + 1};
    if (span[0] < 1 || span[1] < 1 || span[2] < 1) {
      continue;
    }
    for_each_position(span, [&](const Dims& off) {
      Dims origin = add(r.origin, off);
      int blocked = 0;
      for_each_position(size,
                        [&](const Dims& o) { blocked += free_at(grid, add(origin, o)) ? 0 : 1; });
      if (best < 0 || blocked < best) {
        best = blocked;
        best_origin = origin;
      }
    });
  }
  if (best < 0) {
    return;
  }
  for_each_position(size, [&](const Dims& o) {
    const GridCell& cell = grid.at(add(best_origin, o));
    if (cell.state == CellState::empty) {
      ++empty_count;
    } else if (cell.state != CellState::free) {
      ++total;
      if (out.in_the_way.size() < k_max_named_hosts) {
        out.in_the_way.push_back(describe_cell(cell));
      }
    }
  });
}

// The largest all-free box inside any one region (brute force; regions are at most a cube).
Dims largest_free_in_regions(const HostGrid& grid) {
  Dims best{0, 0, 0};
  int best_volume = 0;
  for (const Region& r : regions(grid.layout())) {
    for_each_position(r.size, [&](const Dims& off) {
      Dims origin = add(r.origin, off);
      if (!free_at(grid, origin)) {
        return;
      }
      Dims room{r.size[0] - off[0], r.size[1] - off[1], r.size[2] - off[2]};
      for_each_position(room, [&](const Dims& s0) {
        Dims s{s0[0] + 1, s0[1] + 1, s0[2] + 1};
        if (volume(s) > best_volume && grid.block_free(origin, s)) {
          best_volume = volume(s);
          best = s;
        }
      });
    });
  }
  return best;
}

std::string hosts_and_chips(const Dims& hosts, const PoolLayout& layout) {
  const Dims& b = layout.chips_per_host_bounds;
  Dims chips{hosts[0] * b[0], hosts[1] * b[1], hosts[2] * b[2]};
  return format_dims(hosts, layout.rank()) + " hosts (" + format_dims(chips, layout.rank()) +
         " chips)";
}

std::string never_text(const PoolLayout& layout, const AcceleratorType& type, int count,
                       std::string_view pool) {
  std::string what = count == 1 ? type.name : std::to_string(count) + " slices of " + type.name;
  std::string need;
  if (is_multi_cube(type)) {
    Dims c = cube_hosts(layout);
    int per = volume(
        Dims{type.host_bounds[0] / c[0], type.host_bounds[1] / c[1], type.host_bounds[2] / c[2]});
    need = std::to_string(per * count) + " whole cubes of 4x4x4 chips; " + pool_text(pool) + " (" +
           format_dims(layout.shape, layout.rank()) + " chips) has " +
           std::to_string(volume(pool_cubes(layout)));
  } else {
    need = (count == 1 ? "a block of " : std::to_string(count) + " blocks of ") +
           hosts_and_chips(type.host_bounds, layout) +
           (layout.rank() == 3 ? " inside a cube" : "") + "; " + pool_text(pool) + " is " +
           hosts_and_chips(layout.host_grid, layout);
  }
  return what + " needs " + need + ", so it can never hold it";
}

} // namespace

Dims cube_hosts(const PoolLayout& layout) {
  if (layout.rank() != 3) {
    return Dims{0, 0, 0};
  }
  const Dims& b = layout.chips_per_host_bounds;
  return Dims{k_cube_chips / b[0], k_cube_chips / b[1], k_cube_chips / b[2]};
}

Status check_compatible(const PoolLayout& layout, const AcceleratorType& type,
                        std::string_view pool) {
  if (type.generation == nullptr || layout.generation == nullptr ||
      type.generation->name != layout.generation->name) {
    std::string tg = type.generation ? std::string(type.generation->name) : "?";
    std::string pg = layout.generation ? std::string(layout.generation->name) : "?";
    return usage_error("accelerator type '" + type.name + "' is a " + tg + " type but " +
                       pool_text(pool) + " holds " + pg + " hosts (use a " + pg +
                       " type or a pool of " + tg + " hosts)");
  }
  if (type.chips_per_host_bounds != layout.chips_per_host_bounds) {
    int r = layout.rank();
    return usage_error("accelerator type '" + type.name + "' needs hosts of " +
                       std::to_string(type.chips_per_host) + " chips (" +
                       format_dims(type.chips_per_host_bounds, r) + "); " + pool_text(pool) +
                       " has hosts of " + std::to_string(layout.chips_per_host) + " chips (" +
                       format_dims(layout.chips_per_host_bounds, r) +
                       ") (use a pool with hosts of that size)");
  }
  return ok();
}

bool fits_empty(const PoolLayout& layout, const AcceleratorType& type, int count) {
  if (!check_compatible(layout, type) || count < 0) {
    return false;
  }
  const Dims& h = type.host_bounds;
  if (is_multi_cube(type)) {
    Dims c = cube_hosts(layout);
    int per = volume(Dims{h[0] / c[0], h[1] / c[1], h[2] / c[2]});
    return per * count <= volume(pool_cubes(layout));
  }
  // Identical unrotated boxes pack into a box exactly floor(R/h) per axis: every placed box
  // holds exactly one position whose coordinates are all = h-1 (mod h).
  int capacity = 0;
  for (const Region& r : regions(layout)) {
    capacity += (r.size[0] / h[0]) * (r.size[1] / h[1]) * (r.size[2] / h[2]);
  }
  return capacity >= count;
}

std::optional<Placement> try_place_slice(const HostGrid& grid, const AcceleratorType& type) {
  if (is_multi_cube(type)) {
    return place_cubes(grid, type);
  }
  return place_contiguous(grid, type.host_bounds);
}

void claim(HostGrid& grid, const Placement& placement, const std::string& owner) {
  for (const auto& h : placement.hosts) {
    GridCell& cell = grid.at(h.position);
    cell.state = CellState::claimed;
    cell.owner = owner;
  }
  grid.refresh();
}

NoFit explain_no_fit(const HostGrid& grid, const AcceleratorType& type, int count,
                     std::string_view pool) {
  NoFit out;
  const PoolLayout& layout = grid.layout();
  if (auto st = check_compatible(layout, type, pool); !st) {
    out.never = true;
    out.message = st.error().message;
    return out;
  }
  if (!fits_empty(layout, type, count)) {
    out.never = true;
    out.message = never_text(layout, type, count, pool);
    return out;
  }
  // Place what fits, then explain the first slice that does not.
  HostGrid work = grid;
  int placed = 0;
  while (placed < count) {
    auto p = try_place_slice(work, type);
    if (!p) {
      break;
    }
    claim(work, *p, "slice " + std::to_string(placed + 1) + " of this request");
    ++placed;
  }
  std::string prefix;
  if (count > 1) {
    prefix = "only " + std::to_string(placed) + " of " + std::to_string(count) + " slices of " +
             type.name + " fit now; ";
  }
  if (placed == count) {
    out.message = prefix + "all fit";
    return out;
  }
  std::string subject = count > 1 ? "the next" : type.name;
  size_t total = 0;
  int empty = 0;
  if (is_multi_cube(type)) {
    Dims c = cube_hosts(layout);
    Dims pc = pool_cubes(layout);
    int needed = volume(
        Dims{type.host_bounds[0] / c[0], type.host_bounds[1] / c[1], type.host_bounds[2] / c[2]});
    // Cubes by how many of their positions are not free hosts, fewest first.
    std::vector<std::pair<int, Dims>> busy;
    int free_cubes = 0;
    for_each_position(pc, [&](const Dims& cube) {
      Region r{Dims{cube[0] * c[0], cube[1] * c[1], cube[2] * c[2]}, c, true};
      int blocked = volume(c) - free_count(work, r);
      if (blocked == 0) {
        ++free_cubes;
      } else {
        busy.emplace_back(blocked, r.origin);
      }
    });
    std::stable_sort(busy.begin(), busy.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t missing = static_cast<size_t>(needed - free_cubes);
    for (size_t i = 0; i < missing && i < busy.size(); ++i) {
      for_each_position(c, [&](const Dims& off) {
        const GridCell& cell = work.at(add(busy[i].second, off));
        if (cell.state == CellState::empty) {
          ++empty;
        } else if (cell.state != CellState::free) {
          ++total;
          if (out.in_the_way.size() < k_max_named_hosts) {
            out.in_the_way.push_back(describe_cell(cell));
          }
        }
      });
    }
    out.message = prefix + subject + " needs " + std::to_string(needed) + " whole free cube" +
                  (needed == 1 ? "" : "s") + " (" + format_dims(c, 3) + " hosts each); " +
                  std::to_string(free_cubes) + " of " + std::to_string(volume(pc)) +
                  " cubes are free";
  } else {
    Dims largest{0, 0, 0};
    if (layout.rank() == 3) {
      largest = largest_free_in_regions(work);
    } else {
      auto blocks = largest_free_blocks(work, 1);
      if (!blocks.empty()) {
        largest = blocks.front().size;
      }
    }
    nearest_blockers(work, type.host_bounds, out, empty, total);
    std::string where = layout.rank() == 3 ? " inside one cube" : "";
    out.message = prefix + subject + " needs a free block of " +
                  hosts_and_chips(type.host_bounds, layout) + where + "; " +
                  (volume(largest) == 0 ? std::string("no host is free")
                                        : "the largest free block" + where + " is " +
                                              format_dims(largest, layout.rank()) + " hosts");
  }
  std::string way = in_the_way_text(out.in_the_way, total, empty);
  if (!way.empty()) {
    out.message += "; " + way;
  }
  // Spares elsewhere in the grid are not free either: say so when no blocker named them.
  const auto spares = std::count_if(work.cells().begin(), work.cells().end(), [](const GridCell& c) {
    return c.state == CellState::spare;
  });
  if (spares > 0 && way.find("a spare") == std::string::npos) {
    out.message += "; " + util::counted(static_cast<size_t>(spares), "host") +
                   (spares == 1 ? " is a spare" : " are spares") +
                   " held back for repairs (tpuctl pool spares)";
  }
  return out;
}

Expected<Placement> place_slice(const HostGrid& grid, const AcceleratorType& type,
                                std::string_view pool) {
  TPUCTL_TRY(check_compatible(grid.layout(), type, pool));
  if (fits_empty(grid.layout(), type, 1)) {
    if (auto p = try_place_slice(grid, type)) {
      return std::move(*p);
    }
  }
  NoFit why = explain_no_fit(grid, type, 1, pool);
  return Error{ErrorKind::capacity, why.message, why.never ? "never_fits" : "no_free_block"};
}

Expected<std::vector<Placement>> place_slices(const HostGrid& grid, const AcceleratorType& type,
                                              int count, std::string_view pool) {
  TPUCTL_TRY(check_compatible(grid.layout(), type, pool));
  if (count < 1) {
    return usage_error("--node-count: " + std::to_string(count) + " is not valid (use 1 or more)");
  }
  std::vector<Placement> out;
  if (fits_empty(grid.layout(), type, count)) {
    HostGrid work = grid;
    while (static_cast<int>(out.size()) < count) {
      auto p = try_place_slice(work, type);
      if (!p) {
        break;
      }
      claim(work, *p, "slice " + std::to_string(out.size() + 1) + " of this request");
      out.push_back(std::move(*p));
    }
  }
  if (static_cast<int>(out.size()) == count) {
    return out;
  }
  NoFit why = explain_no_fit(grid, type, count, pool);
  return Error{ErrorKind::capacity, why.message, why.never ? "never_fits" : "no_free_block"};
}

} // namespace tpuctl::provision
