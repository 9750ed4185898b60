// tpuctl kernel simulate: placeholder until the cycle model lands.
#include "cli/commands.hpp"

namespace tpuctl::cli {
void setup_kernel_simulate(CLI::App&, Registry&) {}
} // namespace tpuctl::cli
