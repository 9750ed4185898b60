// The TPU generations tpuctl knows, described by a handful of parameters each (the xpk idiom):
// every accelerator type, its shape, hosts and wraparound is derived from these by the small pure
// helpers in accelerator_type.hpp, never typed in one row per type.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::topology {

// Chip-grid extents along x, y, z. 2D generations have z == 1.
using Dims = std::array<int, 3>;
// Per-axis torus closure (x, y, z).
using Wrap = std::array<bool, 3>;

// What the number in `<prefix>-<N>` counts.
enum class TypeNumber { cores, chips };

struct Generation {
  std::string_view name;        // "v5e", "v5p", "tpu7x" (what `--generation` takes)
  std::string_view type_prefix; // "v5litepod" for v5e; else the same as name
  TypeNumber type_number = TypeNumber::cores;
  int cores_per_chip = 2;        // TensorCores per chip
  int rank = 3;                  // 2: AxB topologies on a fixed 2D torus; 3: AxBxC on 4x4x4 cubes
  Dims pod_dims{};               // the physical pod (for 3D generations: one possible layout)
  int max_cubes = 0;             // 3D: the most 4x4x4 cubes one slice may use
  bool nondecreasing = true;     // 3D multi-cube shapes must be written A <= B <= C
  bool single_chip = false;      // 3D: 1x1x1 exists (tpu7x-standard-1t)
  int max_single_host_chips = 4; // slices up to this many chips run on one VM
  // 2D: the only topologies that exist, smallest first.
  std::vector<Dims> topologies_2d;
  // 3D: the cube counts shown by `tpuctl topology list` (the catalogue); any count up to
  // max_cubes is valid.
  std::vector<int> listed_cubes;
  double peak_bf16_tflops = 0;      // per chip
  double hbm_gib = 0;               // per chip
  double ici_link_gbytes_per_s = 0; // one direction of one ICI link, GB/s

  // Chips in the type `<prefix>-<number>`; 0 if `number` is not a whole number of chips.
  int chips_for_number(int number) const;
  // The number in the type name of a slice with `chips` chips.
  int number_for_chips(int chips) const {
    return chips * (type_number == TypeNumber::cores ? cores_per_chip : 1);
  }
  // "TensorCores" or "chips": what the number in a type name counts, for messages.
  std::string_view number_unit() const;
};

// Every generation, oldest first. The references stay valid for the life of the program.
const std::vector<Generation>& generations();

// The generation named `name`: its name ("v5e") or its type prefix ("v5litepod"). Fails with
// usage, listing the known generations and the nearest one, when there is no such generation.
Expected<const Generation*> find_generation(std::string_view name);

// The type prefix most likely meant by an unknown generation `name` (case-insensitive; knows
// the names people use for each generation: "v7x" and "ironwood" mean tpu7x, "v5lite" v5litepod,
// "trillium" v6e), or "" when nothing is close. Never fails.
std::string generation_suggestion(std::string_view name);

// "v2, v3, v4, v5e (v5litepod), v5p, v6e, tpu7x", for messages and help.
std::string known_generations_text();

// "4x4" (rank 2) or "4x4x4" (rank 3).
std::string format_dims(const Dims& dims, int rank);

// "x,y,z" as in TPU_HOST_BOUNDS: always three numbers.
std::string format_bounds(const Dims& dims);

} // namespace tpuctl::topology
