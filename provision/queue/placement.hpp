// Placement: where a slice goes in a pool's host grid. Pure logic over a HostGrid (no IO).
//
// Two models, chosen by the generation's rank:
//  * 2D (v2, v3, v5e, v6e): a slice is a contiguous rectangle of free hosts of exactly the
//    type's host bounds (x by y as given: TPU_TOPOLOGY is x-by-y, so it is never rotated).
//  * 3D (v4, v5p, tpu7x): the pool is cut into 4x4x4-chip cubes. A sub-cube slice (2x2x1 ...
//    2x4x4 chips) is a block of free hosts inside one cube; a slice of whole cubes takes that
//    many entirely free cubes from anywhere in the pool (the optical switches join them).
// Workers are numbered over the slice's host grid x fastest (TPU_WORKER_ID). See placement.cpp
// for the alignment and anti-fragmentation policy.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "provision/pool/host_grid.hpp"
#include "topology/accelerator_type.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

// One worker of a placed slice.
struct PlacedHost {
  int worker = 0;         // TPU_WORKER_ID
  std::string host;       // host name
  Dims position{0, 0, 0}; // position in the pool's host grid
  Dims logical{0, 0, 0};  // position in the slice's host grid (TPU_HOST_BOUNDS)
};

// For slices of whole cubes: one cube of the slice's logical cube grid and the pool cube
// (in cube coordinates: host position / cube size in hosts) that realises it.
struct CubeAssignment {
  Dims logical{0, 0, 0};
  Dims physical{0, 0, 0};
};

struct Placement {
  std::vector<PlacedHost> hosts; // worker order
  // 2D and sub-cube slices: the host block used. Multi-cube slices: size {0,0,0}.
  Block block;
  // Multi-cube slices: (A/4, B/4, C/4) and the logical -> physical cube map, logical x fastest.
  Dims cube_grid{0, 0, 0};
  std::vector<CubeAssignment> cubes;
  bool multi_cube() const { return !cubes.empty(); }
};

// Why a request does not fit now, in terms of the grid.
struct NoFit {
  // The pool could not hold the request even with every host present and free (too small, wrong
  // host size, wrong generation): a create request should be refused at once.
  bool never = false;
  std::string message;
  std::vector<std::string> in_the_way; // "h7 (drained: disk)", "h9 (claimed by qr-42)"
};

// A 3D pool's cube, in hosts (4x4x4 chips / the host's chip block), e.g. 2x2x4 for 4-chip
// hosts. {0,0,0} for 2D pools.
Dims cube_hosts(const PoolLayout& layout);

// Checks that `type` can ever run on the pool's hosts: same generation, same chips per host
// (TPU_CHIPS_PER_HOST_BOUNDS). Fails with usage naming both, e.g. "v5litepod-8 needs hosts of 8
// chips (2x4); pool 'p' has hosts of 4 chips (2x2)". `pool` may be empty ("the pool").
Status check_compatible(const PoolLayout& layout, const topology::AcceleratorType& type,
                        std::string_view pool = {});

// True when the pool could hold `count` non-overlapping slices of `type` if every position held
// a free host. False for incompatible types.
bool fits_empty(const PoolLayout& layout, const topology::AcceleratorType& type, int count = 1);

// The fast path for schedulers: a placement on free hosts, or nullopt when none exists now.
// Precondition: check_compatible() passed and `grid` is refreshed.
std::optional<Placement> try_place_slice(const HostGrid& grid,
                                         const topology::AcceleratorType& type);

// Places one slice. Fails with usage (check_compatible) or capacity, whose message is
// explain_no_fit()'s and whose reason is "never_fits" or "no_free_block".
Expected<Placement> place_slice(const HostGrid& grid, const topology::AcceleratorType& type,
                                std::string_view pool = {});

// Places `count` slices that share no host, all or nothing (`--node-count`). Fails like
// place_slice; the message then says how many of the slices fit.
Expected<std::vector<Placement>> place_slices(const HostGrid& grid,
                                              const topology::AcceleratorType& type, int count,
                                              std::string_view pool = {});

// Explains why `count` slices of `type` do not fit: the block (or cube count) needed, the
// largest free block (or free cube count), up to 5 hosts in the way, and whether the pool could
// ever hold the request.
NoFit explain_no_fit(const HostGrid& grid, const topology::AcceleratorType& type, int count = 1,
                     std::string_view pool = {});

// Marks a placement's hosts claimed by `owner` in `grid` and refreshes it (used by place_slices
// and by simulations).
void claim(HostGrid& grid, const Placement& placement, const std::string& owner);

} // namespace tpuctl::provision
