#include "tests/support/machine.hpp"

#include <csignal>
#include <unistd.h>

#include <doctest/doctest.h>

#include "tests/support/local_pool_fixture.hpp"

namespace tpuctl::test {

Machine::Machine(const std::string& state_url) {
  vars["HOME"] = dir.path().string();
  vars["XDG_STATE_HOME"] = (dir.path() / "state").string();
  vars["XDG_CONFIG_HOME"] = (dir.path() / "config").string();
  if (!state_url.empty()) {
    vars["TPUCTL_STATE"] = state_url;
  }
}

Machine::~Machine() {
  for (int pid : processes_with_marker(dir.path().string())) {
    ::kill(pid, SIGKILL);
  }
}

util::ProcessResult Machine::run(std::vector<std::string> args) const {
  return run_tpuctl(args, vars);
}

nlohmann::json Machine::run_json(std::vector<std::string> args) const {
  args.insert(args.end(), {"--format", "json"});
  auto r = run(args);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return nlohmann::json::parse(r.out);
}

std::filesystem::path Machine::sqlite_file() const {
  return dir.path() / "state" / "tpuctl" / "state.db";
}

std::string free_address_base(const std::string& prefix, int first, int count, int hosts) {
  int start = static_cast<int>(::getpid() % count);
  for (int a = 0; a < count; ++a) {
    std::string net = prefix + std::to_string(first + (start + a) % count) + ".";
    bool free = true;
    for (int i = 0; free && i < hosts; ++i) {
      free = can_bind(net + std::to_string(2 + i), 2222);
    }
    if (free) {
      return net + "2";
    }
  }
  FAIL("no free addresses for " << hosts << " hosts in " << prefix << first << "-"
                                << first + count - 1 << ".x");
  return "";
}

} // namespace tpuctl::test
