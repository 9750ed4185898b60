// THE command table of tpuctl.
//
// How to add a command group `foo`:
//   1. Write cli/cmd_foo.cpp with `void setup_foo(CLI::App& group, Registry& registry)`. It
//   declares
//      flags into an options struct (no work in CLI11 callbacks) and registers each leaf with
//      `registry.add(group, "leaf", "summary", runner)`; a runner returns Expected<int> and prints
//      its result only through cli/output.hpp. Declare setup_foo in commands.hpp.
//   2. Add one row below (name, one-line summary, setup function, aliases, hidden).
//   3. Add tests: tests/unit/cli/ for option handling, tests/integration/ through the binary, and a
//      golden `--help` in tests/golden/help/foo.txt (TPUCTL_UPDATE_GOLDEN=1 regenerates it).
//   4. Document it in README.md (usage) and, once man pages exist, man/tpuctl-foo.1.
// Global flags (--format, --quiet, ...) are defined once in app.cpp and reach every command.
#include "cli/commands.hpp"

namespace tpuctl::cli {

const std::vector<CommandGroup>& command_table() {
  static const std::vector<CommandGroup> k_table = {
      {"topology",
       "TPU accelerator types, torus geometry and device meshes (offline)",
       &setup_topology,
       {},
       false},
      {"pool",
       "the hosts tpuctl may use: create, add hosts, drain, check, local pools",
       &setup_pool,
       {},
       false},
      {"queued-resources",
       "request slices by accelerator type; queued, placed, provisioned (alias: qr)",
       &setup_queued_resources,
       {"qr"},
       false},
      {"tpu-vm",
       "the nodes of queued resources: create, list, describe, ssh, scp, delete",
       &setup_tpu_vm,
       {},
       false},
      {"accelerator-types",
       "gcloud's accelerator-types list|describe (offline)",
       &setup_accelerator_types,
       {},
       false},
      {"topologies",
       "gcloud's topologies list: every accelerator type and topology (offline)",
       &setup_topologies,
       {},
       false},
      {"locations",
       "gcloud's locations list|describe: the pools, which are tpuctl's zones",
       &setup_locations,
       {},
       false},
      {"ssh",
       "run a command on a slice's workers (--worker=all) with the worker environment",
       &setup_ssh,
       {},
       false},
      {"scp",
       "copy files to a slice's workers (--worker=all), sha256-verified",
       &setup_scp,
       {},
       false},
      {"env",
       "print the environment one worker of a slice gets (dotenv or json), offline",
       &setup_env,
       {},
       false},
      {"cluster",
       "xpk-style clusters: N slices of one type, created through a queued resource",
       &setup_cluster,
       {},
       false},
      {"workload",
       "run a command on every worker of a cluster at once, detached; logs, restarts",
       &setup_workload,
       {},
       false},
      {"controller",
       "carry a shared pool's requests and workloads on (elected leader on etcd)",
       &setup_controller,
       {},
       false},
      {"events",
       "the audit trail: who changed what, when, with what result (--watch to follow)",
       &setup_events,
       {},
       false},
      {"state",
       "where tpuctl keeps its state: info, and migrate from SQLite to a shared etcd",
       &setup_state,
       {},
       false},
      {"kernel",
       "the systolic compute kernel: MXU cycle model and fast CPU GEMM",
       &setup_kernel,
       {},
       false},
      {"agent",
       "what runs on each worker: host probe, preflight, SPMD programs",
       &setup_agent,
       {},
       true},
      {"config",
       "defaults for flags: pool, state URL, format, SSH user, key, batch size, host keys",
       &setup_config,
       {},
       false},
      {"completion",
       "print the bash or zsh completion script (see its --help for set-up)",
       &setup_completion,
       {},
       false},
      {"version",
       "print tpuctl's version, git commit, build type and compiler",
       &setup_version,
       {},
       false},
  };
  return k_table;
}

} // namespace tpuctl::cli
