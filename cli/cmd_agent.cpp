// tpuctl agent: the commands that run on a worker, shipped there by tpuctl itself. Hidden from
// `tpuctl --help` because users do not call them directly; their json output is an interface
// between the controller and the agent, so its field names are stable.
#include "agent/probe.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"

namespace tpuctl::cli {

namespace {

Json facts_json(const agent::HostFacts& f) {
  return Json{{"version", f.version},
              {"hostname", f.hostname},
              {"os", f.os},
              {"kernel", f.kernel},
              {"arch", f.arch},
              {"cores", f.cores},
              {"memory_total_mib", f.memory_total_mib},
              {"memory_available_mib", f.memory_available_mib},
              {"simd", f.simd},
              {"workdir", f.workdir},
              {"disk_free_mib", f.disk_free_mib},
              {"clock_unix_ms", f.clock_unix_ms}};
}

} // namespace

void setup_agent(CLI::App& group, Registry& registry) {
  group.require_subcommand(1);
  auto workdir = std::make_shared<std::string>(".");
  CLI::App* probe =
      registry.add(group, "probe", "print this host's facts (cores, memory, SIMD, disk, clock)",
                   [workdir](Context& ctx) -> Expected<int> {
                     emit(ctx, facts_json(agent::probe_local_host(*workdir)));
                     return 0;
                   });
  probe->add_option("--workdir", *workdir, "directory whose free space is reported")
      ->type_name("DIR");
}

} // namespace tpuctl::cli
