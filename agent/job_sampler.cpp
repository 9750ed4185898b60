#include "agent/job_sampler.hpp"

#include <dirent.h>
#include <fstream>
#include <string>

#include "util/process_tree.hpp"

namespace tpuctl::agent {

namespace {

// The state letter of /proc/PID/task/TID/stat ("TID (comm) S ..."; comm may hold spaces and
// parentheses: the state follows the last ')').
char thread_state(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() ? text[close + 2] : '?';
}

bool any_thread_busy(int pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  if (dir == nullptr) {
    return false;
  }
  bool busy = false;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') {
      continue;
    }
    if (busy_state(thread_state(tasks + "/" + e->d_name + "/stat"))) {
      busy = true;
      break;
    }
  }
  ::closedir(dir);
  return busy;
}

} // namespace

bool busy_state(char state) {
  return state == 'R' || state == 'D' || state == 'T' || state == 't';
}

void JobSampler::sample(int supervisor_pid) {
  if (supervisor_pid <= 0) {
    return;
  }
  const auto job = util::descendants(supervisor_pid);
  if (job.empty()) {
    return;
  }
  ++m_samples;
  for (int pid : job) {
    if (any_thread_busy(pid)) {
      ++m_busy;
      return;
    }
  }
}

} // namespace tpuctl::agent
