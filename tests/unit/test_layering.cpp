// The dependency rule of ARCHITECTURE.md, checked on the sources: a file includes headers of its
// own folder and of the folders below it only (provision/'s rooms count as folders:
// pool <- queue <- slice <- workload <- controller). The libraries are linked the same way, so a
// wrong include would usually fail to link too; this names the file and the include instead.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include <doctest/doctest.h>

TEST_SUITE_BEGIN("unit");

namespace {

namespace fs = std::filesystem;

// Each module and the modules it may include (besides itself).
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> k_allowed = {
      {"util", {}},
      {"topology", {"util"}},
      {"kernels", {"util"}},
      {"state", {"util"}},
      {"remote", {"util", "state"}},
      {"agent", {"util", "kernels", "topology", "remote"}},
      {"provision/pool", {"util", "topology", "state", "remote", "agent"}},
      {"provision/queue", {"util", "topology", "state", "remote", "agent", "provision/pool"}},
      {"provision/slice",
       {"util", "topology", "state", "remote", "agent", "provision/pool", "provision/queue"}},
      {"provision/workload",
       {"util", "topology", "kernels", "state", "remote", "agent", "provision/pool",
        "provision/queue", "provision/slice"}},
      {"provision/controller",
       {"util", "topology", "kernels", "state", "remote", "agent", "provision/pool",
        "provision/queue", "provision/slice", "provision/workload"}},
      {"cli",
       {"util", "topology", "kernels", "state", "remote", "agent", "provision/pool",
        "provision/queue", "provision/slice", "provision/workload", "provision/controller"}},
  };
  return k_allowed;
}

// "provision/slice/driver.hpp" -> "provision/slice"; "util/strings.hpp" -> "util".
std::string module_of(const std::string& path) {
  const auto slash = path.find('/');
  if (slash == std::string::npos) {
    return "";
  }
  std::string top = path.substr(0, slash);
  if (top == "provision") {
    const auto next = path.find('/', slash + 1);
    return next == std::string::npos ? top : path.substr(0, next);
  }
  return top;
}

} // namespace

TEST_CASE("layering: every include points down the dependency rule of ARCHITECTURE.md") {
  const fs::path root = TPUCTL_SOURCE_DIR;
  const std::regex include(R"re(^\s*#\s*include\s*"([a-z_0-9/]+\.hpp)")re");
  int files = 0;
  std::set<std::string> seen_modules;
  for (const auto& [module, may] : allowed()) {
    REQUIRE_MESSAGE(fs::is_directory(root / module), module);
    for (const auto& entry : fs::directory_iterator(root / module)) {
      const auto ext = entry.path().extension();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) {
        continue;
      }
      ++files;
      seen_modules.insert(module);
      std::ifstream in(entry.path());
      std::string line;
      int number = 0;
      while (std::getline(in, line)) {
        ++number;
        std::smatch m;
        if (!std::regex_search(line, m, include)) {
          continue;
        }
        const std::string target = module_of(m[1].str());
        if (target.empty() || target == module || !allowed().count(target)) {
          continue; // its own folder, or not one of ours (generated headers, tests)
        }
        CHECK_MESSAGE(may.count(target) == 1, fs::relative(entry.path(), root).string()
                                                  << ":" << number << " includes " << m[1].str()
                                                  << " (" << module << " may not depend on "
                                                  << target << ")");
      }
    }
  }
  CHECK(files > 150);
  CHECK(seen_modules.size() == allowed().size());
  // No file was left directly in provision/: every one lives in a room.
  for (const auto& entry : fs::directory_iterator(root / "provision")) {
    CHECK_MESSAGE(!(entry.is_regular_file() &&
                    (entry.path().extension() == ".cpp" || entry.path().extension() == ".hpp")),
                  entry.path().string());
  }
}

TEST_CASE("layering: cli/ parses, prints and chooses exit codes; it starts no process itself") {
  // Who drives a request and who watches a workload is provision/controller's to decide, and
  // starting a detached tpuctl is its launcher's; a command only hands it the options.
  const fs::path root = TPUCTL_SOURCE_DIR;
  const std::regex starts(R"re(\b(fork|vfork|execv|execvp|execve|posix_spawnp?|setsid)\s*\()re");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(root / "cli")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".cpp") {
      continue;
    }
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      CHECK_MESSAGE(!std::regex_search(line, starts), fs::relative(entry.path(), root).string()
                                                          << ":" << number << ": " << line);
    }
  }
  CHECK(files > 20);
}

TEST_SUITE_END();
