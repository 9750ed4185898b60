#include "tests/support/ssh_keys.hpp"

#include <doctest/doctest.h>

#include "util/process.hpp"

namespace tpuctl::test {

void ssh_keygen(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"ssh-keygen", "-q"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = util::run_process(argv);
  REQUIRE(r);
  REQUIRE_MESSAGE(r->exit_code == 0, r->err);
}

} // namespace tpuctl::test
