// A 64-host slice through the binary on real sshd (a v5litepod-256 on a 16x16-chip v5e pool, block
// 127.144.x owned by this file): ACTIVE from nothing and again with the agents in place, each time
// over exactly one SSH connection per worker (counted in every host's sshd log): the first time
// worker 0 gets the agent over SSH and the 63 others fetch it from worker 0 (the relay), the
// second time nothing is sent.
#include <filesystem>
#include <map>

#include <doctest/doctest.h>

#include "tests/support/machine.hpp"
#include "tests/support/qr_env.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
namespace fs = std::filesystem;

namespace {

constexpr int k_hosts = 64;

// host directory name -> the logins its sshd accepted so far.
std::map<std::string, size_t> logins(const fs::path& pool_dir) {
  std::map<std::string, size_t> out;
  for (const auto& host : fs::directory_iterator(pool_dir / "hosts")) {
    size_t n = 0;
    for (const auto& line : util::split(test::read_file(host.path() / "sshd.log"), '\n')) {
      n += line.find("Accepted publickey") != std::string::npos ? 1 : 0;
    }
    out[host.path().filename().string()] = n;
  }
  return out;
}

// Every host's logins grew by exactly one since `before`.
void check_one_login_each(const std::map<std::string, size_t>& before,
                          const std::map<std::string, size_t>& after) {
  REQUIRE(after.size() == static_cast<size_t>(k_hosts));
  for (const auto& [host, n] : after) {
    CAPTURE(host);
    auto it = before.find(host);
    REQUIRE(it != before.end());
    CHECK(n == it->second + 1);
  }
}

struct Delivery {
  int sent = 0;    // workers that did not have the agent
  int relayed = 0; // of those, fetched from their seed over TCP
  int passed = 0;  // preflight passed
};

Delivery delivery(const nlohmann::json& qr) {
  const auto& workers = qr["provisioning"]["report"]["workers"];
  REQUIRE(workers.size() == static_cast<size_t>(k_hosts));
  Delivery d;
  for (const auto& w : workers) {
    d.sent += w["unchanged"].get<bool>() ? 0 : 1;
    d.relayed += w.value("relayed", false) ? 1 : 0;
    d.passed += w["preflight"].is_object() && w["preflight"].value("ok", false) ? 1 : 0;
  }
  return d;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("qr create: a 64-host slice is ACTIVE over one SSH connection per worker, twice") {
  test::QrEnv env(k_hosts, test::free_address_base("127.144.", 0, 250, k_hosts), "16x16");
  const fs::path pool_dir = env.pool_dir();

  // One create to ACTIVE, over exactly one login on every host; what its report says.
  auto create = [&]() {
    auto before = logins(pool_dir);
    auto r =
        env.run({"qr", "create", "big", "--accelerator-type", "v5litepod-256", "--format", "json"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto doc = nlohmann::json::parse(r.out);
    CHECK(doc["state"] == "ACTIVE");
    check_one_login_each(before, logins(pool_dir));
    return delivery(doc);
  };

  // Worker 0 got it over SSH; the other 63 fetched it from worker 0 over TCP.
  Delivery first = create();
  CHECK(first.sent == k_hosts);
  CHECK(first.relayed == k_hosts - 1);
  CHECK(first.passed == k_hosts);

  auto del = env.run({"qr", "delete", "big", "--force", "--quiet"});
  REQUIRE_MESSAGE(del.exit_code == 0, del.err);

  Delivery second = create();
  CHECK(second.sent == 0);
  CHECK(second.relayed == 0);
  CHECK(second.passed == k_hosts);
}

TEST_SUITE_END();
