#include "cli/workload_xpk.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli/compat.hpp"
#include "provision/slice/worker_env.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

Expected<provision::EnvVars> read_env_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return usage_error("--env-file '" + util::printable(path) + "' cannot be read");
  }
  provision::EnvVars vars;
  ErrorList problems;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string text(util::trim(line));
    if (text.empty() || text[0] == '#') {
      continue;
    }
    const std::string where =
        "--env-file '" + util::printable(path) + "' line " + std::to_string(n) + ": ";
    const auto eq = text.find('=');
    const std::string name(util::trim(std::string_view(text).substr(0, eq)));
    if (auto valid = provision::validate_env_name(name); !valid) {
      problems.add(usage_error(where + valid.error().message));
      continue;
    }
    if (eq != std::string::npos) {
      vars.emplace_back(name, text.substr(eq + 1));
      continue;
    }
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) {
      problems.add(usage_error(where + name + " has no value and is not set here: write " + name +
                               "=VALUE, or export it first"));
      continue;
    }
    vars.emplace_back(name, value);
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return vars;
}

Expected<WorkloadFilter> parse_workload_filter(const std::string& status, const std::string& job) {
  WorkloadFilter f{util::to_lower(status), job};
  for (const char* s : {"everything", "running", "queued", "finished", "failed", "successful"}) {
    if (f.status == s) {
      return f;
    }
  }
  return usage_error("--filter-by-status '" + util::printable(status) +
                     "' is not one of EVERYTHING, RUNNING, QUEUED, FINISHED, FAILED, SUCCESSFUL");
}

bool matches(const WorkloadFilter& f, const provision::Workload& w) {
  using S = provision::WorkloadState;
  if (!f.job.empty() && w.name.find(f.job) == std::string::npos) {
    return false;
  }
  // xpk: RUNNING is admitted with pods running; QUEUED is waiting for (or just given) its quota.
  if (f.status == "running") {
    return w.state == S::running || w.state == S::recovering || w.state == S::evicting;
  }
  if (f.status == "queued") {
    return w.state == S::queued || w.state == S::pending;
  }
  if (f.status == "finished") {
    return provision::is_terminal(w.state);
  }
  if (f.status == "failed") {
    return w.state == S::failed;
  }
  if (f.status == "successful") {
    return w.state == S::succeeded;
  }
  return true;
}

Status apply_image_flags(const ImageFlags& f, provision::WorkloadRequest& r) {
  r.container.name = f.docker_name;
  r.container.runtime = enum_value(f.runtime);
  if (!f.docker_image.empty()) {
    if (!f.base_docker_image.empty() || !f.script_dir.empty()) {
      return usage_error("--docker-image is used as it is, so it takes no --base-docker-image or "
                         "--script-dir: give either --docker-image, or --base-docker-image "
                         "[--script-dir DIR]");
    }
    r.container.image = f.docker_image;
    return ok();
  }
  if (f.base_docker_image.empty()) {
    if (!f.script_dir.empty()) {
      return usage_error("--script-dir is layered onto an image: give --base-docker-image too "
                         "(e.g. --base-docker-image python:3.10)");
    }
    return ok();
  }
  r.container.image = f.base_docker_image;
  const std::string dir =
      f.script_dir.empty() ? std::filesystem::current_path().string() : f.script_dir;
  TPUCTL_TRY_ASSIGN(r.app_files, provision::list_app_files(dir));
  return ok();
}

} // namespace tpuctl::cli
