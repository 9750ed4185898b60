// tpuctl agent: the commands that run on a worker, shipped there by tpuctl itself. Hidden from
// `tpuctl --help` because users do not call them directly; their json output is an interface
// between the controller and the agent, so its field names are stable.
#include <cstdlib>

#include "agent/preflight.hpp"
#include "agent/probe.hpp"
#include "agent/supervise.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "provision/preflight_report.hpp"
#include "util/strings.hpp"

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

struct PreflightFlags {
  int worker = 0;
  std::string hostnames;
  int port = 8476;
  std::string timeout = "20s";
  bool kernel_check = false;
};

struct SuperviseFlags {
  agent::SuperviseOptions options;
  std::string heartbeat = "2s";
  std::string kill_grace = "2s";
};

// `agent supervise` (start a workload's command, detached) and `agent supervise-status`.
void add_supervise(CLI::App& group, Registry& registry) {
  auto sf = std::make_shared<SuperviseFlags>();
  CLI::App* supervise = registry.add(
      group, "supervise",
      "run a workload's command detached: own process group, log, exit status, heartbeat",
      [sf](Context& ctx) -> Expected<int> {
        agent::SuperviseOptions o = sf->options;
        TPUCTL_TRY_ASSIGN(o.heartbeat_interval,
                          util::parse_duration(sf->heartbeat, "--heartbeat-interval"));
        TPUCTL_TRY_ASSIGN(o.kill_grace, util::parse_duration(sf->kill_grace, "--kill-grace"));
        TPUCTL_TRY_ASSIGN(auto started, agent::start_supervised(o));
        emit(ctx, Json{{"supervisor_pid", started.supervisor_pid},
                       {"pid", started.pid},
                       {"dir", started.dir},
                       {"attempt", o.attempt}});
        return 0;
      });
  supervise->add_option("--dir", sf->options.dir, "the workload's directory on this worker")
      ->required()
      ->type_name("DIR");
  supervise->add_option("--command", sf->options.command, "run by /bin/sh -c")
      ->required()
      ->type_name("CMD");
  supervise->add_option("--attempt", sf->options.attempt, "attempt number (0 = first run)")
      ->type_name("N");
  supervise->add_option("--heartbeat-interval", sf->heartbeat, "heartbeat period (default 2s)")
      ->type_name("D");
  supervise->add_option("--kill-grace", sf->kill_grace, "TERM -> KILL delay on stop (default 2s)")
      ->type_name("D");

  auto dir = std::make_shared<std::string>();
  CLI::App* status = registry.add(group, "supervise-status",
                                  "print a supervised command's status, heartbeat and liveness",
                                  [dir](Context& ctx) -> Expected<int> {
                                    emit(ctx, agent::supervised_status(*dir));
                                    return 0;
                                  });
  status->add_option("--dir", *dir, "the workload's directory on this worker")
      ->required()
      ->type_name("DIR");
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

  auto pf = std::make_shared<PreflightFlags>();
  CLI::App* preflight = registry.add(
      group, "preflight",
      "all-pairs check with the slice's other workers: listen, reach every peer, kernel check",
      [pf](Context& ctx) -> Expected<int> {
        agent::PreflightOptions o;
        o.worker = pf->worker;
        o.hostnames = util::split(pf->hostnames, ',');
        o.port = pf->port;
        TPUCTL_TRY_ASSIGN(o.timeout, util::parse_duration(pf->timeout, "--timeout"));
        o.kernel_check = pf->kernel_check;
        const char* corrupt = std::getenv("TPUCTL_DEBUG_CORRUPT_RESULT");
        o.corrupt_kernel = corrupt && std::string(corrupt) == "1";
        TPUCTL_TRY_ASSIGN(auto result, agent::run_preflight(o));
        emit(ctx, provision::preflight_to_json(result));
        return result.ok() ? 0 : 1;
      });
  preflight->add_option("--worker", pf->worker, "this worker's index in --hostnames")
      ->required()
      ->type_name("N");
  preflight
      ->add_option("--hostnames", pf->hostnames, "every worker's address, worker order, comma list")
      ->required()
      ->type_name("A,B,...");
  preflight->add_option("--port", pf->port, "port every worker listens on (default 8476)")
      ->type_name("PORT");
  preflight->add_option("--timeout", pf->timeout, "give up on unreachable peers after D (20s)")
      ->type_name("D");
  preflight->add_flag("--kernel-check", pf->kernel_check,
                      "also run a 64x64x64 int8 gemm and compare it to the reference");

  add_supervise(group, registry);
}

} // namespace tpuctl::cli
