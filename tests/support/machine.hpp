// One tpuctl "machine" for tests through the binary: its own HOME and XDG directories (so its
// own default SQLite state, config and local pools), optionally an etcd --state shared with
// other machines. What tpuctl processes it left running (detached drivers, monitors) are killed
// by pid when it goes.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "util/process.hpp"

namespace tpuctl::test {

struct Machine {
  TempDir dir;
  std::map<std::string, std::string> vars;
  // `state_url` (when not empty) becomes TPUCTL_STATE.
  explicit Machine(const std::string& state_url = "");
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  util::ProcessResult run(std::vector<std::string> args) const;
  // run() with --format json; the test fails unless it exits 0.
  nlohmann::json run_json(std::vector<std::string> args) const;
  std::filesystem::path sqlite_file() const;
};

// "<prefix>S.2" (prefix such as "127.130."), S in [first, first + count), such that the
// addresses .2 ... .(1 + hosts) of that /24 can all bind port 2222 now. Fails the test when
// none can.
std::string free_address_base(const std::string& prefix, int first, int count, int hosts);

} // namespace tpuctl::test
