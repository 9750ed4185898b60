// tpuctl topology: the accelerator-type catalogue, one slice's geometry, and JAX-style device
// meshes. Offline: everything comes from topology/, nothing touches a host or a cloud.
//
//   tpuctl topology list [--generation G]
//   tpuctl topology describe TYPE | --type GEN --topology AxB[xC]
//   tpuctl topology mesh TYPE --shape 4,64 [--axes data,model] [--num-slices N]
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/values.hpp"
#include "topology/accelerator_type.hpp"
#include "topology/mesh.hpp"
#include "topology/torus.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

using topology::AcceleratorType;

// The slice a command is about: TYPE, or gcloud's --type GEN --topology AxB[xC].
struct SliceArgs {
  std::string type;
  std::string generation;
  std::string topology;
};

void add_slice_args(CLI::App& cmd, SliceArgs& args) {
  cmd.add_option("TYPE", args.type,
                 "accelerator type, e.g. v5p-128, v5p-4x4x4, v5litepod-16 or tpu7x-128")
      ->type_name("");
  cmd.add_option("--type", args.generation,
                 "generation, e.g. v5p or v5litepod; with --topology, instead of TYPE")
      ->type_name("GEN");
  cmd.add_option("--topology", args.topology, "chip grid AxB or AxBxC, e.g. 4x4x4; with --type")
      ->type_name("TOPOLOGY");
}

Expected<AcceleratorType> resolve_slice(const SliceArgs& a) {
  const char* forms = "give TYPE (e.g. v5p-128) or --type GEN --topology AxBxC (e.g. --type v5p "
                      "--topology 4x4x4)";
  if (!a.type.empty()) {
    if (!a.generation.empty() || !a.topology.empty()) {
      return usage_error("accelerator type '" + a.type + "' and --type/--topology were both " +
                         "given: " + forms + ", not both");
    }
    return topology::parse_accelerator_type(a.type);
  }
  if (a.generation.empty() && a.topology.empty()) {
    return usage_error(std::string("no accelerator type: ") + forms);
  }
  if (a.generation.empty()) {
    return usage_error("--topology '" + a.topology + "' needs --type GEN (e.g. --type v5p)");
  }
  if (a.topology.empty()) {
    return usage_error("--type '" + a.generation +
                       "' needs --topology AxB[xC] (e.g. --topology 4x4x4); or give the whole " +
                       "type as TYPE, e.g. v5p-128");
  }
  return topology::accelerator_type_from_topology(a.generation, a.topology);
}

double round3(double v) {
  return std::round(v * 1000) / 1000;
}

const char* axis_name(int p) {
  static const char* k_names[] = {"x", "y", "z"};
  return k_names[p];
}

Json describe_json(const AcceleratorType& t) {
  topology::Torus torus = topology::torus_of(t);
  const auto& gen = *t.generation;
  return Json{{"type", t.name},
              {"generation", std::string(gen.name)},
              {"chips", t.chips},
              {"cores", t.cores},
              {"hosts", t.hosts},
              {"chips_per_host", t.chips_per_host},
              {"topology", t.topology()},
              {"wrap", Json::array({t.wrap[0], t.wrap[1], t.wrap[2]})},
              {"host_bounds", topology::format_bounds(t.host_bounds)},
              {"chips_per_host_bounds", topology::format_bounds(t.chips_per_host_bounds)},
              {"diameter", torus.diameter()},
              {"mean_hops", round3(torus.mean_hops())},
              {"bisection_links", torus.bisection_links()},
              {"bisection_gbytes_per_s", round3(topology::bisection_gbytes_per_s(t))},
              {"peak_bf16_tflops", round3(gen.peak_bf16_tflops * t.chips)},
              {"hbm_gib", round3(gen.hbm_gib * t.chips)}};
}

std::string pad_left(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

// A grid of numbers, `cols` per row, right-aligned to `width`, indented by two spaces.
void print_grid(std::ostream& os, const std::vector<int>& values, size_t cols, size_t width) {
  for (size_t i = 0; i < values.size(); ++i) {
    os << (i % cols == 0 ? "  " : " ") << pad_left(std::to_string(values[i]), width);
    if (i % cols == cols - 1) {
      os << "\n";
    }
  }
}

constexpr int k_max_drawn_hosts = 256;

// The worker ids laid out by host position: x across, y down, one block per z.
void print_host_grid(std::ostream& os, const AcceleratorType& t) {
  const auto& h = t.host_bounds;
  if (t.hosts > k_max_drawn_hosts) {
    os << "\nworkers: " << t.hosts << " (grid " << topology::format_bounds(h)
       << ", not drawn above " << k_max_drawn_hosts << ")\n";
    return;
  }
  os << "\nworkers by host position (x across, y down" << (t.rank() == 3 ? ", a block per z" : "")
     << "; " << topology::format_dims(t.chips_per_host_bounds, t.rank()) << " chips each):\n";
  size_t width = std::to_string(t.hosts - 1).size();
  for (int z = 0; z < h[2]; ++z) {
    if (t.rank() == 3) {
      os << "z=" << z << ":\n";
    }
    std::vector<int> ids;
    for (int w = z * h[0] * h[1]; w < (z + 1) * h[0] * h[1]; ++w) {
      ids.push_back(w);
    }
    print_grid(os, ids, static_cast<size_t>(h[0]), width);
  }
}

void print_key_values(std::ostream& os, const Json& data) {
  size_t width = 0;
  for (auto it = data.begin(); it != data.end(); ++it) {
    width = std::max(width, it.key().size());
  }
  for (auto it = data.begin(); it != data.end(); ++it) {
    os << it.key() << ":" << std::string(width - it.key().size() + 1, ' ') << cell_text(it.value())
       << "\n";
  }
}

// ---- list ----------------------------------------------------------------------------------

Expected<int> run_list(Context& ctx, const std::string& generation) {
  std::vector<AcceleratorType> types;
  if (generation.empty()) {
    types = topology::catalogue();
  } else {
    TPUCTL_TRY_ASSIGN(const topology::Generation* gen, topology::find_generation(generation));
    types = topology::catalogue(*gen);
  }
  Json rows = Json::array();
  for (const auto& t : types) {
    rows.push_back(describe_json(t));
  }
  TPUCTL_TRY(emit_list(ctx, rows,
                       {{"type", "type"},
                        {"generation", "generation"},
                        {"chips", "chips"},
                        {"cores", "cores"},
                        {"hosts", "hosts"},
                        {"topology", "topology"},
                        {"wrap", "wrap"}}));
  return 0;
}

// ---- describe ------------------------------------------------------------------------------

Expected<int> run_describe(Context& ctx, const SliceArgs& args) {
  TPUCTL_TRY_ASSIGN(AcceleratorType t, resolve_slice(args));
  TPUCTL_TRY(emit(ctx, describe_json(t), [&t](std::ostream& os, const Json& data) {
    print_key_values(os, data);
    print_host_grid(os, t);
  }));
  return 0;
}

// ---- mesh ----------------------------------------------------------------------------------

struct MeshArgs {
  SliceArgs slice;
  std::string shape;
  std::string axes;
  std::string num_slices = "1";
};

// The flat, row-major `devices` as nested arrays of `shape`.
Json nest(const std::vector<int>& devices, const std::vector<int>& shape, size_t axis,
          size_t& next) {
  Json out = Json::array();
  for (int i = 0; i < shape[axis]; ++i) {
    if (axis + 1 == shape.size()) {
      out.push_back(devices[next++]);
    } else {
      out.push_back(nest(devices, shape, axis + 1, next));
    }
  }
  return out;
}

std::string physical_text(const topology::MeshAxis& axis, const AcceleratorType& t) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < axis.physical_axes.size(); ++i) {
    int p = axis.physical_axes[i];
    std::string part = axis_name(p);
    int whole = t.dims[static_cast<size_t>(p)];
    if (i < axis.physical_factors.size() && axis.physical_factors[i] != whole) {
      part += "(" + std::to_string(axis.physical_factors[i]) + " of " + std::to_string(whole) + ")";
    }
    parts.push_back(part);
  }
  return parts.empty() ? "-" : util::join(parts, ",");
}

void print_mesh(std::ostream& os, const topology::DeviceMesh& mesh, const AcceleratorType& t,
                int num_slices) {
  std::vector<std::string> shape_parts;
  for (int s : mesh.shape) {
    shape_parts.push_back(std::to_string(s));
  }
  os << "type:   " << t.name << " (" << t.topology() << ")"
     << (num_slices > 1 ? " x " + std::to_string(num_slices) + " slices over DCN" : "") << "\n";
  os << "shape:  " << util::join(shape_parts, ",") << "\n";
  if (mesh.ring_order) {
    os << "order:  v5e ring (JAX's special case for a 2x2 or a 16-chip 4x4 axis)\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& a : mesh.axes) {
    rows.push_back({a.name, std::to_string(a.size), physical_text(a, t), a.split ? "yes" : "no",
                    std::to_string(a.dcn)});
  }
  os << "\n" << render_table({"AXIS", "SIZE", "PHYSICAL", "SPLIT", "DCN"}, rows);

  const auto& shape = mesh.shape;
  size_t n = shape.size();
  size_t cols = static_cast<size_t>(shape[n - 1]);
  size_t rows_per_block = n >= 2 ? static_cast<size_t>(shape[n - 2]) : 1;
  size_t block = cols * rows_per_block;
  int largest = *std::max_element(mesh.devices.begin(), mesh.devices.end());
  size_t width = std::to_string(largest).size();
  os << "\ndevices";
  if (n == 1) {
    os << " (" << mesh.axes[0].name << " across):\n";
  } else {
    os << " (" << mesh.axes[n - 2].name << " down, " << mesh.axes[n - 1].name << " across"
       << (n > 2 ? ", one block per leading index" : "") << "):\n";
  }
  for (size_t start = 0; start < mesh.devices.size(); start += block) {
    if (n > 2) {
      std::vector<std::string> lead;
      size_t rest = start / block;
      for (size_t i = n - 2; i-- > 0;) {
        lead.insert(lead.begin(),
                    mesh.axes[i].name + "=" + std::to_string(rest % static_cast<size_t>(shape[i])));
        rest /= static_cast<size_t>(shape[i]);
      }
      os << "[" << util::join(lead, ", ") << "]\n";
    }
    std::vector<int> part(mesh.devices.begin() + static_cast<std::ptrdiff_t>(start),
                          mesh.devices.begin() + static_cast<std::ptrdiff_t>(start + block));
    print_grid(os, part, cols, width);
  }
}

Expected<int> run_mesh(Context& ctx, const MeshArgs& args) {
  ErrorList problems;
  auto slice = resolve_slice(args.slice);
  if (!slice) {
    problems.add(slice.error());
  }
  topology::MeshRequest request;
  auto shape = util::parse_int_list(args.shape, "--shape", 1, 1 << 20);
  if (!shape) {
    problems.add(shape.error());
  } else {
    for (int64_t s : *shape) {
      request.shape.push_back(static_cast<int>(s));
    }
  }
  if (!args.axes.empty()) {
    request.axis_names = util::split(args.axes, ',');
  }
  auto slices = util::parse_int(args.num_slices, "--num-slices", 1, 4096);
  if (!slices) {
    problems.add(slices.error());
  } else {
    request.num_slices = static_cast<int>(*slices);
  }
  // Lay the mesh out whenever the slice and shape parsed, so its problems join the others.
  std::optional<topology::DeviceMesh> laid_out;
  if (slice && shape) {
    auto m = topology::create_device_mesh(*slice, request);
    if (m) {
      laid_out = std::move(*m);
    } else {
      problems.add(m.error());
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  const topology::DeviceMesh& mesh = *laid_out;

  Json axes = Json::array();
  for (const auto& a : mesh.axes) {
    Json physical = Json::array();
    for (int p : a.physical_axes) {
      physical.push_back(axis_name(p));
    }
    axes.push_back(Json{{"name", a.name},
                        {"size", a.size},
                        {"physical_axes", physical},
                        {"split", a.split},
                        {"dcn", a.dcn}});
  }
  size_t next = 0;
  Json data{{"type", slice->name},
            {"shape", mesh.shape},
            {"axes", axes},
            {"devices", nest(mesh.devices, mesh.shape, 0, next)}};
  TPUCTL_TRY(emit(ctx, data, [&](std::ostream& os, const Json&) {
    print_mesh(os, mesh, *slice, request.num_slices);
  }));
  return 0;
}

} // namespace

void setup_topology(CLI::App& group, Registry& registry) {
  auto list_gen = std::make_shared<std::string>();
  CLI::App* list = registry.add(group, "list", "the accelerator-type catalogue",
                                [list_gen](Context& ctx) { return run_list(ctx, *list_gen); });
  list->add_option("--generation", *list_gen,
                   "only this generation: v2, v3, v4, v5e (v5litepod), v5p, v6e or tpu7x")
      ->type_name("GEN");

  auto describe_args = std::make_shared<SliceArgs>();
  CLI::App* describe = registry.add(
      group, "describe", "one slice: chips, hosts, torus, host grid and network figures",
      [describe_args](Context& ctx) { return run_describe(ctx, *describe_args); });
  add_slice_args(*describe, *describe_args);
  describe->footer("peak_bf16_tflops and hbm_gib are totals for the slice; "
                   "bisection_gbytes_per_s is one direction.\n" +
                   describe->get_footer());

  auto mesh_args = std::make_shared<MeshArgs>();
  CLI::App* mesh = registry.add(
      group, "mesh", "lay a logical device mesh over a slice the way JAX's mesh_utils does",
      [mesh_args](Context& ctx) { return run_mesh(ctx, *mesh_args); });
  add_slice_args(*mesh, mesh_args->slice);
  mesh->add_option("--shape", mesh_args->shape,
                   "one slice's logical shape, least to most network-intensive, e.g. 4,64")
      ->type_name("N,N...")
      ->required();
  mesh->add_option("--axes", mesh_args->axes, "axis names, e.g. data,model (default axis0,...)")
      ->type_name("NAME,...");
  mesh->add_option("--num-slices", mesh_args->num_slices,
                   "slices joined over DCN, stacked on the first axis (default 1)")
      ->type_name("N")
      ->check(count_in(1, 1024));
}

} // namespace tpuctl::cli
