// Container images for workloads: xpk's `workload create --docker-image IMAGE` (used as is) and
// `--base-docker-image IMAGE --script-dir DIR` (DIR layered onto IMAGE at /app), on a team's own
// hosts with docker or podman and no registry build step.
//
// What each worker runs. The workload's supervisor (`tpuctl agent supervise`) starts, instead of
// `/bin/sh -c CMD`, a short script that runs the image with the runtime the workers share:
//
//   RT run --rm --name NAME --network host --ipc host --privileged
//          -e VAR ... (every variable of the worker environment, by name only: the values
//                      come from the supervisor's environment, so none is on a command line)
//          -v WDIR:WDIR (the worker's workload directory, where its status and log live)
//          [-v APP:/app -w /app]  (--script-dir, copied to the worker; else -w WDIR)
//          IMAGE /bin/sh -c CMD
//
// run in the background, with a trap that removes the container when the supervisor is told
// to stop (TERM/INT/HUP), so `workload delete` and restarts never leave a container running; the
// script's exit status is the container's. --network host keeps the worker's addresses (the
// coordinator port, MEGASCALE_*); --privileged and --ipc host give the TPU devices and shared
// memory, as Google's TPU VM container documentation runs them.
//
// How an image reaches the workers: by name, pulled by each worker's own runtime from its
// registry on first use (`docker login` / `podman login` on the workers for a private one), or
// already there (`docker load`). Which runtime: `choose_runtime` asks every worker before
// anything starts; docker when every worker has a working docker, else podman when every worker
// has a working podman, else the workload is refused with one line naming the workers and what
// each lacks.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "provision/slice/slice_workers.hpp"
#include "provision/workload/workload.hpp"
#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

// Errors (usage): a runtime other than auto/docker/podman; an image or name with characters no
// registry reference has (the image is checked as a reference: [a-z0-9._/:@-] and uppercase
// tags, no spaces or shell characters), a name outside [a-zA-Z0-9_.-].
Status validate_container(const ContainerSpec& spec);

// The script the supervisor runs on the worker of `plan` for `command` (see the top of this
// file). `dir` is the worker's workload directory, `app_dir` the copied script dir ("" when
// none). Precondition: spec.runtime is docker or podman; validate_container passed.
std::string container_command(const ContainerSpec& spec, const std::string& uid,
                              const WorkerPlan& plan, const std::string& dir,
                              const std::string& app_dir, const std::string& command);

// The remote probe: one line per runtime, "docker ok", "docker broken: <first error line>" or
// "docker missing" (then podman). Exposed for tests.
std::string runtime_probe_script();

// The runtime every worker of `plans` can run `spec.image` with (spec.runtime when not auto).
// Errors: failure, one line: the image, the workers (folded) that have no working runtime and
// what each lacks, and what to do; the engine's.
Expected<std::string> choose_runtime(const ContainerSpec& spec,
                                     const std::vector<WorkerPlan>& plans,
                                     const remote::SshOptions& ssh);

// A --script-dir's regular files, with their paths relative to it (sorted). Errors: usage for
// a missing directory, or one over 10,000 files or 1 GiB (name a smaller --script-dir).
struct AppFile {
  std::filesystem::path local;
  std::string relative;
};
Expected<std::vector<AppFile>> list_app_files(const std::filesystem::path& dir);

// <workdir>/workloads/<uid>/app on the host of `plan`: where the script dir is copied.
std::string app_dir(const WorkerPlan& plan, const std::string& uid);

// Copies `files` to app_dir() on every distinct host of `plans` (streamed, sha256-checked).
// Errors: failure naming the hosts that did not get them, the engine's.
Status push_app_files(const std::vector<AppFile>& files, const std::vector<WorkerPlan>& plans,
                      const std::string& uid, const remote::SshOptions& ssh);

} // namespace tpuctl::provision
