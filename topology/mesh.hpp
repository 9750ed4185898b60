// Logical device meshes over a slice's physical torus, the way JAX's
// mesh_utils.create_device_mesh / create_hybrid_device_mesh lay them out.
//
// tpuctl uses one JAX device per chip on every generation (megacore on v4/v5p, and tpu7x's two
// chiplets counted as one chip), and a device id is the chip index of torus.hpp (x fastest);
// with several slices, slice s adds s * chips.
#pragma once

#include <string>
#include <vector>

#include "topology/accelerator_type.hpp"
#include "util/expected.hpp"

namespace tpuctl::topology {

// How much of each physical axis (x, y, z) one logical axis takes: 1 = none of it, the full
// physical size = all of it, anything between = a split of that axis.
using AxisFactors = Dims;

struct MeshAxis {
  std::string name;
  int size = 1;                      // global size: ICI size x dcn
  std::vector<int> physical_axes;    // 0 = x, 1 = y, 2 = z; major first
  std::vector<int> physical_factors; // how much of each of those axes, same order
  bool split = false;                // takes only part of some physical axis
  int dcn = 1;                       // how many slices lie along this axis (over DCN)
};

struct DeviceMesh {
  std::vector<int> shape; // global logical shape (shape[0] includes the slices)
  std::vector<MeshAxis> axes;
  std::vector<int> devices; // device ids, row-major over shape
  bool ring_order = false;  // the v5e 2x2 / 4x4 ring order was used

  // The device at `index` (one entry per axis, each in range).
  int at(const std::vector<int>& index) const;
};

struct MeshRequest {
  // One slice's logical shape, least to most network-intensive (e.g. {data, model}).
  std::vector<int> shape;
  // Names of the axes; empty means "axis0", "axis1", ...
  std::vector<std::string> axis_names;
  // Slices joined over DCN; they stack on the first logical axis (outermost).
  int num_slices = 1;
};

// Lays `request` out on `slice`: the v5e ring special cases, then JAX's greedy assignment of
// whole physical axes (most intensive logical axis first), then, when that fails, the
// splitting assignment. Fails with usage when the shape does not have one device per chip,
// names do not match the axes, or num_slices < 1; every problem is reported.
Expected<DeviceMesh> create_device_mesh(const AcceleratorType& slice, const MeshRequest& request);

// JAX's greedy assignment without splitting: for each logical axis (visited last to first) the
// first subset of still-free physical axes, by size 3, 2, 1 and lexicographic order, whose
// sizes multiply to the logical size. Returns the factors per logical axis, or an empty vector
// when some logical axis larger than 1 finds no subset.
std::vector<AxisFactors> assign_whole_axes(const Dims& physical, const std::vector<int>& logical);

// The splitting assignment (JAX's allow_split_physical_axes): each logical axis, last to first,
// takes a factor of each physical axis, choosing by JAX's preference order. Returns an empty
// vector when the sizes cannot be factored onto the physical axes.
std::vector<AxisFactors> assign_split_axes(const Dims& physical, const std::vector<int>& logical);

// The device ids (chip indices of a `physical` grid, x fastest) in row-major order over
// `logical`, given per-axis `factors`: each physical axis splits into its logical factors with
// the lower logical axis major; each logical index runs over its physical factors with x major.
std::vector<int> devices_from_factors(const Dims& physical, const std::vector<int>& logical,
                                      const std::vector<AxisFactors>& factors);

} // namespace tpuctl::topology
