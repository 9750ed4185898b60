// gcloud's discovery commands, with gcloud's names and columns: `accelerator-types list|describe`
// (also under `tpu-vm`), `topologies list`, and `locations list|describe` (a location is a pool:
// where capacity lives, as a zone is in Google Cloud). Offline but for locations.
#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/output.hpp"
#include "cli/state_access.hpp"
#include "provision/pool/pools.hpp"
#include "topology/accelerator_type.hpp"

namespace tpuctl::cli {

namespace {

// The accelerator config type gcloud shows for a generation: V4, V5LITE_POD, V5P, TPU7X...
std::string config_type(const topology::Generation& gen) {
  if (gen.name == "v5e") {
    return "V5LITE_POD";
  }
  std::string out;
  for (char c : gen.name) {
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

// gcloud's AcceleratorType resource: name, type, acceleratorConfigs.
Json accelerator_type_json(const topology::AcceleratorType& t) {
  return Json{{"name", t.name},
              {"type", t.name},
              {"accelerator_configs", Json::array({Json{{"type", config_type(*t.generation)},
                                                        {"topology", t.topology()}}})}};
}

void add_accelerator_types(CLI::App& group, Registry& registry) {
  registry.add(group, "list", "accelerator types (gcloud's names; 'tpuctl topology list' has more)",
               [](Context& ctx) -> Expected<int> {
                 Json rows = Json::array();
                 for (const auto& t : topology::catalogue()) {
                   rows.push_back(accelerator_type_json(t));
                 }
                 TPUCTL_TRY(emit_list(ctx, rows, {{"accelerator_type", "type"}}));
                 return 0;
               });
  auto type = std::make_shared<std::string>();
  CLI::App* d =
      registry.add(group, "describe", "one accelerator type: its config type and topology",
                   [type](Context& ctx) -> Expected<int> {
                     TPUCTL_TRY_ASSIGN(auto t, topology::parse_accelerator_type(*type));
                     Json doc = accelerator_type_json(t);
                     TPUCTL_TRY(emit(ctx, doc, [&](std::ostream& os, const Json&) {
                       os << "name: " << t.name << "\ntype: " << t.name
                          << "\naccelerator_configs:\n"
                          << "- topology: " << t.topology()
                          << "\n  type: " << config_type(*t.generation) << "\n";
                     }));
                     return 0;
                   });
  d->add_option("ACCELERATOR_TYPE", *type, "e.g. v5litepod-16, v4-32, v5p-4x4x4")->required();
}

} // namespace

void setup_accelerator_types(CLI::App& group, Registry& registry) {
  add_accelerator_types(group, registry);
}

void setup_topologies(CLI::App& group, Registry& registry) {
  registry.add(group, "list", "every (accelerator type, topology) pair, as gcloud lists them",
               [](Context& ctx) -> Expected<int> {
                 Json rows = Json::array();
                 for (const auto& t : topology::catalogue()) {
                   rows.push_back(Json{{"topology", t.topology()},
                                       {"type", config_type(*t.generation)},
                                       {"accelerator_type", t.name}});
                 }
                 TPUCTL_TRY(emit_list(ctx, rows,
                                      {{"topology", "topology"},
                                       {"type", "type"},
                                       {"accelerator_type", "accelerator_type"}}));
                 return 0;
               });
}

void setup_locations(CLI::App& group, Registry& registry) {
  auto location_json = [](const provision::PoolInfo& p) {
    return Json{{"location", p.name},
                {"location_name",
                 "pool " + p.name + " (" + std::string(p.layout.generation->name) + ", " +
                     topology::format_dims(p.layout.shape, p.layout.generation->rank) + " chips)"}};
  };
  registry.add(group, "list", "the pools, which are tpuctl's zones (--zone NAME selects one)",
               [location_json](Context& ctx) -> Expected<int> {
                 TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
                 TPUCTL_TRY_ASSIGN(auto pools, provision::list_pools(*store));
                 Json rows = Json::array();
                 for (const auto& p : pools) {
                   rows.push_back(location_json(p));
                 }
                 TPUCTL_TRY(emit_list(
                     ctx, rows, {{"location", "location"}, {"location_name", "location_name"}}));
                 return 0;
               });
  auto name = std::make_shared<std::string>();
  CLI::App* d =
      registry.add(group, "describe", "one location: a pool",
                   [name, location_json](Context& ctx) -> Expected<int> {
                     TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
                     TPUCTL_TRY_ASSIGN(auto pool, provision::resolve_pool_name(*store, *name));
                     TPUCTL_TRY_ASSIGN(auto view, provision::load_pool(*store, pool));
                     TPUCTL_TRY(emit(ctx, location_json(view.info)));
                     return 0;
                   });
  d->add_option("LOCATION", *name, "a pool's name")->required();
}

void setup_tpu_vm_accelerator_types(CLI::App& tpu_vm, Registry& registry) {
  CLI::App* group = tpu_vm.add_subcommand(
      "accelerator-types", "accelerator types (the same as 'tpuctl accelerator-types')");
  add_accelerator_types(*group, registry);
}

} // namespace tpuctl::cli
