// Accelerator types ("v5p-128", "v5p-4x4x4", "v5litepod-16") and the slice shape each one means:
// chips, TensorCores, TPU VMs (hosts), the chip grid, its wraparound and the host grid, i.e.
// everything a worker's TPU_* environment is made of. All derived from generation.hpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topology/generation.hpp"
#include "util/expected.hpp"

namespace tpuctl::topology {

// One slice shape of one generation. "host" means a TPU VM (one TPU_WORKER_ID).
struct AcceleratorType {
  std::string name;                       // canonical numeric form, e.g. "v5p-128"
  const Generation* generation = nullptr; // points into generations()
  int chips = 0;
  int cores = 0; // TensorCores
  int hosts = 0; // TPU VMs (workers)
  int chips_per_host = 0;
  Dims dims{1, 1, 1};                  // chip grid x, y, z (z == 1 for 2D generations)
  Wrap wrap{false, false, false};      // TPU_TOPOLOGY_WRAP
  Dims host_bounds{1, 1, 1};           // TPU_HOST_BOUNDS: the worker grid
  Dims chips_per_host_bounds{1, 1, 1}; // TPU_CHIPS_PER_HOST_BOUNDS: one worker's chip grid

  int rank() const { return generation->rank; }
  // TPU_TOPOLOGY: "4x4" for 2D generations, "4x4x4" for 3D ones.
  std::string topology() const { return format_dims(dims, rank()); }
  // 3D slices made of whole 4x4x4 cubes: how many; 0 for sub-cube and 2D slices.
  int cubes() const;
};

// A topology string split into numbers, before any generation rule is applied.
struct ParsedTopology {
  Dims dims{1, 1, 1};
  int rank = 0; // 2 for "AxB", 3 for "AxBxC"
};

// Parses "AxB" or "AxBxC" (each a whole number from 1 to 1024). Fails with usage naming `text`
// when it is anything else ("4x", "0x4", "4x4x4x4", "4x4x2000").
Expected<ParsedTopology> parse_topology(std::string_view text);

// Parses an accelerator type in either form: "<prefix>-<number>" (v5p-128, v5litepod-16,
// tpu7x-128) or "<prefix>-<topology>" (v5p-4x4x4, v5litepod-4x4); `v5e` works as a prefix too.
// The number form of a multi-cube size picks the most cube-like shape (v5p-384 -> 4x4x12).
// Fails with usage naming `text`, the rule it breaks and valid alternatives; every applicable
// problem is reported (Error::more).
Expected<AcceleratorType> parse_accelerator_type(std::string_view text);

// gcloud's other form: `--type GEN --topology AxB[xC]`, e.g. ("v5p", "4x4x4") or
// ("v5litepod", "4x4"). Fails with usage for an unknown generation, a malformed topology or a
// shape the generation does not have; all problems are reported.
Expected<AcceleratorType> accelerator_type_from_topology(std::string_view generation,
                                                         std::string_view topology);

// The slice of generation `gen` with chip grid `dims` (z == 1 for 2D generations). Fails with
// usage when no such slice exists.
Expected<AcceleratorType> make_accelerator_type(const Generation& gen, const Dims& dims);

// The standard types of `gen` (what `tpuctl topology list` shows): every 2D topology; for 3D
// generations the sub-cube shapes and the default shape of each listed cube count.
std::vector<AcceleratorType> catalogue(const Generation& gen);

// catalogue() of every generation, oldest first.
std::vector<AcceleratorType> catalogue();

} // namespace tpuctl::topology
