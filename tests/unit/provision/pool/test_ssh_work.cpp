// Who may do the SSH work of what an owner made, by the pool's policy (pure).
#include <doctest/doctest.h>

#include "provision/pool/ssh_work.hpp"

using namespace tpuctl::provision;

TEST_SUITE_BEGIN("unit");

TEST_CASE("ssh work: anyone lets every process; owner only the owner (one user across hosts); "
          "controller only the controller") {
  const SshWorker alice{"alice@laptop", false};
  const SshWorker alice_ci{"alice@ci-3", false};
  const SshWorker bob{"bob@laptop", false};
  const SshWorker controller{"ctl", true};
  CHECK_FALSE(ssh_work_refusal("p", SshWork::anyone, "alice@laptop", bob));
  CHECK_FALSE(ssh_work_refusal("p", SshWork::owner, "alice@laptop", alice));
  CHECK_FALSE(ssh_work_refusal("p", SshWork::owner, "alice@laptop", alice_ci));
  auto refused = ssh_work_refusal("p", SshWork::owner, "alice@laptop", bob);
  REQUIRE(refused);
  CHECK(*refused == "waiting for its owner alice@laptop (pool 'p': only an owner's own tpuctl "
                    "does the SSH work of what they made)");
  // Made before owners were recorded: anyone's, as then.
  CHECK_FALSE(ssh_work_refusal("p", SshWork::owner, "", bob));
  // The owner mode never lets the controller do someone's work under its own name.
  CHECK(ssh_work_refusal("p", SshWork::owner, "alice@laptop", controller));
  CHECK_FALSE(ssh_work_refusal("p", SshWork::controller, "alice@laptop", controller));
  auto waits = ssh_work_refusal("p", SshWork::controller, "alice@laptop", alice);
  REQUIRE(waits);
  CHECK(waits->find("waiting for the pool's controller") == 0);
}

TEST_CASE("ssh work: the three words parse back; anything else is one usage line") {
  for (SshWork w : {SshWork::anyone, SshWork::owner, SshWork::controller}) {
    auto parsed = parse_ssh_work(std::string(to_string(w)));
    REQUIRE(parsed);
    CHECK(*parsed == w);
  }
  auto bad = parse_ssh_work("Owner");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "who does the SSH work: 'Owner' is not one of owner, controller, anyone");
}

TEST_SUITE_END();
