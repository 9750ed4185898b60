// What `qr delete --force` stops on the workers (a local v5e pool of 4 real sshd hosts, block
// 127.145.x owned by this file): a slice nothing was started on since provisioning is deleted
// without contacting any host (no login in any sshd log), while a process that `tpuctl ssh` left
// running in the background, or a startup script's daemon, is killed by the delete.
#include <filesystem>
#include <map>
#include <thread>

#include <doctest/doctest.h>

#include "tests/support/local_pool_fixture.hpp"
#include "tests/support/machine.hpp"
#include "tests/support/qr_env.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
namespace fs = std::filesystem;

namespace {

size_t logins(const fs::path& pool_dir) {
  size_t n = 0;
  for (const auto& host : fs::directory_iterator(pool_dir / "hosts")) {
    for (const auto& line : util::split(test::read_file(host.path() / "sshd.log"), '\n')) {
      n += line.find("Accepted publickey") != std::string::npos ? 1 : 0;
    }
  }
  return n;
}

// Waits up to 5 s for the processes carrying `marker` to be gone; how many are left.
size_t left_after_wait(const std::string& marker) {
  for (int i = 0; i < 50; ++i) {
    if (test::processes_with_marker(marker).empty()) {
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return test::processes_with_marker(marker).size();
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("qr delete: nothing launched contacts no host; what ssh or a startup script left is "
          "killed") {
  test::QrEnv env(4, test::free_address_base("127.145.", 0, 250, 4), "4x4");
  const fs::path pool_dir = env.pool_dir();
  auto create = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args{"qr", "create", "s", "--accelerator-type", "v5litepod-16"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = env.run(args);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  };
  auto remove = [&]() {
    auto r = env.run({"qr", "delete", "s", "--force", "--quiet"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  };

  SUBCASE("nothing started since provisioning: no SSH at all") {
    create({});
    const size_t before = logins(pool_dir);
    remove();
    CHECK(logins(pool_dir) == before);
    CHECK(env.run({"qr", "describe", "s"}).exit_code == 4); // gone
  }
  SUBCASE("a background process left by tpuctl ssh is killed") {
    create({});
    const std::string marker = "tpuctl-delete-test-" + std::to_string(::getpid());
    auto ssh = env.run({"ssh", "s", "--worker=all", "--command",
                        "MARK=" + marker + " nohup sleep 300 >/dev/null 2>&1 &"});
    REQUIRE_MESSAGE(ssh.exit_code == 0, ssh.err);
    // The marker is in each sleep's environment.
    REQUIRE(test::processes_with_marker(marker).size() == 4);
    const size_t before = logins(pool_dir);
    remove();
    CHECK(logins(pool_dir) > before);
    CHECK(left_after_wait(marker) == 0);
  }
  SUBCASE("a startup script's daemon is killed") {
    const std::string marker = "tpuctl-delete-startup-" + std::to_string(::getpid());
    create({"--metadata", "startup-script=MARK=" + marker + " nohup sleep 300 >/dev/null 2>&1 &"});
    REQUIRE(test::processes_with_marker(marker).size() == 4);
    remove();
    CHECK(left_after_wait(marker) == 0);
  }
}

TEST_SUITE_END();
