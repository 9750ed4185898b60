// Parsing and validating accelerator types. The rules (topology.md section a.3/a.4):
//
//  * 2D generations (v2, v3, v5e, v6e) have a fixed list of topologies; an axis wraps only when
//    it spans the whole pod along that axis (16 on v2/v5e/v6e, 32 on v3).
//  * 3D generations (v4, v5p, tpu7x) are built from 4x4x4 cubes joined by optical switches.
//    Below one cube only 2x2x1, 2x2x2, 2x2x4 and 2x4x4 exist (and 1x1x1 on tpu7x), without
//    wraparound. From one cube up every dimension is a multiple of 4, the cube count is at most
//    the generation's budget, and all three axes wrap. v5p and tpu7x write A <= B <= C.
//  * Hosts: a slice of up to max_single_host_chips chips is one VM holding the whole grid;
//    bigger slices use VMs of 2x2x1 chips. host_bounds = dims / chips_per_host_bounds.
//  * The bare number of a multi-cube size names the most cube-like shape: among cube grids
//    a <= b <= c with a*b*c = cubes, the smallest largest dimension, then the smallest middle one.
#include "topology/accelerator_type.hpp"

#include <algorithm>
#include <optional>

#include "util/strings.hpp"

namespace tpuctl::topology {

namespace {

constexpr int k_cube = 4; // chips along each edge of a cube
// Bigger than any real slice's dimension (576 = 144 cubes in a row), small enough that the product
// of three fits an int.
constexpr int k_max_dim = 1024;

int product(const Dims& d) {
  return d[0] * d[1] * d[2];
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A whole number of at most 9 digits, or nullopt.
std::optional<int> small_number(std::string_view s) {
  if (!is_digits(s) || s.size() > 9) {
    return std::nullopt;
  }
  int v = 0;
  for (char c : s) {
    v = v * 10 + (c - '0');
  }
  return v;
}

std::vector<Dims> sub_cube_shapes(const Generation& gen) {
  std::vector<Dims> shapes;
  if (gen.single_chip) {
    shapes.push_back({1, 1, 1});
  }
  for (Dims d : {Dims{2, 2, 1}, Dims{2, 2, 2}, Dims{2, 2, 4}, Dims{2, 4, 4}}) {
    shapes.push_back(d);
  }
  return shapes;
}

std::string shapes_text(const std::vector<Dims>& shapes, int rank) {
  std::vector<std::string> parts;
  for (const auto& d : shapes) {
    parts.push_back(format_dims(d, rank));
  }
  return util::join(parts, ", ");
}

// "8, 16, 32, 64 or a multiple of 128 up to 12288": the valid numbers of the type's number form.
std::string valid_numbers_text(const Generation& gen) {
  std::vector<std::string> numbers;
  if (gen.rank == 2) {
    for (const auto& d : gen.topologies_2d) {
      numbers.push_back(std::to_string(gen.number_for_chips(product(d))));
    }
    std::string last = numbers.back();
    numbers.pop_back();
    return util::join(numbers, ", ") + " or " + last;
  }
  for (const auto& d : sub_cube_shapes(gen)) {
    numbers.push_back(std::to_string(gen.number_for_chips(product(d))));
  }
  int cube = gen.number_for_chips(k_cube * k_cube * k_cube);
  return util::join(numbers, ", ") + " or a multiple of " + std::to_string(cube) + " up to " +
         std::to_string(cube * gen.max_cubes);
}

// The most cube-like a <= b <= c (in cubes) with a*b*c == cubes.
Dims cube_like_grid(int cubes) {
  Dims best{1, 1, cubes};
  for (int a = 1; a * a * a <= cubes; ++a) {
    if (cubes % a != 0) {
      continue;
    }
    for (int b = a; a * b * b <= cubes; ++b) {
      if ((cubes / a) % b != 0) {
        continue;
      }
      int c = cubes / a / b;
      if (c < best[2] || (c == best[2] && b < best[1])) {
        best = {a, b, c};
      }
    }
  }
  return best;
}

// The chip grid of the number form: the chips of a 2D list entry, a sub-cube shape or the most
// cube-like multi-cube shape. nullopt (with `reason`) when `chips` has no shape.
std::optional<Dims> default_dims(const Generation& gen, int chips, std::string& reason) {
  if (gen.rank == 2) {
    for (const auto& d : gen.topologies_2d) {
      if (product(d) == chips) {
        return d;
      }
    }
    return std::nullopt;
  }
  for (const auto& d : sub_cube_shapes(gen)) {
    if (product(d) == chips) {
      return d;
    }
  }
  constexpr int cube_chips = k_cube * k_cube * k_cube;
  if (chips % cube_chips != 0) {
    return std::nullopt;
  }
  int cubes = chips / cube_chips;
  if (cubes > gen.max_cubes) {
    reason = "it needs " + std::to_string(cubes) + " cubes of 4x4x4 chips but a " +
             std::string(gen.name) + " slice has at most " + std::to_string(gen.max_cubes) + " (" +
             std::string(gen.type_prefix) + "-" +
             std::to_string(gen.number_for_chips(gen.max_cubes * cube_chips)) +
             "); use several slices (multislice) for more";
    return std::nullopt;
  }
  Dims grid = cube_like_grid(cubes);
  return Dims{grid[0] * k_cube, grid[1] * k_cube, grid[2] * k_cube};
}

// Every rule `dims` (of the given rank) breaks for `gen`, as reasons without a prefix.
std::vector<std::string> shape_problems(const Generation& gen, const Dims& dims, int rank) {
  std::vector<std::string> problems;
  std::string gen_name(gen.name);
  if (rank != gen.rank) {
    problems.push_back(gen.rank == 2
                           ? gen_name + " slices are 2D: write the topology as AxB (e.g. 4x4)"
                           : gen_name + " slices are 3D: write the topology as AxBxC (e.g. 4x4x4)");
    return problems;
  }
  if (gen.rank == 2) {
    auto listed = [&](const Dims& d) {
      return std::find(gen.topologies_2d.begin(), gen.topologies_2d.end(), d) !=
             gen.topologies_2d.end();
    };
    if (!listed(dims)) {
      std::string p =
          "a " + gen_name + " topology must be one of " + shapes_text(gen.topologies_2d, 2);
      Dims swapped{dims[1], dims[0], 1};
      if (listed(swapped)) {
        p += "; did you mean '" + format_dims(swapped, 2) + "'?";
      }
      problems.push_back(p);
    }
    return problems;
  }
  auto subs = sub_cube_shapes(gen);
  if (std::find(subs.begin(), subs.end(), dims) != subs.end()) {
    return problems;
  }
  bool multiples = std::all_of(dims.begin(), dims.end(), [](int d) { return d % k_cube == 0; });
  if (!multiples) {
    problems.push_back("every dimension must be a multiple of 4 above one cube; sub-cube shapes "
                       "are " +
                       shapes_text(subs, 3));
  }
  if (gen.nondecreasing && !(dims[0] <= dims[1] && dims[1] <= dims[2])) {
    Dims sorted = dims;
    std::sort(sorted.begin(), sorted.end());
    problems.push_back(gen_name + " dimensions must be non-decreasing: write it as " +
                       format_dims(sorted, 3));
  }
  if (multiples) {
    int cubes = product(dims) / (k_cube * k_cube * k_cube);
    if (cubes > gen.max_cubes) {
      problems.push_back("it uses " + std::to_string(cubes) + " cubes of 4x4x4 chips but a " +
                         gen_name + " slice has at most " + std::to_string(gen.max_cubes) +
                         "; use several slices (multislice) for more");
    }
  }
  return problems;
}

AcceleratorType build(const Generation& gen, const Dims& dims) {
  AcceleratorType t;
  t.generation = &gen;
  t.dims = dims;
  t.chips = product(dims);
  t.cores = t.chips * gen.cores_per_chip;
  t.name = std::string(gen.type_prefix) + "-" + std::to_string(gen.number_for_chips(t.chips));
  if (gen.rank == 2) {
    for (size_t a = 0; a < 2; ++a) {
      t.wrap[a] = dims[a] == gen.pod_dims[a];
    }
  } else {
    bool whole_cubes = std::all_of(dims.begin(), dims.end(), [](int d) { return d % k_cube == 0; });
    t.wrap = {whole_cubes, whole_cubes, whole_cubes};
  }
  t.chips_per_host_bounds = t.chips <= gen.max_single_host_chips ? dims : Dims{2, 2, 1};
  for (size_t a = 0; a < 3; ++a) {
    t.host_bounds[a] = dims[a] / t.chips_per_host_bounds[a];
  }
  t.chips_per_host = product(t.chips_per_host_bounds);
  t.hosts = product(t.host_bounds);
  return t;
}

Error collect(const std::string& prefix, const std::vector<std::string>& reasons) {
  ErrorList list;
  for (const auto& r : reasons) {
    list.add(ErrorKind::usage, prefix + r);
  }
  return list.combined();
}

const char* k_type_forms = "write GENERATION-SIZE or GENERATION-TOPOLOGY, e.g. v5p-128, "
                           "v5p-4x4x4 or v5litepod-16";

} // namespace

int AcceleratorType::cubes() const {
  if (rank() != 3 || wrap[0] == false) {
    return 0;
  }
  return chips / (k_cube * k_cube * k_cube);
}

Expected<ParsedTopology> parse_topology(std::string_view text) {
  auto parts = util::split(text, 'x');
  ParsedTopology out;
  bool ok = parts.size() == 2 || parts.size() == 3;
  for (size_t i = 0; ok && i < parts.size(); ++i) {
    auto n = small_number(parts[i]);
    if (!n || *n < 1 || *n > k_max_dim) {
      ok = false;
    } else {
      out.dims[i] = *n;
    }
  }
  if (!ok) {
    return usage_error("topology '" + std::string(text) +
                       "' is malformed: write AxB or AxBxC with whole numbers from 1 to " +
                       std::to_string(k_max_dim) + ", e.g. 4x4 or 4x4x4");
  }
  out.rank = static_cast<int>(parts.size());
  return out;
}

Expected<AcceleratorType> make_accelerator_type(const Generation& gen, const Dims& dims) {
  auto problems = shape_problems(gen, dims, gen.rank);
  if (!problems.empty()) {
    return collect("topology '" + format_dims(dims, gen.rank) + "' is not valid for " +
                       std::string(gen.name) + ": ",
                   problems);
  }
  return build(gen, dims);
}

Expected<AcceleratorType> parse_accelerator_type(std::string_view given) {
  std::string prefix = "accelerator type '" + std::string(given) + "' is not valid: ";
  const std::string lower = util::to_lower(given); // gcloud lower-cases types: V5P-128 is v5p-128
  const std::string_view text = lower;
  size_t dash = text.rfind('-');
  if (dash == std::string_view::npos || dash == 0) {
    return usage_error(prefix + k_type_forms);
  }
  std::string_view gen_text = text.substr(0, dash);
  std::string_view size = text.substr(dash + 1);
  ErrorList problems;
  const Generation* gen = nullptr;
  auto found = find_generation(gen_text);
  if (found) {
    gen = *found;
  } else if (auto near = generation_suggestion(gen_text); !near.empty() && dash + 1 < text.size()) {
    // The whole type, so it can be pasted: v7x-128 -> tpu7x-128.
    return usage_error(prefix + "unknown TPU generation '" + std::string(gen_text) +
                       "'; did you mean '" + near + std::string(text.substr(dash)) +
                       "'? (generations: " + known_generations_text() + ")");
  } else {
    problems.add(ErrorKind::usage, prefix + found.error().message);
  }
  if (size.empty()) {
    problems.add(ErrorKind::usage, prefix + "the size after '" + std::string(gen_text) +
                                       "-' is missing; " + k_type_forms);
    return problems.combined();
  }

  if (size.find('x') != std::string_view::npos) {
    auto topo = parse_topology(size);
    if (!topo) {
      problems.add(ErrorKind::usage, prefix + topo.error().message);
    }
    if (!problems.empty()) {
      return problems.combined();
    }
    auto reasons = shape_problems(*gen, topo->dims, topo->rank);
    if (!reasons.empty()) {
      return collect(prefix, reasons);
    }
    return build(*gen, topo->dims);
  }

  auto number = small_number(size);
  if (!number) {
    problems.add(ErrorKind::usage, prefix + "the size '" + std::string(size) +
                                       "' is neither a number nor a topology; " + k_type_forms);
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  std::string reason;
  int chips = gen->chips_for_number(*number);
  std::optional<Dims> dims;
  if (chips > 0) {
    dims = default_dims(*gen, chips, reason);
  }
  if (!dims) {
    if (reason.empty()) {
      reason = "the number after '" + std::string(gen->type_prefix) + "-' counts " +
               std::string(gen->number_unit());
      if (gen->type_number == TypeNumber::cores) {
        reason += " (" + std::to_string(gen->cores_per_chip) + " per chip)";
      }
      reason += " and must be " + valid_numbers_text(*gen) + "; or give the topology, e.g. " +
                std::string(gen->type_prefix) + "-" +
                (gen->rank == 2 ? std::string("4x4") : std::string("4x4x4"));
    }
    return usage_error(prefix + reason);
  }
  return build(*gen, *dims);
}

Expected<AcceleratorType> accelerator_type_from_topology(std::string_view generation,
                                                         std::string_view topology) {
  ErrorList problems;
  auto gen = find_generation(generation);
  if (!gen) {
    problems.add(gen.error());
  }
  auto topo = parse_topology(topology);
  if (!topo) {
    problems.add(topo.error());
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  auto reasons = shape_problems(**gen, topo->dims, topo->rank);
  if (!reasons.empty()) {
    return collect("topology '" + std::string(topology) + "' is not valid for " +
                       std::string((*gen)->name) + ": ",
                   reasons);
  }
  return build(**gen, topo->dims);
}

std::vector<AcceleratorType> catalogue(const Generation& gen) {
  std::vector<AcceleratorType> out;
  if (gen.rank == 2) {
    for (const auto& d : gen.topologies_2d) {
      out.push_back(build(gen, d));
    }
    return out;
  }
  for (const auto& d : sub_cube_shapes(gen)) {
    out.push_back(build(gen, d));
  }
  for (int cubes : gen.listed_cubes) {
    Dims grid = cube_like_grid(cubes);
    out.push_back(build(gen, {grid[0] * k_cube, grid[1] * k_cube, grid[2] * k_cube}));
  }
  return out;
}

std::vector<AcceleratorType> catalogue() {
  std::vector<AcceleratorType> out;
  for (const auto& g : generations()) {
    auto part = catalogue(g);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

} // namespace tpuctl::topology
