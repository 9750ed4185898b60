// tpuctl kernel: placeholder until the kernels module lands.
#include "cli/commands.hpp"

namespace tpuctl::cli {
void setup_kernel(CLI::App& group, Registry&) { group.require_subcommand(1); }
} // namespace tpuctl::cli
