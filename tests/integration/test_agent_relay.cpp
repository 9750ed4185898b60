// The agent relay (provisioning.cpp: one seed per 64 workers gets the agent over SSH, the others
// fetch it from their seed over TCP) through the binary on a local v5e pool of 8 real sshd hosts
// (block 127.147.x owned by this file), when the relay cannot be used: something else already
// listens on the seed's relay port and does not give it up. The seed then cannot serve, each
// worker of its group gets the agent over SSH instead, and the slice is ACTIVE with a correct
// agent everywhere. Then the pieces: the fetch script against serve-file (the right bytes, wrong
// bytes, a server that starts late), a background server stopped and taken over, and the
// check that fetches only what is missing.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <signal.h>
#include <thread>

#include <doctest/doctest.h>

#include "agent/tcp.hpp"
#include "remote/push.hpp"
#include "tests/support/background.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/machine.hpp"
#include "tests/support/qr_env.hpp"
#include "util/process.hpp"
#include "util/sha256.hpp"

using namespace tpuctl;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

TEST_CASE("agent relay: a seed whose relay port is taken sends every worker's agent over SSH") {
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
  CHECK(answered >= 1); // the seed's server asked the port's holder to stop, in vain
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
  CHECK(workers[0]["serving"] == false); // the seed could not serve its group
}

TEST_CASE(
    "agent relay: push_fetch_script installs what serve-file sends, and refuses other bytes") {
  test::TempDir tmp;
  const std::string addr = "127.147.250.9"; // this file's block, outside free_address_base's range
  auto good = tmp.path() / "good";
  auto bad = tmp.path() / "bad";
  {
    std::ofstream(good, std::ios::binary) << std::string(200000, 'g') << "end";
    std::ofstream(bad, std::ios::binary) << std::string(200000, 'b') << "end";
  }
  const std::string sha = util::sha256_file_hex(good).value_or("");
  struct Served {
    int exit_code = -1;
    std::string out;
  };
  auto fetch = [&](const fs::path& served, const fs::path& dest) {
    test::Background server({test::tpuctl_binary(), "agent", "serve-file", "--file",
                             served.string(), "--bind", addr, "--port", "8477", "--clients", "1",
                             "--timeout", "20s", "--format", "json"},
                            {}, {}, tmp.path(), "serve-" + dest.parent_path().filename().string());
    auto r = util::run_process(
        {"bash", "-c",
         remote::push_fetch_script(dest.string(), sha, 0700, addr, 8477, "t1", true)});
    Served s;
    s.exit_code = server.wait(std::chrono::seconds(20)).value_or(-1);
    s.out = server.out();
    REQUIRE(r);
    return std::make_pair(*r, s);
  };
  auto [ok, ok_server] = fetch(good, tmp.path() / "w0" / "agent");
  CHECK(ok.exit_code == 0);
  CHECK(ok.err == "");
  CHECK(util::sha256_file_hex(tmp.path() / "w0" / "agent").value_or("") == sha);
  CHECK((fs::status(tmp.path() / "w0" / "agent").permissions() & fs::perms::all) ==
        fs::perms::owner_all);
  CHECK(fs::exists(tmp.path() / "w0" / "agent.sha256"));
  CHECK(ok_server.exit_code == 0);
  CHECK(nlohmann::json::parse(ok_server.out)["served"] == 1);

  // A seed that starts listening only after the fetch began: the fetch waits for it.
  {
    const fs::path dest = tmp.path() / "w2" / "agent";
    test::Background fetcher(
        {"/bin/bash", "-c",
         remote::push_fetch_script(dest.string(), sha, 0700, addr, 8477, "t2", true)},
        {}, {}, tmp.path(), "late-fetch");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    test::Background server({test::tpuctl_binary(), "agent", "serve-file", "--file", good.string(),
                             "--bind", addr, "--port", "8477", "--clients", "1", "--timeout",
                             "20s"},
                            {}, {}, tmp.path(), "late-serve");
    CHECK(fetcher.wait(std::chrono::seconds(20)).value_or(-1) == 0);
    CHECK(server.wait(std::chrono::seconds(20)).value_or(-1) == 0);
    CHECK(util::sha256_file_hex(dest).value_or("") == sha);
  }

  // A background server returns once it listens, serves until asked to stop, and a second one
  // takes the port over from the first.
  {
    auto started = [&](const std::string& name) {
      auto r = util::run_process({test::tpuctl_binary(), "agent", "serve-file", "--background",
                                  "--file", good.string(), "--bind", addr, "--port", "8477",
                                  "--clients", "0", "--timeout", "20s", "--format", "json"});
      CAPTURE(name);
      REQUIRE(r);
      CHECK(r->exit_code == 0);
      return nlohmann::json::parse(r->out)["pid"].get<int>();
    };
    auto gone = [](int pid) {
      for (int i = 0; i < 100; ++i) {
        if (::kill(pid, 0) != 0) {
          return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      return false;
    };
    const int first = started("first");
    REQUIRE(first > 0);
    CHECK(::kill(first, 0) == 0);
    const int second = started("second");
    REQUIRE(second > 0);
    CHECK(gone(first));
    const fs::path dest = tmp.path() / "w3" / "agent";
    auto r = util::run_process(
        {"bash", "-c",
         remote::push_fetch_script(dest.string(), sha, 0700, addr, 8477, "t3", true)});
    REQUIRE(r);
    CHECK(r->exit_code == 0);
    auto stop = util::run_process({test::tpuctl_binary(), "agent", "serve-file", "--stop", "--bind",
                                   addr, "--port", "8477", "--format", "json"});
    REQUIRE(stop);
    CHECK(nlohmann::json::parse(stop->out)["stopped"] == true);
    CHECK(gone(second));

    // The check fetches only what is missing: in place, exit 0 without a server; missing and no
    // seed to fetch from, exit 11.
    auto check = [&](const fs::path& at, const std::string& host) {
      auto c = util::run_process(
          {"bash", "-c",
           remote::push_check_or_fetch_script(at.string(), sha, 0700, host, 8477, "t4")});
      REQUIRE(c);
      return c->exit_code;
    };
    CHECK(check(dest, addr) == 0);
    CHECK(check(tmp.path() / "w4" / "agent", "") == remote::k_missing_exit);
    CHECK_FALSE(fs::exists(tmp.path() / "w4" / "agent"));
  }

  auto [refused, refused_server] = fetch(bad, tmp.path() / "w1" / "agent");
  CHECK(refused.exit_code == 97);
  CHECK(refused.err.find("expected " + sha) != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.path() / "w1" / "agent"));
  size_t left = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path() / "w1")) {
    ++left;
  }
  CHECK(left == 0); // the temporary file is gone too
}

TEST_SUITE_END();
