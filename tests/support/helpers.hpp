// Test helpers shared by unit and integration tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/process.hpp"

namespace tpuctl::test {

// Runs the real tpuctl binary with `args` and an environment isolated from the developer's:
// HOME, XDG_STATE_HOME and XDG_CONFIG_HOME point into `home` when it is not empty.
util::ProcessResult run_tpuctl(const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& env = {},
                               const std::string& stdin_data = "");

// Runs tpuctl in-process through cli::run (fast; for option-handling tests).
struct InProcessResult {
  int exit_code;
  std::string out;
  std::string err;
};
InProcessResult run_cli(const std::vector<std::string>& args);

// A scratch directory removed when the object dies (kept when TPUCTL_KEEP_TMP=1).
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return m_path; }

private:
  std::filesystem::path m_path;
};

// Compares `actual` with tests/golden/<name>; with TPUCTL_UPDATE_GOLDEN=1 rewrites the file.
// Returns an empty string when they match, else a short diff description.
std::string check_golden(const std::string& name, const std::string& actual);

// The whole file (binary-safe); "" when it cannot be read.
std::string read_file(const std::filesystem::path& path);
// The permission bits of `path` (07777 mask); 0 when it cannot be stat()ed.
unsigned file_mode(const std::filesystem::path& path);
// True when `part` occurs in `text` (what a user greps for in an output).
bool contains(const std::string& text, const std::string& part);
// Polls `done` every 100 ms until it holds (true) or `timeout` passes (false): for a state the
// test waits on, never for a duration it asserts.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);
// True when a TCP socket can bind address:port now (a free loopback port for a fixture).
bool can_bind(const std::string& address, uint16_t port);

std::string source_dir();
std::string tpuctl_binary();

} // namespace tpuctl::test
