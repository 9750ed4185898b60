// tpuctl topology: placeholder until the topology module lands.
#include "cli/commands.hpp"

namespace tpuctl::cli {
void setup_topology(CLI::App& group, Registry&) {
  group.require_subcommand(1);
}
} // namespace tpuctl::cli
