// A process a test starts and leaves running while it does something else (sends it SIGINT,
// kills a server under it): stdout and stderr go to files, stdin is /dev/null. The destructor
// SIGKILLs it (by its PID) if it is still running and reaps it.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tpuctl::test {

class Background {
public:
  // Starts argv[0] (a path) with argv, the current environment plus `env` (minus `unset`), output
  // files named <dir>/<tag>.out and <dir>/<tag>.err. REQUIREs that it started.
  Background(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const std::vector<std::string>& unset, const std::filesystem::path& dir,
             const std::string& tag);
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  int pid() const { return m_pid; }
  // Waits up to `timeout` for the exit. Returns the exit status (128+N when killed by signal N),
  // or nullopt while it still runs.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  std::string out() const;
  std::string err() const;

private:
  int m_pid = -1;
  std::optional<int> m_status;
  std::filesystem::path m_out, m_err;
};

} // namespace tpuctl::test
