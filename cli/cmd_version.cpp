// tpuctl version: what binary this is (also used by agents to check the shipped binary).
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "util/build_info.hpp"

namespace tpuctl::cli {

Json version_info() {
  return Json{{"version", util::build::k_version},
              {"git_commit", util::build::k_git_commit},
              {"build_type", util::build::k_build_type},
              {"compiler", util::build::k_compiler}};
}

void setup_version(CLI::App& group, Registry& registry) {
  registry.bind(group, [](Context& ctx) -> Expected<int> {
    TPUCTL_TRY(emit(ctx, version_info(), [](std::ostream& os, const Json& v) {
      os << "tpuctl " << v["version"].get<std::string>() << " (commit "
         << v["git_commit"].get<std::string>() << ", " << v["build_type"].get<std::string>() << ", "
         << v["compiler"].get<std::string>() << ")\n";
    }));
    return 0;
  });
}

} // namespace tpuctl::cli
