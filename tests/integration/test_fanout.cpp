// The fan-out engine against 16 real sshd servers on loopback (tests/support/local_pool_fixture):
// per-host output and exit codes, the failure mix with its classification and broadcast exit
// status, killing the whole remote process tree on timeout and Ctrl-C, stdin, and big stderr.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <dirent.h>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <doctest/doctest.h>

#include "cli/fanout_output.hpp"
#include "remote/fanout.hpp"
#include "tests/support/local_pool_fixture.hpp"
#include "util/sha256.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using remote::Outcome;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int k_block = 201;
constexpr size_t k_hosts = 16;

test::LocalPoolFixture& pool() {
  static test::LocalPoolFixture fixture(k_hosts, k_block);
  return fixture;
}

std::string unique_marker() {
  std::random_device rd;
  return "tpuctl-test-marker-" + std::to_string(rd()) + std::to_string(rd());
}

// Waits up to 3 s for every process carrying `marker` to disappear; returns the survivors.
std::vector<int> survivors(const std::string& marker) {
  auto until = Clock::now() + std::chrono::seconds(3);
  std::vector<int> left = test::processes_with_marker(marker);
  while (!left.empty() && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = test::processes_with_marker(marker);
  }
  return left;
}

size_t open_fds() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (d != nullptr && ::readdir(d) != nullptr) {
    ++n;
  }
  if (d != nullptr) {
    ::closedir(d);
  }
  return n;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("remote::run_fanout runs a per-host command on 16 sshd hosts, output and exit per host") {
  auto targets = pool().targets();
  REQUIRE(targets.size() == k_hosts);
  std::vector<remote::Job> jobs;
  for (size_t i = 0; i < targets.size(); ++i) {
    // Each host gets its own command (as the worker environment prefix will be).
    std::string cmd = "export TPU_WORKER_ID=" + std::to_string(i) +
                      "; echo \"worker $TPU_WORKER_ID on $(hostname)\"; printf 'no newline %s' " +
                      std::to_string(i) + " >&2; exit " + std::to_string(i % 3 == 0 ? 0 : 40 + i);
    jobs.push_back({targets[i], cmd, i, {}});
  }
  std::mutex m;
  std::map<std::string, std::vector<std::string>> lines; // host -> "o:..." / "e:..."
  std::vector<size_t> done_order;
  remote::FanoutCallbacks cb;
  cb.on_line = [&](const remote::HostLine& l) {
    std::lock_guard lock(m); // the engine serializes calls; the lock only guards the test maps
    lines[std::string(l.host)].push_back((l.stream == remote::Stream::out ? "o:" : "e:") +
                                         std::string(l.text) + (l.complete ? "" : "<partial>"));
  };
  cb.on_host_done = [&](const remote::HostResult& r) {
    std::lock_guard lock(m);
    done_order.push_back(r.index);
  };
  size_t fds_before = open_fds();
  auto opts = pool().options();
  opts.batch_size = 5; // fewer threads than hosts: the window must slide
  auto results = remote::run_fanout(jobs, opts, cb);
  REQUIRE(results);
  REQUIRE(results->size() == k_hosts);
  CHECK(done_order.size() == k_hosts);
  std::string hostname = util::run_process({"hostname"})->out;
  hostname = std::string(util::trim(hostname));
  for (size_t i = 0; i < k_hosts; ++i) {
    const auto& r = (*results)[i];
    CAPTURE(r.host);
    CAPTURE(r.error);
    CHECK(r.index == i);
    CHECK(r.host == "w" + std::to_string(i));
    CHECK(r.out == "worker " + std::to_string(i) + " on " + hostname + "\n");
    CHECK(r.err == "no newline " + std::to_string(i));
    int want = i % 3 == 0 ? 0 : 40 + static_cast<int>(i);
    CHECK(r.exit_code == want);
    CHECK(r.outcome == (want == 0 ? Outcome::ok : Outcome::exit_code));
    CHECK(r.duration_ms >= r.first_byte_ms);
    CHECK(r.first_byte_ms >= 0);
    std::vector<std::string> expected_lines = {"o:worker " + std::to_string(i) + " on " + hostname,
                                               "e:no newline " + std::to_string(i) + "<partial>"};
    auto got = lines[r.host];
    std::sort(got.begin(), got.end()); // stdout/stderr order between streams is not defined
    std::sort(expected_lines.begin(), expected_lines.end());
    CHECK(got == expected_lines);
  }
  // The first failing host in job order decides: w1 exits 41.
  CHECK(cli::broadcast_exit_status(*results) == 41);
  // Every socket and pipe was closed again.
  CHECK(open_fds() == fds_before);
}

TEST_CASE("remote::run_fanout classifies refused, exit 3, kill -9, timeout and a hung listener") {
  auto targets = pool().targets();
  const std::string marker = unique_marker();
  std::vector<remote::Job> jobs;
  auto add = [&](const remote::SshTarget& t, const std::string& cmd) {
    jobs.push_back({t, cmd, jobs.size(), {}});
  };
  add(targets[0], "echo fine");
  add(pool().refused_target(), "echo never");
  add(targets[1], "echo three; exit 3");
  add(targets[2], "kill -9 $$");
  // Background and foreground children, all carrying the marker, past the 2 s timeout.
  add(targets[3], "export M=" + marker + "; sleep 300 & sleep 301; wait");
  add(targets[4], "echo never"); // its listener is stopped: TCP connects, no banner
  add(targets[5], "exit 0");
  pool().pause(4);
  auto opts = pool().options();
  opts.connect_timeout = std::chrono::milliseconds(2000);
  opts.command_timeout = std::chrono::milliseconds(2000);
  auto t0 = Clock::now();
  auto results = remote::run_fanout(jobs, opts);
  auto elapsed = Clock::now() - t0;
  pool().resume(4);
  REQUIRE(results);
  const auto& r = *results;
  CHECK(r[0].outcome == Outcome::ok);
  CHECK(r[0].out == "fine\n");
  CHECK(r[1].outcome == Outcome::refused);
  CHECK(r[1].error.find("connection refused") != std::string::npos);
  CHECK(r[2].outcome == Outcome::exit_code);
  CHECK(r[2].exit_code == 3);
  CHECK(r[2].out == "three\n");
  CHECK(r[3].outcome == Outcome::signal);
  CHECK(r[3].signal_name == "KILL");
  CHECK(r[3].signal_number == 9);
  CHECK(r[4].outcome == Outcome::timeout);
  CHECK(r[4].error.find("timed out after 2s") != std::string::npos);
  CHECK(r[5].outcome == Outcome::unreachable);
  CHECK(r[5].error.find("within 2s") != std::string::npos);
  CHECK(r[6].outcome == Outcome::ok);
  // The whole run is bounded by the timeouts, not by `sleep 300` (by a margin no load erases:
  // how soon is the fan-out benchmark's to measure).
  CHECK(elapsed < std::chrono::seconds(150));
  // Nothing the timed-out command started survives.
  CHECK(survivors(marker).empty());

  // The broadcast exit status is that of the first failing host in job order.
  CHECK(cli::broadcast_exit_status(r) == 255); // refused
  std::vector<remote::HostResult> from_exit3(r.begin() + 2, r.end());
  CHECK(cli::broadcast_exit_status(from_exit3) == 3);
  std::vector<remote::HostResult> from_kill(r.begin() + 3, r.end());
  CHECK(cli::broadcast_exit_status(from_kill) == 137);
  std::vector<remote::HostResult> from_timeout(r.begin() + 4, r.end());
  CHECK(cli::broadcast_exit_status(from_timeout) == 124);
  std::vector<remote::HostResult> from_hung(r.begin() + 5, r.end());
  CHECK(cli::broadcast_exit_status(from_hung) == 255);
}

TEST_CASE("remote::run_fanout escalates to KILL and kills orphans and setsid children") {
  auto targets = pool().targets();
  const std::string marker = unique_marker();
  std::vector<remote::Job> jobs;
  // Ignores TERM: needs the KILL after the grace period.
  jobs.push_back(
      {targets[6], "export M=" + marker + "; trap '' TERM; sleep 300; sleep 300", 0, {}});
  // The shell exits at once but leaves a child holding stdout open: no session leader is left.
  jobs.push_back({targets[7], "export M=" + marker + "; sleep 302 & exit 0", 1, {}});
  // A child in a session of its own, outside the command's session.
  jobs.push_back(
      {targets[8], "export M=" + marker + "; setsid sleep 303 & sleep 304; wait", 2, {}});
  auto opts = pool().options();
  opts.command_timeout = std::chrono::milliseconds(1000);
  opts.kill_grace = std::chrono::milliseconds(500);
  auto results = remote::run_fanout(jobs, opts);
  REQUIRE(results);
  for (const auto& r : *results) {
    CAPTURE(r.host);
    CHECK(r.outcome == Outcome::timeout);
  }
  CHECK(survivors(marker).empty());
}

TEST_CASE("remote::run_fanout stops on cancel, kills the commands and marks hosts interrupted") {
  auto targets = pool().targets();
  const std::string marker = unique_marker();
  auto jobs = remote::make_jobs(targets, "export M=" + marker + "; sleep 300");
  auto opts = pool().options();
  opts.batch_size = 8; // half the hosts are still queued when the cancel comes
  remote::CancelToken cancel;
  std::atomic<int> started{0};
  remote::FanoutCallbacks cb;
  std::thread trigger([&] {
    // Cancel once the first batch is running (the marker shows up on this machine).
    auto until = Clock::now() + std::chrono::seconds(10);
    while (test::processes_with_marker(marker).size() < 8 && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    started = static_cast<int>(test::processes_with_marker(marker).size());
    cancel.cancel();
  });
  auto t0 = Clock::now();
  auto results = remote::run_fanout(jobs, opts, cb, &cancel);
  auto elapsed = Clock::now() - t0;
  trigger.join();
  REQUIRE(results);
  CHECK(started >= 8);
  CHECK(elapsed < std::chrono::seconds(150)); // the cancel ended it, not the `sleep 300`
  size_t killed = 0, never_started = 0;
  for (const auto& r : *results) {
    CAPTURE(r.host);
    CAPTURE(r.error);
    CHECK(r.outcome == Outcome::interrupted);
    killed += r.error.find("was killed") != std::string::npos;
    never_started += r.error.find("before") != std::string::npos;
  }
  CHECK(killed >= 8);
  CHECK(killed + never_started == k_hosts);
  CHECK(cli::broadcast_exit_status(*results) == 130);
  CHECK(survivors(marker).empty());
}

TEST_CASE("remote::run_fanout gives stdin EOF at once, or broadcasts --stdin data to every host") {
  auto targets = pool().targets();
  SUBCASE("without --stdin a remote cat sees EOF immediately") {
    auto opts = pool().options();
    opts.command_timeout = std::chrono::seconds(20);
    auto results = remote::run_fanout(remote::make_jobs(targets, "cat; echo eof"), opts);
    REQUIRE(results);
    for (const auto& r : *results) {
      CAPTURE(r.host);
      CHECK(r.outcome == Outcome::ok); // not a timeout: cat saw EOF before the 20 s
      CHECK(r.out == "eof\n");
    }
  }
  SUBCASE("--stdin sends the same bytes to every host, then EOF") {
    std::string data;
    for (int i = 0; i < 20000; ++i) {
      data += "line " + std::to_string(i) + " of the broadcast\n";
    }
    auto opts = pool().options();
    opts.stdin_data = tpuctl::remote::InputBytes::of(data);
    opts.command_timeout = std::chrono::seconds(30);
    auto results = remote::run_fanout(remote::make_jobs(targets, "sha256sum"), opts);
    REQUIRE(results);
    std::string want = util::sha256_hex(data) + "  -\n";
    for (const auto& r : *results) {
      CAPTURE(r.host);
      CHECK(r.outcome == Outcome::ok);
      CHECK(r.out == want);
    }
  }
}

TEST_CASE("remote::run_fanout reads stdout and stderr together: 6 MB of stderr does not stall") {
  auto targets = pool().targets();
  std::vector<remote::SshTarget> four(targets.begin(), targets.begin() + 4);
  auto opts = pool().options();
  opts.command_timeout = std::chrono::seconds(30);
  size_t err_lines = 0, partial_lines = 0, torn_lines = 0;
  remote::FanoutCallbacks cb;
  cb.on_line = [&](const remote::HostLine& l) {
    if (l.stream != remote::Stream::err) {
      return;
    }
    if (l.complete) {
      ++err_lines;
      torn_lines += l.text != "0123456789abcdefghijklmnopqrstuvwxyz";
    } else {
      ++partial_lines; // head -c cut the last line: 6000000 = 162162 * 37 + 6
      CHECK(l.text == "012345");
    }
  };
  // stderr is written first and exceeds the channel window several times over.
  auto results = remote::run_fanout(
      remote::make_jobs(four, "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 6000000 >&2; "
                              "echo stdout-after-stderr"),
      opts, cb);
  REQUIRE(results);
  for (const auto& r : *results) {
    CAPTURE(r.host);
    CHECK(r.outcome == Outcome::ok);
    CHECK(r.err.size() == 6000000);
    CHECK(r.out == "stdout-after-stderr\n");
  }
  CHECK(err_lines == 4 * 162162);
  CHECK(torn_lines == 0);
  CHECK(partial_lines == 4);
}

TEST_CASE("remote::run_fanout keeps an idle session alive and can run under a pty") {
  auto targets = pool().targets();
  std::vector<remote::SshTarget> two(targets.begin() + 9, targets.begin() + 11);
  SUBCASE("keepalives every 200 ms while the command is silent") {
    auto opts = pool().options();
    opts.keepalive_interval = std::chrono::milliseconds(200);
    opts.command_timeout = std::chrono::seconds(20);
    auto results = remote::run_fanout(remote::make_jobs(two, "sleep 1; echo awake"), opts);
    REQUIRE(results);
    for (const auto& r : *results) {
      CHECK(r.outcome == Outcome::ok);
      CHECK(r.out == "awake\n");
    }
  }
  SUBCASE("--tty: a terminal, stderr merged into stdout, CRLF line ends") {
    auto opts = pool().options();
    opts.tty = true;
    auto results = remote::run_fanout(
        remote::make_jobs(two, "test -t 1 && echo is-a-tty; echo to-stderr >&2"), opts);
    REQUIRE(results);
    for (const auto& r : *results) {
      CHECK(r.outcome == Outcome::ok);
      CHECK(r.out == "is-a-tty\r\nto-stderr\r\n");
      CHECK(r.err.empty());
    }
  }
}

TEST_CASE("remote::run_fanout cancel interrupts a host stuck waiting for the ssh banner") {
  auto targets = pool().targets();
  std::vector<remote::SshTarget> one = {targets[12]};
  pool().pause(12);
  auto opts = pool().options();
  opts.connect_timeout = std::chrono::seconds(30);
  remote::CancelToken cancel;
  std::thread trigger([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    cancel.cancel();
  });
  auto t0 = Clock::now();
  auto results = remote::run_fanout(remote::make_jobs(one, "true"), opts, {}, &cancel);
  auto elapsed = Clock::now() - t0;
  trigger.join();
  pool().resume(12);
  REQUIRE(results);
  CHECK(results->front().outcome == Outcome::interrupted);
  CHECK(elapsed < std::chrono::seconds(20)); // not the 30 s connect timeout
}

TEST_CASE("remote::run_fanout reports a connection lost mid-command as a transport error") {
  auto targets = pool().targets();
  // The login shell's parent is the sshd process serving this connection: killing it drops the
  // TCP connection while the command runs.
  const std::string marker = unique_marker();
  auto results = remote::run_fanout(
      remote::make_jobs({targets[13]},
                        "export M=" + marker + "; echo before; sleep 0.2; kill -9 $PPID; sleep 5"),
      pool().options());
  // With the connection gone nobody can kill the remote `sleep 5`; it runs on this machine, so
  // the test removes it itself.
  for (int pid : test::processes_with_marker(marker)) {
    ::kill(pid, SIGKILL);
  }
  REQUIRE(results);
  const auto& r = results->front();
  CAPTURE(r.error);
  CHECK(r.outcome == Outcome::error);
  CHECK(r.error.find("lost") != std::string::npos);
  CHECK(r.out == "before\n");
  CHECK(cli::broadcast_exit_status(*results) == 255);
}

TEST_CASE("remote::run_fanout tries a connection again when the banner came late: a slow sshd "
          "does not fail the host (SshOptions::connect_retries)") {
  auto targets = pool().targets();
  auto opts = pool().options();
  opts.connect_timeout = std::chrono::milliseconds(1000);
  const std::vector<remote::Job> jobs{{targets[13], "echo late", 0, {}}};
  // No retry: the listener frozen for longer than the timeout fails the host.
  opts.connect_retries = 0;
  std::thread resume = pool().pause_for(13, std::chrono::milliseconds(1600));
  auto once = remote::run_fanout(jobs, opts);
  resume.join();
  REQUIRE(once);
  CHECK((*once)[0].outcome == Outcome::unreachable);
  CHECK((*once)[0].error.find("within 1s") != std::string::npos);
  // One retry 0.25 s later, when the listener is back: the host succeeds.
  opts.connect_retries = 1;
  std::thread resume2 = pool().pause_for(13, std::chrono::milliseconds(1600));
  auto retried = remote::run_fanout(jobs, opts);
  resume2.join();
  REQUIRE(retried);
  CHECK((*retried)[0].outcome == Outcome::ok);
  CHECK((*retried)[0].out == "late\n");
}
