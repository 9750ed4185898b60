#include "provision/workload/container.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "provision/slice/provisioning.hpp"
#include "provision/workload/workload.hpp"
#include "remote/fanout.hpp"
#include "remote/push.hpp"
#include "util/hostlist.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

namespace fs = std::filesystem;

namespace {

constexpr size_t k_max_app_files = 10000;
constexpr uint64_t k_max_app_bytes = uint64_t{1} << 30;

bool all_of_chars(const std::string& s, const std::string& extra) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || extra.find(c) != std::string::npos;
  });
}

} // namespace

Status validate_container(const ContainerSpec& spec) {
  ErrorList problems;
  if (spec.runtime != "auto" && spec.runtime != "docker" && spec.runtime != "podman") {
    problems.add(ErrorKind::usage, "--container-runtime '" + util::printable(spec.runtime) +
                                       "' is not auto, docker or podman");
  }
  if (!spec.image.empty() && (!all_of_chars(spec.image, "._/:@-") || spec.image.front() == '-' ||
                              spec.image.size() > 512)) {
    problems.add(ErrorKind::usage, "image '" + util::printable(spec.image) +
                                       "' is not an image reference (e.g. python:3.10 or "
                                       "us-docker.pkg.dev/p/r/maxtext:latest)");
  }
  if (spec.name.empty() || !all_of_chars(spec.name, "_.-") || spec.name.front() == '-' ||
      spec.name.size() > 63) {
    problems.add(ErrorKind::usage, "--docker-name '" + util::printable(spec.name) +
                                       "' is not a container name (letters, digits, '_', '.', "
                                       "'-'; at most 63)");
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return ok();
}

std::string container_command(const ContainerSpec& spec, const std::string& uid,
                              const WorkerPlan& plan, const std::string& dir,
                              const std::string& app_dir, const std::string& command) {
  const std::string rt = spec.runtime;
  const std::string name =
      spec.name + "-" + uid.substr(0, 8) + "-" + plan.node + "-" + std::to_string(plan.worker);
  std::string run = rt + " run --rm --name " + name + " --network host --ipc host --privileged";
  std::set<std::string> names;
  for (const auto& [k, v] : plan.env) {
    if (names.insert(k).second) {
      run += " -e " + k;
    }
  }
  run += " -v " + util::shell_quote_path(dir) + ":" + util::shell_quote_path(dir);
  if (!app_dir.empty()) {
    run += " -v " + util::shell_quote_path(app_dir) + ":/app -w /app";
  } else {
    run += " -w " + util::shell_quote_path(dir);
  }
  run += " " + util::shell_quote(spec.image) + " /bin/sh -c " + util::shell_quote(command);
  // Stopped (the supervisor TERMs its tree, `docker run` among it, which passes the TERM on): the
  // container gets the job's grace (-tgps) less a second, so the runtime's own KILL comes
  // before the supervisor's; then it is removed.
  return "trap 'g=${" + std::string(k_process_grace_var) +
         ":-30}; [ \"$g\" -gt 1 ] && g=$((g-1)); " + rt + " stop -t \"$g\" " + name +
         " >/dev/null 2>&1; " + rt + " rm -f " + name +
         " >/dev/null 2>&1; exit 143' HUP INT TERM; " + run + " & wait $!";
}

std::string runtime_probe_script() {
  return "for rt in docker podman; do "
         "if ! command -v $rt >/dev/null 2>&1; then echo \"$rt missing\"; "
         "elif out=$(timeout 20 $rt info 2>&1 >/dev/null); then echo \"$rt ok\"; "
         "else echo \"$rt broken: $(printf '%s\\n' \"$out\" | grep -v '^$' | head -n 1)\"; fi; "
         "done";
}

Expected<std::string> choose_runtime(const ContainerSpec& spec,
                                     const std::vector<WorkerPlan>& plans,
                                     const remote::SshOptions& ssh) {
  std::vector<remote::SshTarget> targets;
  for (const auto& p : plans) {
    targets.push_back(p.target);
  }
  const auto jobs = remote::make_jobs(targets, runtime_probe_script());
  remote::SshOptions o = ssh;
  o.keep_output = true;
  o.batch_size = std::max<size_t>({o.batch_size, plans.size(), 1});
  o.command_timeout = std::chrono::seconds(60);
  TPUCTL_TRY_ASSIGN(auto results, remote::run_fanout(jobs, o));
  // runtime -> state per worker; what each worker lacks, grouped by the same story.
  std::map<std::string, std::vector<std::string>> lacking; // story -> hosts
  size_t docker_ok = 0, podman_ok = 0;
  for (const auto& r : results) {
    const auto& p = plans[r.index];
    if (!r.succeeded()) {
      lacking["cannot be asked (" +
              (r.error.empty() ? std::string(remote::to_string(r.outcome)) : r.error) + ")"]
          .push_back(p.host);
      continue;
    }
    std::map<std::string, std::string> state;
    for (const auto& line : util::split(r.out, '\n')) {
      auto sp = line.find(' ');
      if (sp != std::string::npos) {
        state[line.substr(0, sp)] = line.substr(sp + 1);
      }
    }
    docker_ok += state["docker"] == "ok";
    podman_ok += state["podman"] == "ok";
    std::vector<std::string> story;
    for (const char* rt : {"docker", "podman"}) {
      if (spec.runtime != "auto" && spec.runtime != rt) {
        continue;
      }
      const std::string& s = state[rt];
      if (s == "ok") {
        story.clear();
        break;
      }
      story.push_back(s == "missing" || s.empty()
                          ? std::string(rt) + " is not installed"
                          : std::string(rt) + " is installed but '" + rt + " info' fails" +
                                (s.size() > 8 ? " (" + s.substr(8) + ")" : ""));
    }
    if (!story.empty()) {
      lacking[util::join(story, ", ")].push_back(p.host);
    }
  }
  const size_t n = plans.size();
  if (spec.runtime == "auto") {
    if (docker_ok == n) {
      return std::string("docker");
    }
    if (podman_ok == n) {
      return std::string("podman");
    }
  } else if ((spec.runtime == "docker" ? docker_ok : podman_ok) == n) {
    return spec.runtime;
  }
  std::vector<std::string> parts;
  size_t bad = 0;
  for (const auto& [story, hosts] : lacking) {
    parts.push_back(util::fold_hostlist(hosts) + ": " + story);
    bad += hosts.size();
  }
  if (parts.empty()) {
    parts.push_back("some workers have only docker and the others only podman");
    bad = n;
  }
  return Error(ErrorKind::failure,
               "image '" + spec.image + "' needs a container runtime on every worker, and " +
                   std::to_string(bad) + " of " + std::to_string(n) + " have none that works (" +
                   util::join(parts, "; ") +
                   "): install docker or podman on them, or leave out --docker-image and "
                   "--base-docker-image to run on the hosts");
}

Expected<std::vector<AppFile>> list_app_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return usage_error("--script-dir '" + util::printable(dir.string()) + "' is not a directory");
  }
  std::vector<AppFile> files;
  uint64_t bytes = 0;
  for (auto it =
           fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory() && it->path().filename() == ".git") {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) {
      continue;
    }
    bytes += it->file_size();
    files.push_back({it->path(), fs::relative(it->path(), dir).generic_string()});
    if (files.size() > k_max_app_files || bytes > k_max_app_bytes) {
      return usage_error("--script-dir '" + util::printable(dir.string()) +
                         "' holds more than 10,000 files or 1 GiB (.git left out): name a "
                         "smaller --script-dir, or build an image and give --docker-image");
    }
  }
  std::sort(files.begin(), files.end(),
            [](const AppFile& a, const AppFile& b) { return a.relative < b.relative; });
  return files;
}

std::string app_dir(const WorkerPlan& plan, const std::string& uid) {
  return plan.workdir + "/workloads/" + uid + "/app";
}

Status push_app_files(const std::vector<AppFile>& files, const std::vector<WorkerPlan>& plans,
                      const std::string& uid, const remote::SshOptions& ssh) {
  std::vector<const WorkerPlan*> hosts;
  std::set<std::string> seen;
  for (const auto& p : plans) {
    if (seen.insert(p.host).second) {
      hosts.push_back(&p);
    }
  }
  std::set<std::string> failed;
  for (const auto& f : files) {
    std::vector<remote::PushJob> jobs;
    for (size_t i = 0; i < hosts.size(); ++i) {
      jobs.push_back({hosts[i]->target, app_dir(*hosts[i], uid) + "/" + f.relative, i});
    }
    remote::PushOptions push;
    push.local_path = f.local;
    TPUCTL_TRY_ASSIGN(auto results, remote::push_file(jobs, push, ssh));
    for (const auto& r : results) {
      if (!r.succeeded()) {
        failed.insert(hosts[r.index]->host);
      }
    }
  }
  if (!failed.empty()) {
    return Error(ErrorKind::failure, "could not copy the --script-dir to " +
                                         util::fold_hostlist({failed.begin(), failed.end()}));
  }
  return ok();
}

} // namespace tpuctl::provision
