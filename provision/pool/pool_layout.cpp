#include "provision/pool/pool_layout.hpp"

#include <algorithm>

#include "topology/accelerator_type.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

using topology::format_dims;

Expected<Dims> host_chip_bounds(const topology::Generation& gen, int chips_per_host) {
  bool flat = gen.type_number == topology::TypeNumber::chips; // v5e, v6e
  switch (chips_per_host) {
  case 1:
    if (flat || gen.single_chip) {
      return Dims{1, 1, 1};
    }
    break;
  case 4:
    return Dims{2, 2, 1};
  case 8:
    if (flat) {
      return Dims{2, 4, 1};
    }
    break;
  default:
    break;
  }
  std::string allowed = flat ? "1, 4 or 8" : (gen.single_chip ? "1 or 4" : "4");
  return usage_error("--chips-per-host: " + std::to_string(chips_per_host) +
                     " is not a host size of " + std::string(gen.name) + " (use " + allowed + ")");
}

namespace {

Expected<PoolLayout> finish_layout(const topology::Generation& gen, int chips_per_host,
                                   const Dims& shape) {
  ErrorList problems;
  auto bounds = host_chip_bounds(gen, chips_per_host);
  if (!bounds) {
    return bounds.error();
  }
  PoolLayout layout;
  layout.generation = &gen;
  layout.chips_per_host = chips_per_host;
  layout.chips_per_host_bounds = *bounds;
  layout.shape = shape;
  for (int a = 0; a < 3; ++a) {
    if (shape[a] > gen.pod_dims[a]) {
      problems.add(usage_error("--shape: " + format_dims(shape, gen.rank) + " is larger than a " +
                               std::string(gen.name) + " pod (" +
                               format_dims(gen.pod_dims, gen.rank) + ")"));
      break;
    }
  }
  for (int a = 0; a < 3; ++a) {
    if (shape[a] % (*bounds)[a] != 0) {
      problems.add(usage_error("--shape: " + format_dims(shape, gen.rank) +
                               " is not a whole number of hosts of " +
                               format_dims(*bounds, gen.rank) + " chips (every dimension must " +
                               "be a multiple of the host's)"));
      break;
    }
    layout.host_grid[a] = shape[a] / (*bounds)[a];
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return layout;
}

} // namespace

Expected<PoolLayout> make_pool_layout(const std::string& generation,
                                      std::optional<int> chips_per_host, const std::string& shape) {
  TPUCTL_TRY_ASSIGN(const topology::Generation* gen, topology::find_generation(generation));
  Dims dims = gen->pod_dims;
  if (!shape.empty()) {
    auto parsed = topology::parse_topology(shape);
    if (!parsed) {
      Error e = parsed.error();
      e.message = "--shape: " + e.message;
      return e;
    }
    if (parsed->rank != gen->rank) {
      return usage_error("--shape: '" + shape + "' has " + std::to_string(parsed->rank) +
                         " dimensions but " + std::string(gen->name) + " pools are " +
                         std::to_string(gen->rank) + "D (e.g. " +
                         format_dims(gen->pod_dims, gen->rank) + ")");
    }
    dims = parsed->dims;
  }
  return finish_layout(*gen, chips_per_host.value_or(4), dims);
}

Expected<PoolLayout> compact_layout(const std::string& generation,
                                    std::optional<int> chips_per_host, int hosts) {
  TPUCTL_TRY_ASSIGN(const topology::Generation* gen, topology::find_generation(generation));
  int cph = chips_per_host.value_or(4);
  TPUCTL_TRY_ASSIGN(Dims bounds, host_chip_bounds(*gen, cph));
  if (hosts < 1) {
    return usage_error("--hosts: " + std::to_string(hosts) + " is out of range (at least 1)");
  }
  // Host-grid candidates: the most compact block (smallest surface, then x >= y >= z) whose
  // volume is `hosts` and that fits in the pod.
  Dims best{0, 0, 0};
  long best_score = -1;
  int zmax = gen->rank == 3 ? hosts : 1;
  for (int z = 1; z <= zmax; ++z) {
    if (hosts % z) {
      continue;
    }
    for (int y = 1; y <= hosts / z; ++y) {
      if ((hosts / z) % y) {
        continue;
      }
      int x = hosts / z / y;
      Dims grid{x, y, z};
      Dims chips{x * bounds[0], y * bounds[1], z * bounds[2]};
      bool fits = true;
      for (int a = 0; a < 3; ++a) {
        fits = fits && chips[a] <= gen->pod_dims[a];
      }
      if (!fits) {
        continue;
      }
      // Prefer shapes whose chip extent is most cube-like (so the largest slices fit), then
      // ones whose chip extents are multiples of 4 (cubes for 3D generations).
      int longest = std::max({chips[0], chips[1], gen->rank == 3 ? chips[2] : 0});
      int quad = (chips[0] % 4 == 0) + (chips[1] % 4 == 0) + (gen->rank == 3 && chips[2] % 4 == 0);
      long score = 1000000L - longest * 1000L + quad * 10 + (x >= y ? 1 : 0);
      if (score > best_score) {
        best_score = score;
        best = grid;
      }
    }
  }
  if (best_score < 0) {
    return usage_error("--hosts: " + std::to_string(hosts) + " hosts of " + std::to_string(cph) +
                       " chips do not fit in one " + std::string(gen->name) + " pod (" +
                       format_dims(gen->pod_dims, gen->rank) + " chips)");
  }
  Dims shape{best[0] * bounds[0], best[1] * bounds[1], best[2] * bounds[2]};
  return finish_layout(*gen, cph, shape);
}

int position_index(const PoolLayout& layout, const Dims& pos) {
  const Dims& g = layout.host_grid;
  return pos[0] + g[0] * (pos[1] + g[1] * pos[2]);
}

Dims position_of(const PoolLayout& layout, int index) {
  const Dims& g = layout.host_grid;
  return Dims{index % g[0], (index / g[0]) % g[1], index / (g[0] * g[1])};
}

bool in_grid(const PoolLayout& layout, const Dims& pos) {
  for (int a = 0; a < 3; ++a) {
    if (pos[a] < 0 || pos[a] >= layout.host_grid[a]) {
      return false;
    }
  }
  return true;
}

Expected<Dims> parse_position(const PoolLayout& layout, const std::string& text) {
  auto parts = util::split(text, ',');
  if (parts.size() < 2 || parts.size() > 3) {
    return usage_error("--coords: '" + text + "' is not a host position (use x,y or x,y,z)");
  }
  Dims pos{0, 0, 0};
  for (size_t a = 0; a < parts.size(); ++a) {
    TPUCTL_TRY_ASSIGN(int64_t v, util::parse_int(util::trim(parts[a]), "--coords", 0, 1 << 20));
    pos[a] = static_cast<int>(v);
  }
  if (!in_grid(layout, pos)) {
    return usage_error("--coords: '" + text + "' is outside the pool's host grid " +
                       topology::format_dims(layout.host_grid, 3) + " (positions start at 0)");
  }
  return pos;
}

std::string format_position(const Dims& pos) {
  return std::to_string(pos[0]) + "," + std::to_string(pos[1]) + "," + std::to_string(pos[2]);
}

} // namespace tpuctl::provision
