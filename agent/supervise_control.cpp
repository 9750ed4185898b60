// The controller's two ways into a supervised command that are not the start: watching it
// (supervise-watch, a stream the controller keeps open instead of polling over a new SSH
// session every second) and stopping it (supervise-stop, through its supervisor's own tree
// instead of a scan of every process on the host). See supervise.hpp.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/inotify.h>
#include <thread>
#include <unistd.h>

#include "agent/job_sampler.hpp"
#include "agent/step_source.hpp"
#include "agent/supervise.hpp"
#include "util/private_files.hpp"
#include "util/process.hpp"
#include "util/process_tree.hpp"
#include "util/time_text.hpp"

namespace tpuctl::agent {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// What makes a line worth sending before the next heartbeat line is due: the status, the
// supervisor's liveness and the latest events other than steps (those go once a second).
std::string significant(const Json& s) {
  return s["status"].dump() + (s.value("supervisor_alive", false) ? "+" : "-") +
         s.value("significant_events", Json::object()).dump();
}

// The worker's files after a stop: its directory, then the workload's (the parent, under a
// `workloads` directory) once only the shared script dir (`app`) is left in it. Each worker
// removes its own directory before it looks, so two workers of one host stopping together
// never remove a directory the other still needs, and the last one removes the rest.
bool remove_worker_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path own = fs::path(dir).lexically_normal();
  fs::remove_all(own, ec);
  if (ec) {
    return false;
  }
  const fs::path workload = own.parent_path();
  if (workload.parent_path().filename() != "workloads") {
    return true; // not a workload's layout: leave the parent alone
  }
  for (const auto& e : fs::directory_iterator(workload, ec)) {
    if (e.path().filename() != "app") {
      return true; // another worker's directory: its stop removes the rest
    }
  }
  if (ec) {
    return ec == std::errc::no_such_file_or_directory;
  }
  fs::remove_all(workload, ec);
  return !ec;
}

// A control line of the stream: {"stop": {...}} or {"start": {...}}; nullopt when it is
// neither (or not an object).
std::optional<Json> control_request(const std::string& line, const char* kind) {
  Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains(kind) || !j[kind].is_object()) {
    return std::nullopt;
  }
  return j[kind];
}

// A start through the stream: the command line the controller would otherwise send over a new
// SSH session (its environment assignments, then `tpuctl agent supervise ...`), run as that
// session would run it, by this user's login shell with `-c`, stdin the request's `input` (the
// secrets the command reads first), else empty. The supervisor it
// starts detaches (its own session), so it outlives this stream as it outlives a session.
Json start_through_stream(const Json& request) {
  const std::string command = request.value("command", std::string());
  if (command.empty()) {
    return Json{{"started", {{"exit_code", 2}, {"out", ""}, {"err", "an empty start request"}}}};
  }
  std::string shell = "/bin/sh";
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_shell != nullptr &&
                                                 pw->pw_shell[0] == '/' &&
                                                 ::access(pw->pw_shell, X_OK) == 0) {
    shell = pw->pw_shell;
  }
  util::ProcessOptions po;
  po.timeout = std::chrono::seconds(60);
  // The secrets the command reads first (provision/slice/secrets.hpp): stdin, not the command.
  po.stdin_data = request.value("input", std::string());
  auto ran = util::run_process({shell, "-c", command}, po);
  if (!ran) {
    return Json{{"started", {{"exit_code", 127}, {"out", ""}, {"err", ran.error().message}}}};
  }
  return Json{{"started", {{"exit_code", ran->exit_code}, {"out", ran->out}, {"err", ran->err}}}};
}

// The job's Python stacks: SIGUSR1 to the process that registered faulthandler for it (its
// "stack_dump" event, agent/python/sitecustomize.py), if it still runs below this worker's
// supervisor, then what it wrote to the log until the log is quiet for 300 ms (3 s at most).
Json dump_through_stream(const std::string& dir, const Json& latest) {
  auto fail = [](const std::string& why) { return Json{{"dumped", {{"error", why}}}}; };
  const Json status = supervised_status(dir, false);
  const int supervisor = status["status"].is_object()
                             ? status["status"].value("supervisor_pid", 0)
                             : 0;
  const int pid = latest.contains("stack_dump") ? latest["stack_dump"].value("pid", 0) : 0;
  if (pid <= 0) {
    return fail("no Python process of the job registered for stack dumps (it does not import "
                "JAX, or it handles SIGUSR1 itself)");
  }
  const auto tree = util::descendants(supervisor);
  if (supervisor <= 0 || std::find(tree.begin(), tree.end(), pid) == tree.end()) {
    return fail("the process that registered for stack dumps (" + std::to_string(pid) +
                ") is no longer the job's");
  }
  const std::string log = dir + "/log";
  std::error_code ec;
  const auto before = std::filesystem::file_size(log, ec);
  if (ec || ::kill(pid, SIGUSR1) != 0) {
    return fail("cannot signal process " + std::to_string(pid));
  }
  auto size = before;
  const auto deadline = Clock::now() + milliseconds(3000);
  auto quiet_since = Clock::now();
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
    const auto now_size = std::filesystem::file_size(log, ec);
    if (!ec && now_size != size) {
      size = now_size;
      quiet_since = Clock::now();
    } else if (size > before && Clock::now() - quiet_since >= milliseconds(300)) {
      break;
    }
  }
  std::string text;
  if (size > before) {
    std::ifstream in(log, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(before));
    text.resize(std::min<size_t>(size - before, 64 * 1024));
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
  }
  return Json{{"dumped", {{"pid", pid}, {"text", text}}}};
}

Json stop_through_stream(const std::string& dir, const Json& request) {
  const int64_t grace =
      std::clamp<int64_t>(request.value("grace_ms", int64_t{0}), 0, int64_t{24} * 3600 * 1000);
  const SupervisedStop stop =
      stop_supervised({dir}, request.value("tag", std::string()), milliseconds(grace));
  Json out{{"supervisors", stop.supervisors},
           {"terminated", stop.terminated},
           {"killed", stop.killed},
           {"scanned", stop.scanned},
           {"removed", false}};
  if (request.value("remove", false)) {
    out["removed"] = remove_worker_files(dir);
  }
  return Json{{"stopped", out}};
}

} // namespace

Status watch_supervised(const WatchOptions& o, int in_fd, int out_fd) {
  const std::string& dir = o.dir;
  const milliseconds interval = o.interval;
  if (interval.count() < 100) {
    return usage_error("--interval must be at least 100ms");
  }
  std::optional<std::regex> pattern;
  if (!o.step_pattern.empty()) {
    TPUCTL_TRY_ASSIGN(pattern, compile_step_pattern(o.step_pattern));
  }
  int notify = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  // With a step pattern the log's writes wake it too (its lines are the steps).
  const uint32_t mask = IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | (pattern ? IN_MODIFY : 0u);
  if (notify >= 0 && ::inotify_add_watch(notify, dir.c_str(), mask) < 0) {
    ::close(notify);
    notify = -1; // no directory yet, or no inotify: wake every interval instead
  }
  std::string last;
  std::string input; // the controller's lines, as they come
  auto next_beat = Clock::now();
  // The attempt's progress (agent/step_source.hpp), read anew for each attempt.
  std::unique_ptr<StepSource> source;
  int source_attempt = -1;
  Json pending_steps = Json::array();
  constexpr milliseconds k_step_flush{1000};
  auto steps_due = Clock::time_point::max();
  // How busy the job is, sampled twice a second (agent/job_sampler.hpp): the straggler signal.
  JobSampler sampler;
  constexpr milliseconds k_sample_every{500};
  auto next_sample = Clock::now();
  // The attempt's new steps from its log and events, queued for the controller (process 0's:
  // report_steps) to go out within k_step_flush.
  auto read_steps = [&] {
    source->poll(util::unix_now_ms());
    for (const auto& m : source->take_steps()) {
      if (o.report_steps) {
        pending_steps.push_back(Json::array({m.step, m.time_ms}));
        steps_due = std::min(steps_due, Clock::now() + k_step_flush);
      }
    }
  };
  // What the controller may send (a controller that meets an older agent, without this line,
  // starts workers over new sessions instead).
  bool ok = util::write_all(
      out_fd,
      Json{{"watching", {{"accepts", {"stop", "start", "close", "dump"}}}}}.dump() + "\n");
  while (ok) {
    Json s = supervised_status(dir, false);
    if (const Json& st = s["status"]; st.is_object() && st.value("attempt", -1) != source_attempt) {
      source_attempt = st.value("attempt", -1);
      source = std::make_unique<StepSource>(dir, pattern, st.value("log_start", int64_t{0}));
      pending_steps = Json::array();
      steps_due = Clock::time_point::max();
      sampler = JobSampler{};
    }
    if (Clock::now() >= next_sample) {
      if (const Json& st = s["status"]; st.is_object() && st.value("state", "") == "running") {
        sampler.sample(st.value("supervisor_pid", 0));
      }
      next_sample = Clock::now() + k_sample_every;
    }
    if (source) {
      read_steps();
      Json events = source->latest();
      s["progress"] = source->progress();
      s["progress"]["samples"] = sampler.samples();
      s["progress"]["busy"] = sampler.busy();
      // Steps are news only once a second (below); every other event at once.
      const Json without_steps = [&] {
        Json e = events;
        e.erase("step");
        return e;
      }();
      s["events"] = std::move(events);
      s["significant_events"] = without_steps;
    }
    const std::string key = significant(s);
    s.erase("significant_events");
    const auto now = Clock::now();
    if (key != last || now >= next_beat || now >= steps_due) {
      if (!pending_steps.empty()) {
        s["steps"] = std::move(pending_steps);
        pending_steps = Json::array();
      }
      steps_due = Clock::time_point::max();
      ok = util::write_all(out_fd, s.dump() + "\n");
      last = key;
      next_beat = now + interval;
    }
    // The supervisor's liveness changes without a file event when it is killed: look at least
    // once a second.
    const auto until = std::min({next_beat, steps_due, next_sample});
    const auto wait = std::min<int64_t>(
        1000,
        std::max<int64_t>(0, std::chrono::duration_cast<milliseconds>(until - Clock::now()).count()));
    pollfd fds[2] = {{in_fd, POLLIN, 0}, {notify, POLLIN, 0}};
    const int n = ::poll(fds, notify >= 0 ? 2 : 1, static_cast<int>(wait));
    if (n < 0 && errno != EINTR) {
      break;
    }
    if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) != 0) {
      char buf[4096];
      ssize_t r = ::read(in_fd, buf, sizeof buf);
      if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        break; // the channel closed: end with it
      }
      input.append(buf, static_cast<size_t>(std::max<ssize_t>(r, 0)));
      for (size_t nl; (nl = input.find('\n')) != std::string::npos;) {
        const std::string line = input.substr(0, nl);
        input.erase(0, nl + 1);
        if (control_request(line, "close")) {
          if (notify >= 0) {
            ::close(notify);
          }
          return tpuctl::ok(); // the controller watches this worker no more
        }
        if (control_request(line, "dump")) {
          ok = util::write_all(
              out_fd, dump_through_stream(dir, source ? source->latest() : Json::object()).dump() +
                          "\n");
          continue;
        }
        if (auto start = control_request(line, "start")) {
          ok = util::write_all(out_fd, start_through_stream(*start).dump() + "\n");
          last.clear(); // a line for the new attempt's status at once
          continue;
        }
        if (auto stop = control_request(line, "stop")) {
          // The steps heard so far go first, so the controller has them all when the stop's
          // answer comes (its goodput ledger places what the stop cut short by them).
          if (source) {
            read_steps();
          }
          if (!pending_steps.empty()) {
            Json flush = s;
            flush["steps"] = std::move(pending_steps);
            pending_steps = Json::array();
            steps_due = Clock::time_point::max();
            if (!util::write_all(out_fd, flush.dump() + "\n")) {
              break;
            }
          }
          if (!util::write_all(out_fd, Json{{"stopping", true}}.dump() + "\n")) {
            break;
          }
          const Json answer = stop_through_stream(dir, *stop);
          ok = util::write_all(out_fd, answer.dump() + "\n");
          if (stop->value("remove", false)) {
            if (notify >= 0) {
              ::close(notify);
            }
            return tpuctl::ok(); // nothing left to watch
          }
          last.clear(); // the stop changed the status: a line for it next
        }
      }
      if (input.size() > 65536) {
        input.clear(); // not the controller's lines: drop them
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
      // The grace travels with the TERM (the supervisor keeps the lesser of it and its own).
      sigval value{};
      value.sival_int = static_cast<int>(std::min<int64_t>(grace.count(), INT32_MAX));
      if (::sigqueue(pid, SIGTERM, value) == 0) {
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
