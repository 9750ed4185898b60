#include "util/process.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace tpuctl::util {

namespace {

std::vector<std::string> build_env(const ProcessOptions& opt) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) {
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  for (const auto& k : opt.env_unset) {
    env.erase(k);
  }
  for (const auto& [k, v] : opt.env_set) {
    env[k] = v;
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : env) {
    out.push_back(k + "=" + v);
  }
  return out;
}

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd) {
      if (f >= 0) {
        ::close(f);
      }
    }
  }
  void close_end(int i) {
    if (fd[i] >= 0) {
      ::close(fd[i]);
      fd[i] = -1;
    }
  }
};

} // namespace

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    return ::access(name.c_str(), X_OK) == 0 ? name : "";
  }
  std::string path = ::getenv("PATH") ? ::getenv("PATH") : "/usr/bin:/bin";
  path += ":/usr/sbin:/sbin:/usr/local/sbin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) {
      end = path.size();
    }
    std::string dir = path.substr(start, end - start);
    if (!dir.empty()) {
      std::string candidate = dir + "/" + name;
      struct stat st {};
      if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          ::access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
    }
    start = end + 1;
  }
  return "";
}

Expected<ProcessResult> run_process(const std::vector<std::string>& argv,
                                    const ProcessOptions& options) {
  if (argv.empty()) {
    return make_error(ErrorKind::failure, "run_process: empty command");
  }
  std::string program = find_program(argv[0]);
  if (program.empty()) {
    return make_error(ErrorKind::failure, "program '" + argv[0] + "' was not found in PATH");
  }
  Pipe in, out, err;
  if (::pipe2(in.fd, O_CLOEXEC) != 0 || ::pipe2(out.fd, O_CLOEXEC) != 0 ||
      ::pipe2(err.fd, O_CLOEXEC) != 0) {
    return make_error(ErrorKind::failure, std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
  if (!options.cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t dfl;
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGPIPE);
  sigaddset(&dfl, SIGINT);
  sigaddset(&dfl, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &dfl);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> cargv;
  for (const auto& a : argv) {
    cargv.push_back(const_cast<char*>(a.c_str()));
  }
  cargv.push_back(nullptr);
  auto env = build_env(options);
  std::vector<char*> cenv;
  for (auto& e : env) {
    cenv.push_back(e.data());
  }
  cenv.push_back(nullptr);

  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return make_error(ErrorKind::failure, "cannot start '" + program + "': " + std::strerror(rc));
  }
  in.close_end(0);
  out.close_end(1);
  err.close_end(1);

  ProcessResult result;
  size_t written = 0;
  if (options.stdin_data.empty()) {
    in.close_end(1);
  } else {
    ::fcntl(in.fd[1], F_SETFL, O_NONBLOCK);
  }
  auto deadline = options.timeout ? std::chrono::steady_clock::now() + *options.timeout
                                  : std::chrono::steady_clock::time_point::max();
  char buf[65536];
  while (out.fd[0] >= 0 || err.fd[0] >= 0) {
    pollfd fds[3];
    int n = 0;
    int idx_out = -1, idx_err = -1, idx_in = -1;
    if (out.fd[0] >= 0) {
      idx_out = n;
      fds[n++] = {out.fd[0], POLLIN, 0};
    }
    if (err.fd[0] >= 0) {
      idx_err = n;
      fds[n++] = {err.fd[0], POLLIN, 0};
    }
    if (in.fd[1] >= 0) {
      idx_in = n;
      fds[n++] = {in.fd[1], POLLOUT, 0};
    }
    int wait_ms = 200;
    if (options.timeout) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) {
        ::kill(pid, SIGKILL);
        result.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<long long>(left, 200));
    }
    int pr = ::poll(fds, static_cast<nfds_t>(n), wait_ms);
    if (pr < 0 && errno != EINTR) {
      break;
    }
    auto drain = [&](int idx, Pipe& p, std::string& sink) {
      if (idx >= 0 && (fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t got = ::read(p.fd[0], buf, sizeof buf);
        if (got > 0) {
          sink.append(buf, static_cast<size_t>(got));
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          p.close_end(0);
        }
      }
    };
    drain(idx_out, out, result.out);
    drain(idx_err, err, result.err);
    if (idx_in >= 0 && (fds[idx_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::write(in.fd[1], options.stdin_data.data() + written,
                          options.stdin_data.size() - written);
      if (w > 0) {
        written += static_cast<size_t>(w);
      }
      if (w < 0 && errno != EAGAIN && errno != EINTR) {
        in.close_end(1);
      }
      if (written >= options.stdin_data.size()) {
        in.close_end(1);
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
    result.exit_code = 128 + result.signal;
  }
  return result;
}

} // namespace tpuctl::util
