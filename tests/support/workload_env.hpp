// A QrEnv for workload tests: creates workloads on a cluster, finds the processes they started
// on the local pool (every one carries TPUCTL_WORKLOAD_UID in its environment), kills a worker's
// host, and at the end kills whatever its workloads left.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/qr_env.hpp"

namespace tpuctl::test {

// Every process on this machine (the local pool's workers included) tagged with the workload.
std::vector<int> workload_processes(const std::string& uid);
// Those that run as worker `worker` (TPU_WORKER_ID in their environment), of node `node`
// (TPU_NAME) when it is not empty.
std::vector<int> workload_worker_processes(const std::string& uid, int worker,
                                           const std::string& node = "");

// The workload (`workload describe --format json`) RUNNING its attempt `attempt` on every worker.
bool all_running_attempt(const nlohmann::json& workload, int attempt);

// The hosts of the workload's workers (`workload describe --format json`).
std::set<std::string> workload_hosts(const nlohmann::json& workload);

// Those of `pids` whose command line holds `word`.
std::vector<int> named(const std::vector<int>& pids, const std::string& word);

struct WorkloadEnv : QrEnv {
  std::vector<std::string> uids; // of every workload created here

  using QrEnv::QrEnv;
  ~WorkloadEnv();

  // `workload create --cluster CLUSTER --workload NAME --command COMMAND --format json EXTRA...`
  // (exit 0 required), with `extra_env` added to its environment; returns the workload's uid.
  std::string create_workload(const std::string& cluster, const std::string& name,
                              const std::string& command, std::vector<std::string> extra = {},
                              const std::map<std::string, std::string>& extra_env = {});
  // The host dies: its sshd and every process of the workload that runs there as `worker` (of
  // node `node`, when the cluster has several slices: their worker ids repeat).
  void kill_worker_host(const std::string& uid, const std::string& host, int worker,
                        const std::string& node = "") const;
  // Every process started through this env's local pool (tagged with it), and those of them
  // whose command line holds `word` (say, "supervise-watch": the monitor's streams).
  std::vector<int> pool_processes() const;
  std::vector<int> pool_processes(const std::string& word) const;
};

} // namespace tpuctl::test
