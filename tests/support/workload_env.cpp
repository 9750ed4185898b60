#include "tests/support/workload_env.hpp"

#include <csignal>
#include <fstream>

#include <doctest/doctest.h>

#include "provision/pool/local_pool.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "util/process_tree.hpp"

namespace tpuctl::test {

std::set<std::string> workload_hosts(const nlohmann::json& workload) {
  std::set<std::string> out;
  for (const auto& w : workload["workers"]) {
    out.insert(w["host"].get<std::string>());
  }
  return out;
}

bool all_running_attempt(const nlohmann::json& workload, int attempt) {
  if (workload["state"] != "RUNNING" || workload["attempt"] != attempt) {
    return false;
  }
  for (const auto& w : workload["workers"]) {
    if (w["state"] != "RUNNING" || w["attempt"] != attempt) {
      return false;
    }
  }
  return true;
}

std::vector<int> workload_processes(const std::string& uid) {
  return processes_with_marker("TPUCTL_WORKLOAD_UID=" + uid);
}

std::vector<int> workload_worker_processes(const std::string& uid, int worker,
                                           const std::string& node) {
  std::vector<int> out;
  const std::string id = std::string("TPU_WORKER_ID=") + std::to_string(worker) + '\0';
  const std::string name = "TPU_NAME=" + node + '\0';
  for (int pid : workload_processes(uid)) {
    const std::string env = '\0' + read_file("/proc/" + std::to_string(pid) + "/environ");
    if (env.find('\0' + id) != std::string::npos &&
        (node.empty() || env.find('\0' + name) != std::string::npos)) {
      out.push_back(pid);
    }
  }
  return out;
}

WorkloadEnv::~WorkloadEnv() {
  for (const auto& uid : uids) {
    for (int pid : workload_processes(uid)) {
      ::kill(pid, SIGKILL);
    }
  }
}

std::string WorkloadEnv::create_workload(const std::string& cluster, const std::string& name,
                                         const std::string& command, std::vector<std::string> extra,
                                         const std::map<std::string, std::string>& extra_env) {
  std::vector<std::string> args{"workload", "create",    "--cluster", cluster,    "--workload",
                                name,       "--command", command,     "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_with(args, extra_env);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto uid = nlohmann::json::parse(r.out)["uid"].get<std::string>();
  uids.push_back(uid);
  return uid;
}

std::vector<int> WorkloadEnv::pool_processes() const {
  return util::processes_tagged(std::string(provision::k_local_pool_var) + "=" +
                                pool_dir().string());
}

std::vector<int> named(const std::vector<int>& pids, const std::string& word) {
  std::vector<int> out;
  for (int pid : pids) {
    if (read_file("/proc/" + std::to_string(pid) + "/cmdline").find(word) != std::string::npos) {
      out.push_back(pid);
    }
  }
  return out;
}

std::vector<int> WorkloadEnv::pool_processes(const std::string& word) const {
  return named(pool_processes(), word);
}

void WorkloadEnv::kill_worker_host(const std::string& uid, const std::string& host, int worker,
                                   const std::string& node) const {
  std::ifstream pidfile(pool_dir() / "hosts" / host / "sshd.pid");
  int sshd = 0;
  REQUIRE(static_cast<bool>(pidfile >> sshd));
  REQUIRE(::kill(sshd, SIGKILL) == 0);
  for (int pid : workload_worker_processes(uid, worker, node)) {
    ::kill(pid, SIGKILL);
  }
}

} // namespace tpuctl::test
