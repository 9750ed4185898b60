#include "tests/support/local_pool_fixture.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"

namespace tpuctl::test {

namespace {} // namespace

LocalPoolFixture::LocalPoolFixture(size_t hosts, int block) {
  if (block < 2 || block > 254 || hosts == 0 || hosts > 240) {
    throw std::runtime_error("LocalPoolFixture: bad block or host count");
  }
  constexpr uint16_t k_port = 2222;
  int start = static_cast<int>(::getpid() % 200) + 1;
  for (int attempt = 0; attempt < 60 && m_prefix.empty(); ++attempt) {
    int sub = 1 + (start + attempt * 7) % 250;
    std::string prefix = "127." + std::to_string(block) + "." + std::to_string(sub) + ".";
    bool free = can_bind(prefix + "250", k_port);
    for (size_t i = 0; free && i < hosts; ++i) {
      free = can_bind(prefix + std::to_string(2 + i), k_port);
    }
    if (free) {
      m_prefix = prefix;
    }
  }
  if (m_prefix.empty()) {
    throw std::runtime_error("LocalPoolFixture: no free address block in 127." +
                             std::to_string(block) + ".0.0/16");
  }
  remote::LocalSshdOptions options;
  options.root = m_tmp.path() / "pool";
  // root's ~/.bashrc on the dev machine costs ~1 s per login (pyenv init); SHLVL=1 makes bash
  // skip it, as it does for nested shells. The engine under test does not depend on it.
  // Every session carries the fixture's directory: the destructor finds what a test left.
  options.session_env = {{"SHLVL", "1"}, {"TPUCTL_TEST_POOL", m_tmp.path().string()}};
  for (size_t i = 0; i < hosts; ++i) {
    options.hosts.push_back({"w" + std::to_string(i), m_prefix + std::to_string(2 + i), k_port});
  }
  auto pool = remote::create_local_sshd_pool(options);
  if (!pool) {
    throw std::runtime_error("cannot create the local pool: " + pool.error().message);
  }
  m_pool = std::move(*pool);
  auto started = remote::start_local_sshd_pool(m_pool);
  if (!started) {
    throw std::runtime_error("cannot start the local pool: " + started.error().message);
  }
}

LocalPoolFixture::~LocalPoolFixture() {
  (void)remote::stop_local_sshd_pool(m_pool);
  // Every test ends with this check: what ran through the servers (commands, reapers, kill
  // scripts) ends by itself once its connection is gone. Whatever is left after 30 s is a leak.
  const std::string what = kill_leftovers("TPUCTL_TEST_POOL=" + m_tmp.path().string());
  if (doctest::is_running_in_test) {
    CHECK_MESSAGE(what.empty(), ("processes left running after the test:" + what));
  } else if (!what.empty()) {
    // A file-wide fixture ends after the last test: no test to fail, so the run fails.
    std::fprintf(stderr, "processes left running after the tests:%s\n", what.c_str());
    std::_Exit(1);
  }
}

remote::SshOptions LocalPoolFixture::options() const {
  remote::SshOptions o;
  o.process_config = false;
  o.use_agent = false;
  o.connect_timeout = std::chrono::seconds(5);
  o.host_key_policy = remote::HostKeyPolicy::yes;
  return o;
}

remote::SshTarget LocalPoolFixture::refused_target() const {
  remote::SshTarget t = m_pool.targets().front();
  t.name = "refused";
  t.address = m_prefix + "250";
  return t;
}

void LocalPoolFixture::pause(size_t host) {
  if (m_pool.hosts.at(host).pid > 0) {
    ::kill(m_pool.hosts.at(host).pid, SIGSTOP);
  }
}

void LocalPoolFixture::resume(size_t host) {
  if (m_pool.hosts.at(host).pid > 0) {
    ::kill(m_pool.hosts.at(host).pid, SIGCONT);
  }
}

std::thread LocalPoolFixture::pause_for(size_t host, std::chrono::milliseconds duration) {
  pause(host);
  return std::thread([this, host, duration] {
    std::this_thread::sleep_for(duration);
    resume(host);
  });
}

std::vector<int> processes_with_marker(const std::string& marker) {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) {
    return out;
  }
  const int self = ::getpid();
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    int pid = std::stoi(name);
    if (pid == self) {
      continue;
    }
    std::string base = "/proc/" + name;
    std::string stat = read_file(base + "/stat");
    size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') {
      continue; // a zombie is dead
    }
    if (read_file(base + "/cmdline").find(marker) != std::string::npos ||
        read_file(base + "/environ").find(marker) != std::string::npos) {
      out.push_back(pid);
    }
  }
  ::closedir(d);
  return out;
}

std::string kill_leftovers(const std::string& marker) {
  std::vector<int> left = processes_with_marker(marker);
  for (int i = 0; i < 300 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = processes_with_marker(marker);
  }
  std::string what;
  for (int pid : left) {
    std::string cmd = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    what += "\n  " + std::to_string(pid) + ": " + cmd.substr(0, 300);
    ::kill(pid, SIGKILL);
  }
  return what;
}

} // namespace tpuctl::test
