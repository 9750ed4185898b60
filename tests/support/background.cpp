#include "tests/support/background.hpp"

#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"

extern char** environ;

namespace tpuctl::test {

Background::Background(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env,
                       const std::vector<std::string>& unset, const std::filesystem::path& dir,
                       const std::string& tag)
    : m_out(dir / (tag + ".out")), m_err(dir / (tag + ".err")) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) {
      vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  for (const auto& name : unset) {
    vars.erase(name);
  }
  for (const auto& [k, v] : env) {
    vars[k] = v;
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : vars) {
    env_strings.push_back(k + "=" + v);
  }
  std::vector<char*> envp, args;
  for (auto& s : env_strings) {
    envp.push_back(s.data());
  }
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) {
    args.push_back(s.data());
  }
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, m_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, m_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE_MESSAGE(rc == 0, ("cannot start " + argv[0] + ": " + std::strerror(rc)));
  m_pid = pid;
}

Background::~Background() {
  if (m_pid > 0 && !m_status) {
    ::kill(m_pid, SIGKILL);
    int st = 0;
    ::waitpid(m_pid, &st, 0);
  }
}

std::optional<int> Background::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!m_status) {
    int st = 0;
    pid_t r = ::waitpid(m_pid, &st, WNOHANG);
    if (r == m_pid) {
      m_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return m_status;
}

std::string Background::out() const {
  return read_file(m_out);
}

std::string Background::err() const {
  return read_file(m_err);
}

} // namespace tpuctl::test
