// Secrets (provision/slice/secrets.hpp), pure: taken from the environment with every problem
// named (never a value), read by the remote shell from stdin in name order, shown by name only.
#include <cstdlib>

#include <doctest/doctest.h>

#include "provision/slice/secrets.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;

TEST_SUITE_BEGIN("provision");

TEST_CASE("secrets: values from the environment; a missing, reserved, repeated or multi-line one "
          "is a usage error that names it and never shows a value") {
  ::setenv("S_ONE", "v1 with 'quotes' and $(x)", 1);
  ::setenv("S_TWO", "v2", 1);
  ::setenv("S_LINES", "first\nsecond-value", 1);
  ::unsetenv("S_MISSING");
  auto ok = secrets_from_environment({"S_TWO", "S_ONE"});
  REQUIRE(ok);
  CHECK(ok->at("S_ONE") == "v1 with 'quotes' and $(x)");
  CHECK(secret_read_prefix(*ok) == "IFS= read -r S_ONE; IFS= read -r S_TWO; export S_ONE S_TWO; ");
  CHECK(secret_input(*ok) == "v1 with 'quotes' and $(x)\nv2\n");
  CHECK(secret_names(*ok) == nlohmann::json::array({"S_ONE", "S_TWO"}));
  CHECK(secrets_from_json(to_json(*ok)) == *ok);
  CHECK(secret_read_prefix({}).empty());
  CHECK(secret_input({}).empty());

  auto bad = secrets_from_environment(
      {"S_MISSING", "PATH", "TPU_WORKER_ID", "S_TWO", "S_TWO", "S_LINES", "1BAD"});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().kind == ErrorKind::usage);
  std::string m = bad.error().message; // each problem is a line of its own
  for (const auto& line : bad.error().more) {
    m += "\n" + line;
  }
  CHECK(m.find("--env-secret S_MISSING: S_MISSING is not set") != std::string::npos);
  CHECK(m.find("--env-secret PATH: tpuctl sets that variable") != std::string::npos);
  CHECK(m.find("--env-secret TPU_WORKER_ID") != std::string::npos);
  CHECK(m.find("--env-secret S_TWO is given twice") != std::string::npos);
  CHECK(m.find("--env-secret S_LINES: its value holds a newline") != std::string::npos);
  CHECK(m.find("1BAD") != std::string::npos);
  CHECK(m.find("second-value") == std::string::npos); // never a value
  CHECK_FALSE(check_secrets_apart(*ok, {{"S_ONE", "x"}}));
  CHECK(check_secrets_apart(*ok, {{"OTHER", "x"}}));
}
