// Mapping a logical device mesh onto a physical torus.
//
// A JAX program names its parallelism as a logical mesh, e.g. (data=16, model=16), listed from
// the least to the most network-intensive axis. Collectives along an axis run over the devices
// that differ only in that axis, so the most intensive axis should sit on whole physical rings,
// as many of them as possible: an all-reduce over a ring of k chips on a wrapped axis uses both
// directions of every link. JAX's create_device_mesh (described in topology.md section c) does
// it greedily, and tpuctl reproduces its choices so that `tpuctl topology mesh` shows what a
// real job would get:
//
//  1. Special cases on v5e: a 2x2 slice is ordered as the ring (0,0) (1,0) (1,1) (0,1); a 4x4
//     slice whose mesh has one axis of 16 follows a Hamiltonian cycle of the 4x4 mesh, because
//     a 4x4 v5e has no wraparound and a plain x-fastest order would not close the ring.
//  2. Whole axes: visit logical axes from the last (most intensive) to the first. Each takes the
//     first subset of still-free physical axes whose sizes multiply to its size, trying subsets
//     of three axes before two before one (more axes means more links), lexicographically
//     within a size. A used axis is marked size 0 so no later product can match it.
//  3. Splitting, when 2 fails for some axis: each logical axis (again last to first) takes a
//     factor of every physical axis. The candidates are all ways to hand the logical size's
//     prime factors to physical axes that still have room; the winner takes the most whole
//     axes (largest product, then count), then sits on axes already used by more intensive
//     logical axes, then is the lexicographically largest factor vector.
//
// Read-out: every physical axis is cut into its factors with the lower logical axis major (so
// the most intensive factor is contiguous), and every logical index runs over its factors with
// x major. With whole axes only this is exactly JAX's transpose-and-reshape.
//
// Several slices (create_hybrid_device_mesh): each slice gets the same layout and the slices
// stack on the first logical axis, outermost, so the global shape is (shape[0] * N, ...).
#include "topology/mesh.hpp"

#include <algorithm>
#include <functional>

#include "util/strings.hpp"

namespace tpuctl::topology {

namespace {

constexpr int64_t k_too_many = int64_t{1} << 40;

// The product of `v`, or k_too_many + 1 when it exceeds k_too_many (no overflow).
int64_t product64(const std::vector<int>& v) {
  int64_t p = 1;
  for (int x : v) {
    p *= x;
    if (p > k_too_many) {
      return k_too_many + 1;
    }
  }
  return p;
}

std::string count_text(int64_t n) {
  return n > k_too_many ? "more than " + std::to_string(k_too_many) : std::to_string(n);
}

std::string join_ints(const std::vector<int>& v, const char* sep) {
  std::vector<std::string> parts;
  for (int x : v) {
    parts.push_back(std::to_string(x));
  }
  return util::join(parts, sep);
}

std::vector<std::pair<int, int>> prime_factors(int n) {
  std::vector<std::pair<int, int>> out;
  for (int q = 2; q * q <= n; ++q) {
    int m = 0;
    while (n % q == 0) {
      n /= q;
      ++m;
    }
    if (m > 0) {
      out.emplace_back(q, m);
    }
  }
  if (n > 1) {
    out.emplace_back(n, 1);
  }
  return out;
}

int multiplicity(int n, int q) {
  int m = 0;
  while (n > 0 && n % q == 0) {
    n /= q;
    ++m;
  }
  return m;
}

// Every way to put `m` slots on three axes with at most caps[p] on axis p.
std::vector<Dims> distributions(int m, const Dims& caps) {
  std::vector<Dims> out;
  for (int a = 0; a <= std::min(m, caps[0]); ++a) {
    for (int b = 0; b <= std::min(m - a, caps[1]); ++b) {
      int c = m - a - b;
      if (c <= caps[2]) {
        out.push_back({a, b, c});
      }
    }
  }
  return out;
}

// The v5e ring orders (chip indices, x fastest), or empty when no special case applies.
std::vector<int> v5e_ring_order(const AcceleratorType& slice, const std::vector<int>& logical) {
  if (slice.generation->name != "v5e") {
    return {};
  }
  if (slice.dims == Dims{2, 2, 1}) {
    return {0, 1, 3, 2};
  }
  if (slice.dims == Dims{4, 4, 1} && std::count(logical.begin(), logical.end(), 16) == 1) {
    return {0, 1, 2, 3, 7, 6, 5, 9, 10, 11, 15, 14, 13, 12, 8, 4};
  }
  return {};
}

} // namespace

int DeviceMesh::at(const std::vector<int>& index) const {
  size_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    flat = flat * static_cast<size_t>(shape[i]) + static_cast<size_t>(index[i]);
  }
  return devices[flat];
}

std::vector<AxisFactors> assign_whole_axes(const Dims& physical, const std::vector<int>& logical) {
  Dims free = physical; // 0 once used
  std::vector<AxisFactors> factors(logical.size(), AxisFactors{1, 1, 1});
  static const std::vector<std::vector<int>> k_subsets = {{0, 1, 2}, {0, 1}, {0, 2}, {1, 2},
                                                          {0},       {1},    {2}};
  for (size_t l = logical.size(); l-- > 0;) {
    bool found = false;
    for (const auto& subset : k_subsets) {
      int64_t p = 1;
      for (int a : subset) {
        p *= free[static_cast<size_t>(a)];
      }
      if (p == logical[l]) {
        for (int a : subset) {
          factors[l][static_cast<size_t>(a)] = free[static_cast<size_t>(a)];
          free[static_cast<size_t>(a)] = 0;
        }
        found = true;
        break;
      }
    }
    if (!found && logical[l] > 1) {
      return {};
    }
  }
  return factors;
}

std::vector<AxisFactors> assign_split_axes(const Dims& physical, const std::vector<int>& logical) {
  std::vector<AxisFactors> factors(logical.size(), AxisFactors{1, 1, 1});
  Dims used{1, 1, 1}; // product of the factors handed out so far, per physical axis
  for (size_t l = logical.size(); l-- > 0;) {
    // Candidates: a Cartesian product over primes of the ways to place that prime's slots.
    std::vector<Dims> candidates{{1, 1, 1}};
    for (auto [q, m] : prime_factors(logical[l])) {
      Dims caps;
      for (size_t p = 0; p < 3; ++p) {
        caps[p] = multiplicity(physical[p] / used[p], q);
      }
      std::vector<Dims> next;
      for (const auto& base : candidates) {
        for (const auto& d : distributions(m, caps)) {
          Dims z = base;
          for (size_t p = 0; p < 3; ++p) {
            for (int i = 0; i < d[p]; ++i) {
              z[p] *= q;
            }
          }
          next.push_back(z);
        }
      }
      candidates = std::move(next);
    }
    if (candidates.empty()) {
      return {};
    }
    // JAX's preference: whole-axis product, whole-axis count (size > 1), product on axes
    // already used, then the lexicographically larger vector.
    auto key = [&](const Dims& z) {
      int64_t whole_product = 1, used_product = 1;
      int whole_count = 0;
      for (size_t p = 0; p < 3; ++p) {
        if (z[p] == physical[p]) {
          whole_product *= z[p];
          whole_count += physical[p] > 1 ? 1 : 0;
        }
        if (used[p] > 1) {
          used_product *= z[p];
        }
      }
      return std::make_tuple(whole_product, whole_count, used_product, z);
    };
    Dims best = *std::max_element(candidates.begin(), candidates.end(),
                                  [&](const Dims& a, const Dims& b) { return key(a) < key(b); });
    factors[l] = best;
    for (size_t p = 0; p < 3; ++p) {
      used[p] *= best[p];
    }
  }
  return factors;
}

std::vector<int> devices_from_factors(const Dims& physical, const std::vector<int>& logical,
                                      const std::vector<AxisFactors>& factors) {
  size_t n = logical.size();
  size_t total = static_cast<size_t>(product64(logical));
  std::vector<int> devices(total);
  std::vector<int> index(n, 0);
  for (size_t flat = 0; flat < total; ++flat) {
    // index = the row-major multi-index of `flat` (advanced incrementally below).
    Dims coord{0, 0, 0};
    std::vector<Dims> digits(n);
    for (size_t l = 0; l < n; ++l) {
      int rest = index[l];
      for (size_t p = 3; p-- > 0;) { // x major: z is the least significant digit
        digits[l][p] = rest % factors[l][p];
        rest /= factors[l][p];
      }
    }
    for (size_t p = 0; p < 3; ++p) {
      for (size_t l = 0; l < n; ++l) { // lower logical axis major
        coord[p] = coord[p] * factors[l][p] + digits[l][p];
      }
    }
    devices[flat] = coord[0] + physical[0] * (coord[1] + physical[1] * coord[2]);
    for (size_t l = n; l-- > 0;) {
      if (++index[l] < logical[l]) {
        break;
      }
      index[l] = 0;
    }
  }
  return devices;
}

Expected<DeviceMesh> create_device_mesh(const AcceleratorType& slice, const MeshRequest& request) {
  ErrorList problems;
  const auto& shape = request.shape;
  std::string shape_text = join_ints(shape, ",");
  if (shape.empty()) {
    problems.add(ErrorKind::usage, "the mesh shape is empty: give one size per axis, e.g. 4,16");
  }
  bool sizes_ok = true;
  for (int s : shape) {
    if (s < 1) {
      sizes_ok = false;
    }
  }
  if (!sizes_ok) {
    problems.add(ErrorKind::usage,
                 "mesh shape '" + shape_text + "' is not valid: every size must be at least 1");
  }
  if (!shape.empty() && sizes_ok && product64(shape) != slice.chips) {
    problems.add(ErrorKind::usage,
                 "mesh shape '" + shape_text + "' has " + count_text(product64(shape)) +
                     " devices but " + slice.name + " (" + slice.topology() + ") has " +
                     std::to_string(slice.chips) + " (one per chip" +
                     (request.num_slices > 1 ? " in each slice" : "") +
                     "): make the sizes multiply to " + std::to_string(slice.chips));
  }
  if (request.num_slices < 1) {
    problems.add(ErrorKind::usage, "the number of slices '" + std::to_string(request.num_slices) +
                                       "' is not valid: it must be at least 1");
  }
  std::vector<std::string> names = request.axis_names;
  if (names.empty()) {
    for (size_t i = 0; i < shape.size(); ++i) {
      names.push_back("axis" + std::to_string(i));
    }
  } else if (names.size() != shape.size()) {
    problems.add(ErrorKind::usage, "axis names '" + util::join(names, ",") + "' do not match '" +
                                       shape_text + "': give one name per axis (" +
                                       std::to_string(names.size()) + " names for " +
                                       std::to_string(shape.size()) + " sizes)");
  } else {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i].empty()) {
        problems.add(ErrorKind::usage,
                     "axis names '" + util::join(names, ",") + "' are not valid: a name is empty");
      }
      for (size_t j = 0; j < i; ++j) {
        if (!names[i].empty() && names[i] == names[j]) {
          problems.add(ErrorKind::usage,
                       "axis name '" + names[i] + "' is used twice: every axis needs its own name");
        }
      }
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }

  DeviceMesh mesh;
  std::vector<int> local;
  std::vector<AxisFactors> factors;
  auto ring = v5e_ring_order(slice, shape);
  if (!ring.empty()) {
    local = ring;
    mesh.ring_order = true;
  } else {
    factors = assign_whole_axes(slice.dims, shape);
    if (factors.empty()) {
      factors = assign_split_axes(slice.dims, shape);
    }
    if (factors.empty()) {
      return usage_error("mesh shape '" + shape_text + "' cannot be laid out on " + slice.name +
                         " (" + slice.topology() + "): its sizes do not factor onto the torus");
    }
    local = devices_from_factors(slice.dims, shape, factors);
  }

  mesh.shape = shape;
  mesh.shape[0] *= request.num_slices;
  for (int s = 0; s < request.num_slices; ++s) {
    for (int d : local) {
      mesh.devices.push_back(s * slice.chips + d);
    }
  }
  for (size_t l = 0; l < shape.size(); ++l) {
    MeshAxis axis;
    axis.name = names[l];
    axis.size = mesh.shape[l];
    axis.dcn = l == 0 ? request.num_slices : 1;
    for (size_t p = 0; p < 3; ++p) {
      int f = ring.empty() ? factors[l][p] : (shape[l] > 1 && p < 2 ? slice.dims[p] : 1);
      if (f > 1) {
        axis.physical_axes.push_back(static_cast<int>(p));
        axis.physical_factors.push_back(f);
        axis.split = axis.split || f < slice.dims[p];
      }
    }
    mesh.axes.push_back(std::move(axis));
  }
  return mesh;
}

} // namespace tpuctl::topology
