// tpuctl raises its soft limit of open files to the hard limit (cli/main.cpp): a fan-out or a
// provisioning holds a socket per host, 2,304 for a pod, above the usual soft limit of 1024.
#include <fstream>
#include <sstream>
#include <sys/resource.h>
#include <thread>

#include <doctest/doctest.h>

#include "tests/support/background.hpp"
#include "tests/support/helpers.hpp"

using namespace tpuctl;

TEST_SUITE_BEGIN("integration");

TEST_CASE("tpuctl runs with its soft open-file limit raised to the hard limit") {
  rlimit lim{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &lim) == 0);
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max <= 256) {
    MESSAGE("hard limit " << lim.rlim_max << ": nothing to raise above a soft limit of 256");
    return;
  }
  test::TempDir tmp;
  std::ofstream(tmp.path() / "f") << "x";
  // Started with a soft limit of 256; serve-file waits for a client that never comes.
  test::Background proc({"/bin/bash", "-c",
                         "ulimit -Sn 256 && exec '" + test::tpuctl_binary() +
                             "' agent serve-file --file '" + (tmp.path() / "f").string() +
                             "' --bind 127.0.0.1 --port 0 --timeout 5s"},
                        {}, {}, tmp.path(), "limits");
  std::string line;
  for (int i = 0; i < 50 && line.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream limits("/proc/" + std::to_string(proc.pid()) + "/limits");
    for (std::string l; std::getline(limits, l);) {
      if (l.rfind("Max open files", 0) == 0 && l.find(" 256 ") == std::string::npos) {
        line = l;
      }
    }
  }
  REQUIRE_MESSAGE(!line.empty(), "the soft limit stayed at 256");
  std::istringstream words(line.substr(std::string("Max open files").size()));
  std::string soft, hard;
  words >> soft >> hard;
  CHECK(soft == hard);
}

TEST_SUITE_END();
