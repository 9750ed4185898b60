// Option checks run_fanout and push_file make before contacting any host (no network here).
#include <doctest/doctest.h>

#include "remote/fanout.hpp"
#include "remote/push.hpp"
#include "tests/support/helpers.hpp"
#include "util/strings.hpp"

using namespace tpuctl;

TEST_SUITE_BEGIN("remote");

TEST_CASE("remote::run_fanout reports every invalid option before connecting") {
  remote::SshTarget good{"w0", "127.0.0.1", 1, "", "", "", {}, ""};
  remote::SshTarget no_address{"w1", "", 22, "", "", "", {}, ""};
  remote::SshTarget bad_extra{"w2", "127.0.0.1", 1, "", "", "", {{"ForwardAgent", "yes"}}, ""};
  remote::SshOptions opts;
  opts.batch_size = 0;
  auto r = remote::run_fanout(remote::make_jobs({good, no_address, bad_extra}, "true"), opts);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::usage);
  auto all = util::join(r.error().all_messages(), "\n");
  CHECK(all.find("--batch-size: 0 is out of range") != std::string::npos);
  CHECK(all.find("host 'w1' has no address") != std::string::npos);
  CHECK(all.find("ssh option 'ForwardAgent' is not supported") != std::string::npos);
}

TEST_CASE("remote::run_fanout with no jobs returns no results") {
  auto r = remote::run_fanout({}, remote::SshOptions{});
  REQUIRE(r);
  CHECK(r->empty());
}

TEST_CASE("remote::push_file rejects a directory as the remote path before connecting") {
  test::TempDir tmp;
  auto local = tmp.path() / "f";
  std::FILE* f = std::fopen(local.c_str(), "w");
  std::fclose(f);
  remote::SshTarget t{"w0", "127.0.0.1", 1, "", "", "", {}, ""};
  remote::PushOptions push;
  push.local_path = local;
  auto r = remote::push_file(remote::make_push_jobs({t}, "/opt/tpuctl/"), push, {});
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("'/opt/tpuctl/'") != std::string::npos);
  push.local_path = tmp.path();
  auto dir = remote::push_file(remote::make_push_jobs({t}, "/opt/x"), push, {});
  REQUIRE_FALSE(dir);
  CHECK(dir.error().message.find("not a regular file") != std::string::npos);
}
