#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "provision/pool/request_ssh.hpp"
#include "tests/support/helpers.hpp"

using tpuctl::provision::request_ssh;
using tpuctl::provision::ssh_settings_from_json;
using tpuctl::remote::HostKeyPolicy;
using tpuctl::remote::SshOptions;
using tpuctl::remote::SshSettings;

TEST_SUITE_BEGIN("provision");

TEST_CASE("provision::request_ssh lays a request's recorded settings over its owner's process "
          "only") {
  tpuctl::test::TempDir dir;
  const std::string config = (dir.path() / "ssh_config").string();
  std::ofstream(config) << "Host *\n  Port 2222\n";
  SshSettings recorded;
  recorded.strict = "accept-new";
  recorded.config_file = config;
  recorded.passphrase_file = (dir.path() / "gone").string(); // not readable here
  recorded.connect_timeout_ms = 30000;
  SshOptions own;
  own.config_file = "/etc/own_config";

  SUBCASE("the owner's process, also from another machine (the same person)") {
    for (const char* actor : {"alice@laptop", "alice@ci-3"}) {
      auto o = request_ssh(own, recorded, "alice@laptop", actor);
      REQUIRE(o);
      CHECK(o->host_key_policy == HostKeyPolicy::accept_new);
      CHECK(o->config_file == config);
      CHECK(o->connect_timeout == std::chrono::milliseconds(30000));
      CHECK_FALSE(o->passphrase_source); // the recorded file is unreadable here: left out
    }
  }
  SUBCASE("another user's process, and a request made before owners were recorded") {
    for (auto [owner, actor] : {std::pair{"alice@laptop", "bob@laptop"}, {"alice", "bob"},
                                {"", "alice@laptop"}}) {
      auto o = request_ssh(own, recorded, owner, actor);
      REQUIRE(o);
      CHECK(o->host_key_policy == HostKeyPolicy::yes);
      CHECK(o->config_file == "/etc/own_config");
      CHECK(o->connect_timeout == std::chrono::milliseconds(10000));
    }
  }
  SUBCASE("a policy this version does not know is a usage error") {
    recorded.strict = "maybe";
    auto o = request_ssh(own, recorded, "alice@laptop", "alice@laptop");
    REQUIRE_FALSE(o);
    CHECK(o.error().kind == tpuctl::ErrorKind::usage);
  }
}

TEST_CASE("provision::to_json of SshSettings round-trips and leaves out what is unset") {
  SshSettings s;
  CHECK(tpuctl::provision::to_json(s).is_null());
  CHECK(ssh_settings_from_json(nullptr) == s);
  s.strict = "no";
  s.config_file = "/home/a/.ssh/fleet";
  s.connect_timeout_ms = 5000;
  auto j = tpuctl::provision::to_json(s);
  CHECK(j.size() == 3);
  CHECK_FALSE(j.contains("identity_passphrase_file"));
  CHECK(ssh_settings_from_json(j) == s);
  // A damaged record reads as unset fields, never a failure.
  CHECK(ssh_settings_from_json(nlohmann::json{{"ssh_config", 7}, {"connect_timeout_ms", "x"}})
            .empty());
}
