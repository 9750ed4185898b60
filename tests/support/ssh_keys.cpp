#include "tests/support/ssh_keys.hpp"

#include <sstream>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"

#include "util/process.hpp"

namespace tpuctl::test {

void ssh_keygen(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"ssh-keygen", "-q"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = util::run_process(argv);
  REQUIRE(r);
  REQUIRE_MESSAGE(r->exit_code == 0, r->err);
}

std::string key_fields(const std::string& pub_path) {
  std::istringstream in(read_file(pub_path));
  std::string type, b64;
  in >> type >> b64;
  return type + " " + b64;
}

} // namespace tpuctl::test
