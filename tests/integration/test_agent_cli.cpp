#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"

using tpuctl::test::run_tpuctl;

TEST_SUITE_BEGIN("integration");

TEST_CASE("agent probe: json facts about this host, hidden from the top-level help") {
  auto r = run_tpuctl({"agent", "probe", "--workdir", "/tmp", "--format", "json"});
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["cores"].get<int>() == static_cast<int>(std::thread::hardware_concurrency()));
  CHECK(j["memory_total_mib"].get<long>() > 0);
  CHECK(j["workdir"] == "/tmp");
  CHECK(j["disk_free_mib"].get<long>() > 0);
  CHECK(j["simd"].is_array());
  CHECK(j["version"].is_string());

  auto help = run_tpuctl({"--help"});
  CHECK(help.out.find("agent") == std::string::npos);
}

TEST_SUITE_END();
