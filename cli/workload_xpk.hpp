// xpk's workload flags that need more than a flag declaration: --env-file, --filter-by-status and
// --filter-by-job, and the image flags
// (--docker-image, --base-docker-image, --script-dir, --docker-name) as a container request.
#pragma once

#include <string>
#include <vector>

#include "provision/workload/workload_ops.hpp"
#include "state/store.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

// xpk's --env-file: lines `VAR=value`, or `VAR` alone for the value this process has (it must
// have one); blank lines and lines starting with '#' are skipped. Errors: usage naming the file
// and line of every bad line (no '=', a bad name, an unset VAR), or an unreadable file.
Expected<provision::EnvVars> read_env_file(const std::string& path);

// --filter-by-status (EVERYTHING, RUNNING, QUEUED, FINISHED, FAILED, SUCCESSFUL; any case) and
// --filter-by-job (a substring of the name, as xpk tests it).
struct WorkloadFilter {
  std::string status = "everything";
  std::string job;
};
Expected<WorkloadFilter> parse_workload_filter(const std::string& status, const std::string& job);
bool matches(const WorkloadFilter& filter, const provision::Workload& workload);

// The image flags as the request's container and script dir: --docker-image is used as is
// (with --script-dir or a --base-docker-image it is refused, as xpk does); --base-docker-image
// takes --script-dir (default: the current directory), copied to every worker and mounted at
// /app. No image flag: no container.
struct ImageFlags {
  std::string docker_image, base_docker_image, script_dir, docker_name, runtime;
};
Status apply_image_flags(const ImageFlags& flags, provision::WorkloadRequest& request);

} // namespace tpuctl::cli
