#include "agent/supervise.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <signal.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/private_files.hpp"

namespace tpuctl::agent {

using Json = nlohmann::json;

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Writes `text` to `path` through a temporary file and rename(), so readers never see half.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return;
  }
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(fd);
  ::rename(tmp.c_str(), path.c_str());
}

void write_all(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;
    }
    off += static_cast<size_t>(n);
  }
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? abbrev : std::to_string(sig);
}

} // namespace

bool group_has_live_members(int pgid) {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) {
    return ::kill(-pgid, 0) == 0;
  }
  bool live = false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') {
      continue;
    }
    std::ifstream stat(std::string("/proc/") + e->d_name + "/stat");
    std::string text;
    std::getline(stat, text);
    auto paren = text.rfind(')');
    if (paren == std::string::npos) {
      continue;
    }
    std::istringstream rest(text.substr(paren + 1));
    char state = 0;
    long ppid = 0;
    long group = 0;
    if (rest >> state >> ppid >> group && group == pgid && state != 'Z' && state != 'X') {
      live = true;
      break;
    }
  }
  ::closedir(d);
  return live;
}

namespace {

// Stops what is left of process group `pgid`: TERM, then KILL after `grace`. Zombies (exited,
// waiting for a parent that may never reap them) do not count as left.
void stop_group(pid_t pgid, std::chrono::milliseconds grace) {
  if (::kill(-pgid, SIGTERM) != 0) {
    return; // the group is gone
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!group_has_live_members(pgid)) {
      return;
    }
    ::usleep(50 * 1000);
  }
  ::kill(-pgid, SIGKILL);
}

// The supervisor: never returns. `ready` gets "ok <supervisor> <pid>\n" once the command runs,
// or "error <message>\n".
[[noreturn]] void supervise(const SuperviseOptions& o, int ready) {
  const std::string log_path = o.dir + "/log";
  const std::string status_path = o.dir + "/status.json";
  const std::string heartbeat_path = o.dir + "/heartbeat";
  auto fail = [&](const std::string& what) {
    write_all(ready, "error " + what + ": " + std::strerror(errno) + "\n");
    ::_exit(1);
  };
  int null = ::open("/dev/null", O_RDONLY);
  int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (null < 0 || log < 0) {
    fail("cannot open the log " + log_path);
  }
  ::fchmod(log, 0600);
  ::dup2(null, 0);
  ::dup2(log, 1);
  ::dup2(log, 2);
  ::close(null);
  ::close(log);
  if (o.attempt > 0) {
    write_all(1, "--- tpuctl: attempt " + std::to_string(o.attempt) + " (restart " +
                     std::to_string(o.attempt) + ") ---\n");
  }

  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) {
    sigaddset(&handled, s);
  }
  sigset_t old_mask;
  ::sigprocmask(SIG_BLOCK, &handled, &old_mask);

  const int64_t started = now_ms();
  pid_t child = ::fork();
  if (child < 0) {
    fail("cannot fork the command");
  }
  if (child == 0) {
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::setpgid(0, 0);
    ::close(ready);
    // "--": a command starting with '-' is the command, never an option of sh.
    ::execl("/bin/sh", "sh", "-c", "--", o.command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(child, child);
  const int self = static_cast<int>(::getpid());
  Json status{{"attempt", o.attempt},
              {"state", "running"},
              {"supervisor_pid", self},
              {"pid", static_cast<int>(child)},
              {"started_ms", started}};
  write_atomically(status_path, status.dump() + "\n");
  write_atomically(heartbeat_path, std::to_string(now_ms()) + "\n");
  write_all(ready, "ok " + std::to_string(self) + " " + std::to_string(child) + "\n");
  ::close(ready);

  bool stopping = false;
  auto kill_at = std::chrono::steady_clock::time_point::max();
  auto next_beat = std::chrono::steady_clock::now() + o.heartbeat_interval;
  int wait_status = 0;
  for (;;) {
    pid_t done = ::waitpid(child, &wait_status, WNOHANG);
    if (done == child) {
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_beat) {
      write_atomically(heartbeat_path, std::to_string(now_ms()) + "\n");
      next_beat = now + o.heartbeat_interval;
    }
    if (stopping && now >= kill_at) {
      ::kill(-child, SIGKILL);
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    auto wake = std::min(next_beat, kill_at);
    auto wait_for = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now);
    wait_for = std::clamp(wait_for, std::chrono::milliseconds(10), std::chrono::milliseconds(500));
    timespec ts{static_cast<time_t>(wait_for.count() / 1000),
                static_cast<long>((wait_for.count() % 1000) * 1'000'000)};
    siginfo_t info{};
    int sig = ::sigtimedwait(&handled, &info, &ts);
    if ((sig == SIGTERM || sig == SIGINT || sig == SIGHUP) && !stopping) {
      stopping = true;
      ::kill(-child, SIGTERM);
      kill_at = std::chrono::steady_clock::now() + o.kill_grace;
    }
  }
  stop_group(child, o.kill_grace); // what the command left in its group
  status["state"] = "exited";
  status["finished_ms"] = now_ms();
  status["stopped"] = stopping;
  if (WIFEXITED(wait_status)) {
    status["exit_code"] = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    status["exit_code"] = 128 + WTERMSIG(wait_status);
    status["signal"] = signal_name(WTERMSIG(wait_status));
  }
  write_atomically(heartbeat_path, std::to_string(now_ms()) + "\n");
  write_atomically(status_path, status.dump() + "\n");
  ::_exit(0);
}

// True while `pid` runs (a zombie does not count: its parent has not reaped it yet).
bool process_running(int pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno != EPERM)) {
    return false;
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] != 'Z';
}

} // namespace

Expected<Supervised> start_supervised(const SuperviseOptions& o) {
  if (o.command.empty()) {
    return usage_error("give the command to supervise with --command 'CMD'");
  }
  if (o.dir.empty()) {
    return usage_error("give the workload directory with --dir DIR");
  }
  if (o.heartbeat_interval.count() < 100 || o.attempt < 0) {
    return usage_error("--heartbeat-interval must be at least 100ms and --attempt at least 0");
  }
  // Every level it creates (workloads/, workloads/<uid>/, the worker's own) is 0700.
  if (auto made = util::make_private_directories(o.dir); !made) {
    return make_error(ErrorKind::failure,
                      "cannot create the workload directory: " + made.error().message);
  }
  if (::chmod(o.dir.c_str(), 0700) != 0) {
    return make_error(ErrorKind::failure, "cannot create the workload directory '" + o.dir +
                                              "': " + std::strerror(errno));
  }
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    return make_error(ErrorKind::failure,
                      std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  std::cout.flush();
  std::cerr.flush();
  pid_t first = ::fork();
  if (first < 0) {
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return make_error(ErrorKind::failure, std::string("cannot fork: ") + std::strerror(errno));
  }
  if (first == 0) {
    ::close(pipefd[0]);
    ::setsid();
    pid_t second = ::fork();
    if (second != 0) {
      ::_exit(second < 0 ? 1 : 0);
    }
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != pipefd[1]) {
        ::close(fd);
      }
    }
    supervise(o, pipefd[1]);
  }
  ::close(pipefd[1]);
  int ignored = 0;
  ::waitpid(first, &ignored, 0);
  std::string reply;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  std::istringstream in(reply);
  std::string word;
  in >> word;
  if (word == "ok") {
    Supervised s;
    in >> s.supervisor_pid >> s.pid;
    s.dir = o.dir;
    return s;
  }
  if (word == "error") {
    std::string rest;
    std::getline(in, rest);
    return make_error(ErrorKind::failure, "cannot start the command:" + rest);
  }
  return make_error(ErrorKind::failure, "the supervisor exited before starting the command");
}

Json supervised_status(const std::string& dir) {
  Json out{
      {"now_ms", now_ms()}, {"status", nullptr}, {"heartbeat_ms", 0}, {"supervisor_alive", false}};
  std::ifstream status(dir + "/status.json");
  if (status) {
    std::stringstream text;
    text << status.rdbuf();
    try {
      out["status"] = Json::parse(text.str());
    } catch (const std::exception& e) {
      out["error"] = std::string("status.json cannot be parsed: ") + e.what();
    }
  }
  std::ifstream heartbeat(dir + "/heartbeat");
  int64_t beat = 0;
  if (heartbeat >> beat) {
    out["heartbeat_ms"] = beat;
  }
  if (out["status"].is_object()) {
    out["supervisor_alive"] = process_running(out["status"].value("supervisor_pid", 0));
  }
  return out;
}

} // namespace tpuctl::agent
