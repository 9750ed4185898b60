// The command table: one row per top-level command (group). See commands.cpp for how to add one.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "cli/registry.hpp"

namespace tpuctl::cli {

struct CommandGroup {
  const char* name;
  const char* summary;
  // Declares the group's flags and leaf commands on `group` and binds their runners.
  void (*setup)(CLI::App& group, Registry& registry);
  std::vector<std::string> aliases;
  bool hidden = false;
};

const std::vector<CommandGroup>& command_table();

// One setup function per cmd_<group>.cpp.
void setup_version(CLI::App& group, Registry& registry);
void setup_topology(CLI::App& group, Registry& registry);
void setup_kernel(CLI::App& group, Registry& registry);
void setup_agent(CLI::App& group, Registry& registry);
void setup_pool(CLI::App& group, Registry& registry);
void setup_queued_resources(CLI::App& group, Registry& registry);
void setup_tpu_vm(CLI::App& group, Registry& registry);
void setup_controller(CLI::App& group, Registry& registry);
void setup_events(CLI::App& group, Registry& registry);
void setup_usage(CLI::App& group, Registry& registry);
void setup_info(CLI::App& group, Registry& registry);
void setup_ssh(CLI::App& group, Registry& registry);
void setup_env(CLI::App& group, Registry& registry);
void setup_scp(CLI::App& group, Registry& registry);
void setup_state(CLI::App& group, Registry& registry);
void setup_cluster(CLI::App& group, Registry& registry);
void setup_workload(CLI::App& group, Registry& registry);
void setup_completion(CLI::App& group, Registry& registry);
void setup_config(CLI::App& group, Registry& registry);
// gcloud's discovery groups (cmd_gcloud_discovery.cpp).
void setup_accelerator_types(CLI::App& group, Registry& registry);
void setup_topologies(CLI::App& group, Registry& registry);
void setup_locations(CLI::App& group, Registry& registry);
// gcloud's `ssh` and `scp` under the queued-resources and tpu-vm groups (cmd_slice.cpp).
void setup_slice_ssh_scp(CLI::App& group, Registry& registry, bool queued_resources);
// `queued-resources create` (tpu_vm false) or `tpu-vm create NODE` (cmd_qr.cpp).
void add_qr_create(CLI::App& group, Registry& registry, bool tpu_vm);
// `tpu-vm accelerator-types`, under the tpu-vm group.
void setup_tpu_vm_accelerator_types(CLI::App& tpu_vm, Registry& registry);

// Hidden entry points handled before parsing (cli/app.cpp), given the whole command table:
// `tpuctl __complete -- WORDS...` (cmd_completion.cpp) and `tpuctl __man DIR` (man_page.cpp).
int run_complete(const CLI::App& root, const std::vector<std::string>& args, std::ostream& out);
int run_man(const CLI::App& root, const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err);

} // namespace tpuctl::cli
