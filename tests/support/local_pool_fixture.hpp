// A local pool of real sshd servers for integration tests (remote::create_local_sshd_pool).
//
// Address scheme, so that test files run in parallel (ctest -j) never collide: every test file
// owns one block 127.<block>.0.0/16 and passes it to the fixture:
//   201 tests/integration/test_fanout.cpp
//   202 tests/integration/test_fanout_host_keys.cpp
//   203 tests/integration/test_fanout_push.cpp
//   204 tests/integration/test_fanout_local_pool.cpp
//   205 tests/integration/test_fanout_pull.cpp
//   206 tests/integration/test_fanout_steps.cpp
// Inside its block a fixture picks the third octet by probing (starting from a pid-derived value)
// until every host address can be bound, so two runs of the same file (two build trees) do not
// collide either. Hosts are 127.<block>.<sub>.2, .3, ...; port 2222. The address .250 of the
// same /24 is left without a listener (refused_target()).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "remote/local_sshd.hpp"
#include "remote/ssh_types.hpp"
#include "tests/support/helpers.hpp"

namespace tpuctl::test {

class LocalPoolFixture {
public:
  // Starts `hosts` sshd servers (names w0, w1, ...). Throws std::runtime_error with the reason
  // when the pool cannot be created or started.
  LocalPoolFixture(size_t hosts, int block);
  // Stops every sshd by pid (also when the test failed).
  ~LocalPoolFixture();
  LocalPoolFixture(const LocalPoolFixture&) = delete;
  LocalPoolFixture& operator=(const LocalPoolFixture&) = delete;

  remote::LocalSshdPool& pool() { return m_pool; }
  std::vector<remote::SshTarget> targets() const { return m_pool.targets(); }
  // Hermetic options: no ~/.ssh/config, strict host keys, short connect timeout.
  remote::SshOptions options() const;
  // A target on this fixture's /24 where nothing listens (connection refused).
  remote::SshTarget refused_target() const;
  // SIGSTOP / SIGCONT one host's sshd listener: TCP connects, but no banner ever comes.
  void pause(size_t host);
  void resume(size_t host);
  // pause(host) now, resume(host) after `duration` on the returned thread (join it): an sshd
  // that answers late.
  std::thread pause_for(size_t host, std::chrono::milliseconds duration);
  const std::filesystem::path& dir() const { return m_tmp.path(); }

private:
  TempDir m_tmp;
  std::string m_prefix; // "127.<block>.<sub>."
  remote::LocalSshdPool m_pool;
};

// Pids of the processes whose command line or environment contains `marker` (this machine
// hosts the "remote" side of the local pool, so leftovers of a remote command show up here).
std::vector<int> processes_with_marker(const std::string& marker);

// What a test left running: waits up to 30 s for no process to carry `marker`, SIGKILLs what
// still does and returns it, one "\n  PID: COMMAND LINE" per process (empty when nothing was left).
std::string kill_leftovers(const std::string& marker);

} // namespace tpuctl::test
