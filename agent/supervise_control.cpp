// The controller's two ways into a supervised command that are not the start: watching it
// (supervise-watch, a stream the controller keeps open instead of polling over a new SSH
// session every second) and stopping it (supervise-stop, through its supervisor's own tree
// instead of a scan of every process on the host). See supervise.hpp.
#include <cerrno>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <thread>
#include <unistd.h>

#include "agent/supervise.hpp"
#include "util/private_files.hpp"
#include "util/process_tree.hpp"

namespace tpuctl::agent {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// What makes a line worth sending before the next heartbeat line is due.
std::string significant(const Json& s) {
  return s["status"].dump() + (s.value("supervisor_alive", false) ? "+" : "-");
}

} // namespace

Status watch_supervised(const std::string& dir, milliseconds interval, int in_fd, int out_fd) {
  if (interval.count() < 100) {
    return usage_error("--interval must be at least 100ms");
  }
  int notify = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (notify >= 0 &&
      ::inotify_add_watch(notify, dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE) < 0) {
    ::close(notify);
    notify = -1; // no directory yet, or no inotify: wake every interval instead
  }
  std::string last;
  auto next_beat = Clock::now();
  bool ok = true;
  while (ok) {
    const Json s = supervised_status(dir);
    const std::string key = significant(s);
    const auto now = Clock::now();
    if (key != last || now >= next_beat) {
      ok = util::write_all(out_fd, s.dump() + "\n");
      last = key;
      next_beat = now + interval;
    }
    // The supervisor's liveness changes without a file event when it is killed: look at least
    // once a second.
    const auto wait = std::min<int64_t>(
        1000, std::max<int64_t>(
                  0, std::chrono::duration_cast<milliseconds>(next_beat - Clock::now()).count()));
    pollfd fds[2] = {{in_fd, POLLIN, 0}, {notify, POLLIN, 0}};
    const int n = ::poll(fds, notify >= 0 ? 2 : 1, static_cast<int>(wait));
    if (n < 0 && errno != EINTR) {
      break;
    }
    if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) != 0) {
      char buf[256];
      ssize_t r = ::read(in_fd, buf, sizeof buf);
      if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        break; // the channel closed: end with it
      }
    }
    if (notify >= 0 && n > 0 && (fds[1].revents & POLLIN) != 0) {
      char events[4096];
      while (::read(notify, events, sizeof events) > 0) {
      }
      // A burst of renames (status, heartbeat) settles in a moment: one line for all of it.
      std::this_thread::sleep_for(milliseconds(20));
    }
  }
  if (notify >= 0) {
    ::close(notify);
  }
  return tpuctl::ok();
}

SupervisedStop stop_supervised(const std::vector<std::string>& dirs, const std::string& tag,
                               milliseconds grace) {
  SupervisedStop out;
  std::vector<int> supervisors;
  bool orphaned = false;
  for (const auto& dir : dirs) {
    const Json s = supervised_status(dir);
    const Json& st = s["status"];
    if (!st.is_object()) {
      continue; // never started here
    }
    const int pid = st.value("supervisor_pid", 0);
    if (s.value("supervisor_alive", false)) {
      if (::kill(pid, SIGTERM) == 0) {
        supervisors.push_back(pid);
      }
    } else if (st.value("state", "") != "exited") {
      orphaned = true; // killed before it could stop its tree
    }
  }
  out.supervisors = static_cast<int>(supervisors.size());
  const auto deadline = Clock::now() + grace + std::chrono::seconds(10);
  for (int pid : supervisors) {
    while (util::process_running(pid) && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    if (util::process_running(pid)) {
      orphaned = true; // a supervisor that does not stop: stop its tree by the tag instead
      ::kill(pid, SIGKILL);
    }
  }
  if (orphaned && !tag.empty()) {
    out.scanned = true;
    for (int pass = 0; pass < 2; ++pass) {
      const auto pids = util::processes_tagged(tag);
      if (pids.empty()) {
        break;
      }
      const util::StopCount c = util::stop_processes(pids, grace);
      out.terminated += c.terminated;
      out.killed += c.killed;
    }
  }
  return out;
}

} // namespace tpuctl::agent
