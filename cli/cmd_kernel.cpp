// tpuctl kernel: the systolic compute kernel. Its commands live in two files:
// cmd_kernel_simulate.cpp (the MXU cycle model) and cmd_kernel_run.cpp (the fast CPU GEMM).
#include "cli/commands.hpp"

namespace tpuctl::cli {

void setup_kernel_simulate(CLI::App& group, Registry& registry);
void setup_kernel_run(CLI::App& group, Registry& registry);

void setup_kernel(CLI::App& group, Registry& registry) {
  setup_kernel_simulate(group, registry);
  setup_kernel_run(group, registry);
}

} // namespace tpuctl::cli
