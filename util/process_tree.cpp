#include "util/process_tree.hpp"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <signal.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace tpuctl::util {

namespace {

// The whole of a small /proc file ("" when it cannot be read).
std::string read_proc(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return {};
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// The numeric entries of a /proc directory.
std::vector<int> numeric_entries(const std::string& dir) {
  std::vector<int> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return out;
  }
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9') {
      out.push_back(std::atoi(e->d_name));
    }
  }
  ::closedir(d);
  return out;
}

// State and parent of a process from /proc/PID/stat; false when it is gone.
bool stat_of(int pid, char& state, int& ppid) {
  const std::string text = read_proc("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = text.rfind(')');
  if (paren == std::string::npos || paren + 4 >= text.size()) {
    return false;
  }
  state = text[paren + 2];
  ppid = std::atoi(text.c_str() + paren + 4);
  return true;
}

std::vector<int> children_of(int pid, bool& supported) {
  std::vector<int> out;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  for (int tid : numeric_entries(task)) {
    const std::string path = task + "/" + std::to_string(tid) + "/children";
    if (::access(path.c_str(), F_OK) != 0) {
      supported = false;
      return {};
    }
    const std::string text = read_proc(path);
    const char* p = text.c_str();
    while (*p != '\0') {
      char* end = nullptr;
      long child = std::strtol(p, &end, 10);
      if (end == p) {
        break;
      }
      out.push_back(static_cast<int>(child));
      p = end;
    }
  }
  return out;
}

// Without /proc/PID/task/TID/children: one pass over every process's parent.
std::vector<int> descendants_by_scan(int root) {
  std::multimap<int, int> by_parent;
  for (int pid : numeric_entries("/proc")) {
    char state = 0;
    int ppid = 0;
    if (stat_of(pid, state, ppid) && state != 'Z' && state != 'X') {
      by_parent.emplace(ppid, pid);
    }
  }
  std::vector<int> out;
  std::vector<int> todo{root};
  while (!todo.empty()) {
    const int p = todo.back();
    todo.pop_back();
    auto [from, to] = by_parent.equal_range(p);
    for (auto it = from; it != to; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

void reap_children() {
  int status = 0;
  while (::waitpid(-1, &status, WNOHANG) > 0) {
  }
}

} // namespace

bool process_running(int pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno != EPERM)) {
    return false;
  }
  char state = 0;
  int ppid = 0;
  return !stat_of(pid, state, ppid) || (state != 'Z' && state != 'X');
}

bool process_stopped(int pid) {
  char state = 0;
  int ppid = 0;
  return pid > 0 && stat_of(pid, state, ppid) && (state == 'T' || state == 't');
}

std::vector<int> descendants(int root) {
  std::vector<int> out;
  std::vector<int> todo{root};
  bool supported = true;
  while (!todo.empty()) {
    const int p = todo.back();
    todo.pop_back();
    for (int c : children_of(p, supported)) {
      if (!supported) {
        break;
      }
      char state = 0;
      int ppid = 0;
      if (stat_of(c, state, ppid) && state != 'Z' && state != 'X') {
        out.push_back(c);
      }
      todo.push_back(c); // a zombie's children (none can be left) cost nothing to ask for
    }
    if (!supported) {
      return descendants_by_scan(root);
    }
  }
  return out;
}

std::vector<int> processes_tagged(const std::string& entry, int exclude) {
  std::vector<int> out;
  const int self = static_cast<int>(::getpid());
  for (int pid : numeric_entries("/proc")) {
    if (pid == self || pid == exclude) {
      continue;
    }
    const std::string env = read_proc("/proc/" + std::to_string(pid) + "/environ");
    size_t at = 0;
    while (at < env.size()) {
      const size_t end = env.find('\0', at);
      const size_t len = (end == std::string::npos ? env.size() : end) - at;
      if (len == entry.size() && env.compare(at, len, entry) == 0) {
        if (process_running(pid)) {
          out.push_back(pid);
        }
        break;
      }
      if (end == std::string::npos) {
        break;
      }
      at = end + 1;
    }
  }
  return out;
}

StopCount stop_processes(const std::vector<int>& pids, std::chrono::milliseconds grace, bool reap) {
  StopCount count;
  std::vector<int> left;
  for (int pid : pids) {
    if (::kill(pid, SIGTERM) == 0) {
      ++count.terminated;
      left.push_back(pid);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!left.empty()) {
    if (reap) {
      reap_children();
    }
    std::vector<int> still;
    for (int pid : left) {
      if (process_running(pid)) {
        still.push_back(pid);
      }
    }
    left.swap(still);
    if (left.empty() || std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int pid : left) {
    if (::kill(pid, SIGKILL) == 0) {
      ++count.killed;
    }
  }
  if (reap && !left.empty()) {
    for (int i = 0; i < 50; ++i) { // a SIGKILLed process is gone within a moment
      reap_children();
      bool any = false;
      for (int pid : left) {
        any = any || process_running(pid);
      }
      if (!any) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return count;
}

} // namespace tpuctl::util
