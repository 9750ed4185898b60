// tpuctl kernel run / bench: placeholder until the fast GEMM lands.
#include "cli/commands.hpp"

namespace tpuctl::cli {
void setup_kernel_run(CLI::App&, Registry&) {}
} // namespace tpuctl::cli
