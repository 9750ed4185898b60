// The agent relay (provisioning.cpp: one seed per 64 workers gets the agent over SSH, the others
// fetch it from their seed over TCP) through the binary on a local v5e pool of 8 real sshd hosts
// (block 127.147.x owned by this file), when the relay cannot be trusted: something else already
// listens on the seed's relay port and answers with wrong bytes. Every fetch then fails its
// sha256 check, each of those workers gets the agent over SSH instead, and the slice is ACTIVE
// with a correct agent everywhere.
#include <atomic>
#include <thread>

#include <doctest/doctest.h>

#include "agent/tcp.hpp"
#include "tests/support/machine.hpp"
#include "tests/support/qr_env.hpp"
#include "util/sha256.hpp"

using namespace tpuctl;

TEST_SUITE_BEGIN("integration");

TEST_CASE("agent relay: a seed port answering wrong bytes sends every worker's agent over SSH") {
  const std::string base = test::free_address_base("127.147.", 0, 250, 8);
  test::QrEnv env(8, base, "4x8");
  // The seed is worker 0, the pool's first host (base); 8477 is the relay port.
  auto listener = agent::listen_on(base, 8477);
  REQUIRE_MESSAGE(listener, listener.error().message);
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0};
  std::thread impostor([&] {
    const std::string junk(1000, 'x');
    while (!stop) {
      auto s = agent::accept_until(*listener,
                                   agent::SteadyClock::now() + std::chrono::milliseconds(200));
      if (s) {
        (void)agent::send_all_until(*s, junk.data(), junk.size(),
                                    agent::SteadyClock::now() + std::chrono::seconds(2));
        ++answered;
      }
    }
  });
  auto created =
      env.run({"qr", "create", "r", "--accelerator-type", "v5litepod-32", "--format", "json"});
  stop = true;
  impostor.join();
  REQUIRE_MESSAGE(created.exit_code == 0, created.err);
  auto qr = nlohmann::json::parse(created.out);
  CHECK(qr["state"] == "ACTIVE");
  CHECK(answered >= 7); // every fetcher reached the impostor
  const std::string sha = qr["provisioning"]["agent_sha256"];
  const auto& workers = qr["provisioning"]["report"]["workers"];
  REQUIRE(workers.size() == 8);
  int relayed = 0, fetched = 0;
  for (const auto& w : workers) {
    CAPTURE(w["host"]);
    if (w.contains("relayed")) {
      ++fetched;
      relayed += w["relayed"].get<bool>() ? 1 : 0;
    }
    CHECK(util::sha256_file_hex(w["agent_path"].get<std::string>()).value_or("") == sha);
  }
  CHECK(fetched == 7);
  CHECK(relayed == 0);
}

TEST_SUITE_END();
