// Running local programs (ssh-keygen, sshd, the tpuctl binary in tests) without a shell: argv is
// passed as-is, so no name or value can become a command.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::util {

struct ProcessResult {
  int exit_code = -1; // exit status, or 128+N when killed by signal N
  int signal = 0;     // the signal that killed it, 0 if it exited
  bool timed_out = false;
  std::string out;
  std::string err;
};

struct ProcessOptions {
  std::map<std::string, std::string> env_set; // added to (or replacing in) the inherited env
  std::vector<std::string> env_unset;
  std::string stdin_data;                           // written to stdin, then EOF
  std::optional<std::chrono::milliseconds> timeout; // SIGKILL the child after this long
  std::string cwd;
};

// Runs argv[0] (searched in PATH) with argv, waits for it and captures stdout and stderr.
// Errors: the program could not be started (names it and the reason).
Expected<ProcessResult> run_process(const std::vector<std::string>& argv,
                                    const ProcessOptions& options = {});

// Finds `name` in PATH (or the sbin directories, where sshd lives). Empty if absent.
std::string find_program(const std::string& name);

} // namespace tpuctl::util
