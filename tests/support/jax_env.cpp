#include "tests/support/jax_env.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <sstream>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/shell_quote.hpp"

namespace tpuctl::test {

std::string frameworks_dir() {
  const char* env = std::getenv("TPUCTL_PYTHON_ENV");
  return env && *env ? env : "/opt/tpuctl/frameworks";
}

void require_frameworks() {
  const std::string python = frameworks_dir() + "/bin/python3";
  auto r = util::run_process({python, "-c", "import jax, orbax.checkpoint, optax"});
  REQUIRE_MESSAGE((r && r->exit_code == 0),
                  "the project's Python environment " << frameworks_dir()
                                                      << " has no JAX, Orbax or optax: run "
                                                         "scripts/deps.sh --frameworks ("
                                                      << (r ? r->err : r.error().message) << ")");
}

std::string jax_program(const std::string& name) {
  return util::shell_quote(source_dir() + "/tests/jax/" + name);
}

JaxEnv::JaxEnv(int hosts, const std::string& address_base, const std::string& shape)
    : WorkloadEnv(hosts, address_base, shape) {
  require_frameworks();
}

nlohmann::json JaxEnv::wait_for(const std::string& name,
                                const std::function<bool(const nlohmann::json&)>& done,
                                std::chrono::seconds timeout) const {
  nlohmann::json last;
  wait_until(
      [&] {
        auto r = run({"workload", "describe", name, "--format", "json"});
        if (r.exit_code != 0) {
          return false;
        }
        last = nlohmann::json::parse(r.out);
        return done(last);
      },
      timeout);
  return last;
}

std::string JaxEnv::log_of(const std::string& name, const std::string& node, int worker) const {
  auto r = run({"workload", "logs", name, "--node", node, "--worker", std::to_string(worker)});
  return r.out + r.err;
}

std::string JaxEnv::monitor_log(const std::string& name) const {
  return read_file(dir.path() / "state" / "tpuctl" / "logs" / ("workload-" + name + ".log"));
}

MemoryHeavy::MemoryHeavy()
    : m_fd(::open("/tmp/tpuctl-tests-jax-memory.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600)) {
  REQUIRE_MESSAGE(m_fd >= 0, "cannot open /tmp/tpuctl-tests-jax-memory.lock");
  while (::flock(m_fd, LOCK_EX) != 0 && errno == EINTR) {
  }
}

MemoryHeavy::~MemoryHeavy() {
  if (m_fd >= 0) {
    ::close(m_fd); // releases the lock
  }
}

Throttle::Throttle(int pid, std::chrono::milliseconds stopped, std::chrono::milliseconds running)
    : m_pid(pid) {
  m_thread = std::thread([this, stopped, running] {
    while (m_on) {
      ::kill(m_pid, SIGSTOP);
      std::this_thread::sleep_for(stopped);
      ::kill(m_pid, SIGCONT);
      std::this_thread::sleep_for(running);
    }
  });
}

Throttle::~Throttle() {
  m_on = false;
  m_thread.join();
  ::kill(m_pid, SIGCONT);
}

std::vector<int> python_processes(const std::string& uid, int worker) {
  std::vector<int> out;
  for (int pid : workload_worker_processes(uid, worker)) {
    if (read_file("/proc/" + std::to_string(pid) + "/comm").rfind("python", 0) == 0) {
      out.push_back(pid);
    }
  }
  return out;
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) {
      out.push_back(line);
    }
  }
  return out;
}

std::vector<int> numbers_after(const std::string& text, const std::string& prefix) {
  std::vector<int> out;
  for (const auto& line : lines_starting(text, prefix)) {
    out.push_back(std::atoi(line.c_str() + prefix.size()));
  }
  return out;
}

} // namespace tpuctl::test
