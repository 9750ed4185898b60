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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/private_files.hpp"
#include "util/process_tree.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::agent {

using Json = nlohmann::json;

namespace {

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

// The log's last non-empty line that is not tpuctl's own attempt marker, at most 300 bytes.
std::string last_log_line(const std::string& path) {
  constexpr off_t k_tail = 8192;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return "";
  }
  struct stat st {};
  std::string tail;
  if (::fstat(fd, &st) == 0) {
    const off_t from = st.st_size > k_tail ? st.st_size - k_tail : 0;
    tail.resize(static_cast<size_t>(st.st_size - from));
    const ssize_t n = ::pread(fd, tail.data(), tail.size(), from);
    tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  std::string line;
  for (size_t end = tail.size(); end > 0;) {
    const size_t nl = tail.rfind('\n', end - 1);
    const size_t begin = nl == std::string::npos ? 0 : nl + 1;
    line = std::string(util::trim(std::string_view(tail).substr(begin, end - begin)));
    if (!line.empty() && line.rfind("--- tpuctl:", 0) != 0) {
      break;
    }
    line.clear();
    if (nl == std::string::npos) {
      break;
    }
    end = nl;
  }
  return line.size() > 300 ? line.substr(0, 297) + "..." : line;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? abbrev : std::to_string(sig);
}

// The supervisor: never returns. `ready` gets "ok <supervisor> <pid>\n" once the command runs,
// or "error <message>\n".
[[noreturn]] void supervise(const SuperviseOptions& o, int ready) {
  const std::string log_path = o.dir + "/log";
  const std::string status_path = o.dir + "/status.json";
  const std::string heartbeat_path = o.dir + "/heartbeat";
  // "<unix ms> <log size>" whenever the log grew since the last beat: where `workload logs
  // --since` starts reading (the size at the last entry not after its time).
  const std::string index_path = o.dir + "/log.index";
  const std::string events_path = o.dir + "/events";
  int64_t indexed = -1;
  auto index_log = [&]() {
    struct stat st {};
    if (::stat(log_path.c_str(), &st) != 0 || st.st_size == indexed) {
      return;
    }
    indexed = st.st_size;
    int fd = ::open(index_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      util::write_all(fd,
                      std::to_string(util::unix_now_ms()) + " " + std::to_string(indexed) + "\n");
      ::close(fd);
    }
  };
  auto fail = [&](const std::string& what) {
    util::write_all(ready, "error " + what + ": " + std::strerror(errno) + "\n");
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
    // "attempt", not "restart": a repair or a resumed eviction is a new attempt too.
    util::write_all(1, "--- tpuctl: attempt " + std::to_string(o.attempt) + " ---\n");
  }
  struct stat log_st {};
  const int64_t log_start = ::fstat(1, &log_st) == 0 ? static_cast<int64_t>(log_st.st_size) : 0;
  // Each attempt reports afresh (the file is the program's to append to).
  if (int ev = ::open(events_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      ev >= 0) {
    ::close(ev);
  }
  const bool cache_ready = o.compilation_cache.empty() ||
                           static_cast<bool>(util::make_private_directories(o.compilation_cache));

  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) {
    sigaddset(&handled, s);
  }
  sigset_t old_mask;
  ::sigprocmask(SIG_BLOCK, &handled, &old_mask);

  // Everything the command starts stays below this process, even after a double fork or
  // setsid (process_tree.hpp): stopping the workload walks this tree, never the process table.
  // Before the fork: an orphan made at once must not go to init.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const int64_t started = util::unix_now_ms();
  pid_t child = ::fork();
  if (child < 0) {
    fail("cannot fork the command");
  }
  if (child == 0) {
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::setpgid(0, 0);
    ::close(ready);
    ::setenv("TPUCTL_EVENTS", events_path.c_str(), 1);
    if (!o.compilation_cache.empty() && cache_ready) {
      ::setenv("JAX_COMPILATION_CACHE_DIR", o.compilation_cache.c_str(), 0);
      ::setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0", 0);
      ::setenv("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1", 0);
    }
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
              {"started_ms", started},
              {"log_start", log_start}};
  write_atomically(status_path, status.dump() + "\n");
  write_atomically(heartbeat_path, std::to_string(util::unix_now_ms()) + "\n");
  index_log();
  util::write_all(ready, "ok " + std::to_string(self) + " " + std::to_string(child) + "\n");
  ::close(ready);

  using Clock = std::chrono::steady_clock;
  // TERM (or KILL) to the command's group and to every process below the supervisor.
  auto signal_tree = [&](int sig) {
    ::kill(-child, sig);
    for (int pid : util::descendants(self)) {
      ::kill(pid, sig);
    }
  };
  bool stopping = false; // told to stop (TERM, INT, HUP)
  bool child_done = false;
  bool killed = false;
  auto kill_at = Clock::time_point::max();
  auto next_beat = Clock::now() + o.heartbeat_interval;
  int wait_status = 0;
  for (;;) {
    int st = 0;
    for (pid_t done; (done = ::waitpid(-1, &st, WNOHANG)) > 0;) {
      if (done == child) {
        wait_status = st;
        child_done = true;
      } // else: an orphan of the command, reparented here: reaped
    }
    const auto now = Clock::now();
    if (child_done) {
      // Whatever the command left running is stopped the same way: TERM, grace, KILL.
      if (kill_at == Clock::time_point::max() && !killed) {
        signal_tree(SIGTERM);
        kill_at = now + o.kill_grace;
      }
      if (util::descendants(self).empty()) {
        break;
      }
    }
    if (now >= next_beat) {
      write_atomically(heartbeat_path, std::to_string(util::unix_now_ms()) + "\n");
      index_log();
      next_beat = now + o.heartbeat_interval;
    }
    if (now >= kill_at && !killed) {
      signal_tree(SIGKILL);
      killed = true;
      kill_at = now + std::chrono::seconds(2); // KILLed processes are gone within a moment
    } else if (killed && now >= kill_at && child_done) {
      break; // unkillable (D state): record the exit all the same
    }
    auto wake = std::min(next_beat, kill_at);
    auto wait_for = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now);
    wait_for = std::clamp(wait_for, std::chrono::milliseconds(10),
                          std::chrono::milliseconds(child_done ? 50 : 500));
    timespec ts{static_cast<time_t>(wait_for.count() / 1000),
                static_cast<long>((wait_for.count() % 1000) * 1'000'000)};
    siginfo_t info{};
    int sig = ::sigtimedwait(&handled, &info, &ts);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
      // A TERM queued with a value (stop_supervised) asks for a shorter grace, in ms: the
      // workers left when a peer is gone (--failure-grace-period-seconds).
      auto grace = o.kill_grace;
      if (sig == SIGTERM && info.si_code == SI_QUEUE && info.si_value.sival_int >= 0) {
        grace = std::min(grace, std::chrono::milliseconds(info.si_value.sival_int));
      }
      if (!stopping && !killed) {
        signal_tree(SIGTERM);
      }
      stopping = true;
      if (!killed) {
        kill_at = std::min(kill_at, Clock::now() + grace);
      }
    }
  }
  status["state"] = "exited";
  status["finished_ms"] = util::unix_now_ms();
  status["stopped"] = stopping;
  status["last_line"] = last_log_line(log_path);
  if (WIFEXITED(wait_status)) {
    status["exit_code"] = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    status["exit_code"] = 128 + WTERMSIG(wait_status);
    status["signal"] = signal_name(WTERMSIG(wait_status));
  }
  write_atomically(heartbeat_path, std::to_string(util::unix_now_ms()) + "\n");
  index_log();
  write_atomically(status_path, status.dump() + "\n");
  ::_exit(0);
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

Json supervised_status(const std::string& dir, bool with_events) {
  Json out{{"now_ms", util::unix_now_ms()},
           {"status", nullptr},
           {"heartbeat_ms", 0},
           {"supervisor_alive", false}};
  auto read_status = [&]() {
    std::ifstream status(dir + "/status.json");
    if (status) {
      std::stringstream text;
      text << status.rdbuf();
      try {
        out["status"] = Json::parse(text.str());
        out.erase("error");
      } catch (const std::exception& e) {
        out["error"] = std::string("status.json cannot be parsed: ") + e.what();
      }
    }
  };
  read_status();
  std::ifstream heartbeat(dir + "/heartbeat");
  int64_t beat = 0;
  if (heartbeat >> beat) {
    out["heartbeat_ms"] = beat;
  }
  if (out["status"].is_object()) {
    out["supervisor_alive"] = util::process_running(out["status"].value("supervisor_pid", 0));
    if (!out["supervisor_alive"].get<bool>() && out["status"].value("state", "") != "exited") {
      // It may have recorded its exit between the read above and its death: the supervisor
      // writes status.json before it exits, so what the file says now is final.
      read_status();
    }
  }
  if (with_events) {
    out["events"] = latest_events(dir + "/events");
  }
  return out;
}

Json latest_events(const std::string& path) {
  constexpr off_t k_tail = 256 * 1024;
  Json out = Json::object();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return out;
  }
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    const off_t from = st.st_size > k_tail ? st.st_size - k_tail : 0;
    text.resize(static_cast<size_t>(st.st_size - from));
    const ssize_t n = ::pread(fd, text.data(), text.size(), from);
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  size_t begin = 0;
  for (size_t nl; (nl = text.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    Json j = Json::parse(text.begin() + static_cast<long>(begin),
                         text.begin() + static_cast<long>(nl), nullptr, false);
    if (j.is_object() && j.contains("event") && j["event"].is_string()) {
      const std::string kind = j["event"].get<std::string>();
      out[kind] = std::move(j);
    }
  }
  return out;
}

} // namespace tpuctl::agent
