// The JAX tests' world: the project's Python environment (scripts/deps.sh --frameworks makes
// /opt/tpuctl/frameworks: JAX, Orbax, optax), the programs of tests/jax/, and a WorkloadEnv with
// the waits those tests share. A JAX test fails, never skips, when the environment is missing:
// CI installs it (scripts/test.sh runs deps.sh --frameworks).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/workload_env.hpp"

namespace tpuctl::test {

// The workers' Python environment: TPUCTL_PYTHON_ENV, else /opt/tpuctl/frameworks.
std::string frameworks_dir();
// Fails the test (REQUIRE), saying how to install it, unless the environment's python3 imports
// jax, orbax.checkpoint and optax.
void require_frameworks();
// tests/jax/NAME in the source tree, shell-quoted for a --command.
std::string jax_program(const std::string& name);

struct JaxEnv : WorkloadEnv {
  JaxEnv(int hosts, const std::string& address_base, const std::string& shape = "");
  // Polls `workload describe NAME --format json` until `done` holds or `timeout` passes; returns
  // the last description.
  nlohmann::json wait_for(const std::string& name,
                          const std::function<bool(const nlohmann::json&)>& done,
                          std::chrono::seconds timeout) const;
  // Worker `worker` of node `node`'s log (all attempts), as `workload logs` gives it.
  std::string log_of(const std::string& name, const std::string& node, int worker) const;
  // The monitor's log of the workload (what to print when a test fails).
  std::string monitor_log(const std::string& name) const;
};

// The Python processes (their program: /proc/PID/comm starts with "python") of worker `worker` of
// the workload `uid`: the job itself, not its supervisor or shell.
std::vector<int> python_processes(const std::string& uid, int worker);

// One memory-heavy JAX run at a time on the whole machine, for as long as this lives: the seeds'
// 8192 x 8192 product on 4 processes needs about 14 GB, and two copies of the suite (two CI
// jobs, bench/suite_under_load.sh) running it at once exceed a 24 GiB machine (the kernel's OOM
// killer ends one). An exclusive flock on a file in /tmp, which every copy shares, network
// namespace or not; released when the process ends, however it ends.
class MemoryHeavy {
public:
  MemoryHeavy();
  ~MemoryHeavy();
  MemoryHeavy(const MemoryHeavy&) = delete;
  MemoryHeavy& operator=(const MemoryHeavy&) = delete;

private:
  int m_fd = -1;
};

// Throttles a process as a stolen CPU would, until destroyed: SIGSTOP for `stopped`, SIGCONT for
// `running`, again and again, from a thread of its own; the destructor leaves it running.
class Throttle {
public:
  Throttle(int pid, std::chrono::milliseconds stopped, std::chrono::milliseconds running);
  ~Throttle();
  Throttle(const Throttle&) = delete;
  Throttle& operator=(const Throttle&) = delete;

private:
  int m_pid;
  std::atomic<bool> m_on{true};
  std::thread m_thread;
};

// The lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix);
// The numbers N of lines "<prefix>N..." in `text`, in order.
std::vector<int> numbers_after(const std::string& text, const std::string& prefix);

} // namespace tpuctl::test
