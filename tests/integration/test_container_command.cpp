// The script a worker runs for a workload in an image (provision/workload/container.hpp), run by
// the real /bin/sh with a stand-in `docker` first on PATH (real containers cannot start on the
// development and CI machines): the container's exit status is the script's, TERM removes the
// container, only variable names reach the runtime's command line, and hostile images and
// names are refused before any command is built.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <doctest/doctest.h>

#include "provision/workload/container.hpp"
#include "tests/support/helpers.hpp"
#include "util/process.hpp"

using namespace tpuctl;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("integration");

namespace {

// A `docker` that records its arguments, runs the `/bin/sh -c CMD` at the end of `run` (as the
// container), and on `rm -f NAME` stops that, as removing a container does.
fs::path fake_runtime(const fs::path& dir) {
  const fs::path bin = dir / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "docker") << "#!/bin/sh\n"
                                   "echo \"$*\" >> \""
                                << (dir / "calls").string()
                                << "\"\n"
                                   "if [ \"$1\" = rm ] || [ \"$1\" = stop ]; then p=$(cat \""
                                << (dir / "runpid").string()
                                << "\"); pkill -P \"$p\"; kill \"$p\"; exit 0; fi\n"
                                   "echo $$ > \""
                                << (dir / "runpid").string()
                                << "\"\n"
                                   "while [ $# -gt 0 ] && [ \"$1\" != /bin/sh ]; do shift; done\n"
                                   "exec \"$@\"\n";
  fs::permissions(bin / "docker", fs::perms::owner_all);
  return bin;
}

provision::WorkerPlan plan() {
  provision::WorkerPlan p;
  p.node = "demo-0";
  p.worker = 2;
  p.env = {{"TPU_WORKER_ID", "2"}, {"SECRET_TOKEN", "hunter2"}};
  return p;
}

} // namespace

TEST_CASE("container: the script's exit status is the container's; variables pass by name") {
  test::TempDir dir;
  const fs::path bin = fake_runtime(dir.path());
  provision::ContainerSpec spec{"python:3.10", "jax-tpu", "docker", false};
  const std::string script = provision::container_command(
      spec, "0123456789abcdef", plan(), dir.path().string(), "", "echo in $TPU_WORKER_ID; exit 5");
  util::ProcessOptions o;
  o.env_set = {{"PATH", bin.string() + ":/usr/bin:/bin"},
               {"TPU_WORKER_ID", "2"},
               {"SECRET_TOKEN", "hunter2"}};
  auto r = util::run_process({"/bin/sh", "-c", script}, o);
  REQUIRE(r);
  CHECK(r->exit_code == 5);
  CHECK(r->out == "in 2\n");
  const std::string calls = tpuctl::test::read_file(dir.path() / "calls");
  CHECK(calls.find("run --rm --name jax-tpu-01234567-demo-0-2 --network host") == 0);
  CHECK(calls.find("-e TPU_WORKER_ID -e SECRET_TOKEN") != std::string::npos);
  CHECK(calls.find("hunter2") == std::string::npos); // values never on a command line
  CHECK(calls.find(" python:3.10 /bin/sh -c ") != std::string::npos);
}

TEST_CASE("container: TERM to the script stops the container with the job's grace, then removes "
          "it (delete and restarts leave none)") {
  test::TempDir dir;
  const fs::path bin = fake_runtime(dir.path());
  provision::ContainerSpec spec{"python:3.10", "jax-tpu", "docker", false};
  const std::string script = provision::container_command(spec, "0123456789abcdef", plan(),
                                                          dir.path().string(), "", "sleep 30");
  const fs::path pidfile = dir.path() / "pid";
  // TERM once the container runs: the runtime's `run` (its pid file) comes after the script's
  // trap is set, so the signal meets the trap, however slow the machine.
  std::thread killer([&] {
    const fs::path running = dir.path() / "runpid";
    tpuctl::test::wait_until([&] { return fs::exists(pidfile) && fs::exists(running); },
                             std::chrono::seconds(15));
    ::kill(std::stoi(tpuctl::test::read_file(pidfile)), SIGTERM);
  });
  util::ProcessOptions o;
  o.env_set = {{"PATH", bin.string() + ":/usr/bin:/bin"},
               {"TPUCTL_TERMINATION_GRACE_SECONDS", "5"}};
  o.timeout = std::chrono::seconds(20);
  auto r = util::run_process({"/bin/sh", "-c", "echo $$ > " + pidfile.string() + "; " + script}, o);
  killer.join();
  REQUIRE(r);
  CHECK(r->exit_code == 143);
  CHECK_FALSE(r->timed_out);
  const std::string calls = tpuctl::test::read_file(dir.path() / "calls");
  // The runtime's own KILL comes a second before the supervisor's.
  CHECK(calls.find("stop -t 4 jax-tpu-01234567-demo-0-2") != std::string::npos);
  CHECK(calls.find("rm -f jax-tpu-01234567-demo-0-2") != std::string::npos);
}

TEST_CASE("container: hostile images, names and runtimes are refused before anything is built") {
  for (const char* image : {"a;rm -rf /", "$(id)", "img name", "-v/:/host", "x`id`"}) {
    CAPTURE(image);
    provision::ContainerSpec spec{image, "jax-tpu", "auto", false};
    auto v = provision::validate_container(spec);
    REQUIRE(!v);
    CHECK(v.error().kind == ErrorKind::usage);
  }
  CHECK(!provision::validate_container({"python:3.10", "a b", "auto", false}));
  CHECK(!provision::validate_container({"python:3.10", "jax", "lxc", false}));
  CHECK(provision::validate_container(
      {"us-docker.pkg.dev/p/r/maxtext@sha256:0a1b", "jax-tpu", "podman", false}));
}
