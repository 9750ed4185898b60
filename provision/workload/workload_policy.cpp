#include "provision/workload/workload_policy.hpp"

#include <algorithm>
#include <tuple>

#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

bool bad(WorkerState s) {
  return s == WorkerState::failed || s == WorkerState::lost;
}
bool ended(WorkerState s) {
  return s == WorkerState::succeeded || s == WorkerState::failed || s == WorkerState::lost;
}

std::string what_happened(const WorkloadWorker& w) {
  if (w.state == WorkerState::failed) {
    return describe_worker(w) + " exited with " + std::to_string(w.exit_code) +
           (w.last_line.empty() ? std::string() : ": " + w.last_line);
  }
  return describe_worker(w) + " was lost: " + w.detail;
}

// The culprits in the order they ended, on the workers' clocks: a failed worker when its
// command ended, a lost one when it was last heard of (its last heartbeat: it died after it,
// and a peer that died of it died later still); those with no time last, in worker order.
void order_by_end(const Workload& wl, std::vector<size_t>& culprits) {
  auto key = [&](size_t i) {
    const auto& w = wl.workers[i];
    const int64_t at = w.state == WorkerState::failed ? w.ended_ms : w.last_heartbeat_ms;
    return std::tuple(at > 0 ? 0 : 1, at > 0 ? at : int64_t{0}, i);
  };
  std::stable_sort(culprits.begin(), culprits.end(),
                   [&](size_t a, size_t b) { return key(a) < key(b); });
}

std::string seconds(int64_t ms) {
  return std::to_string((ms + 500) / 1000) + "s";
}

} // namespace

void observe(WorkloadWorker& w, const WorkerObservation& obs, int attempt,
             int64_t attempt_started_ms, int64_t now_ms, const PolicyConfig& config) {
  const int64_t lost_after = config.lost_after.count();
  if (ended(w.state) && w.attempt == attempt) {
    return; // an outcome is final for its attempt
  }
  if (!obs.reached) {
    w.detail = obs.error;
    if ((obs.silent_ms > lost_after && obs.failed_checks >= 1) ||
        (obs.refused && obs.failed_checks >= 2)) {
      w.state = WorkerState::lost;
      w.attempt = attempt;
      w.detail = "host unreachable: silent for " + seconds(obs.silent_ms) + ", and " +
                 (obs.failed_checks == 1 ? std::string("a new connection")
                                         : std::to_string(obs.failed_checks) + " new connections") +
                 " failed (" + obs.error + ")";
    }
    return;
  }
  w.last_contact_ms = now_ms;
  w.detail.clear();
  if (!obs.has_status || obs.attempt < attempt) {
    w.state = WorkerState::pending;
    w.attempt = attempt;
    w.ended_ms = 0;
    w.stopped = false;
    w.last_line.clear();
    w.events = nlohmann::json::object();
    w.progress = nlohmann::json::object();
    if (now_ms - attempt_started_ms > lost_after) {
      w.state = WorkerState::lost;
      w.detail = "attempt " + std::to_string(attempt) + " never started on the worker";
    }
    return;
  }
  w.attempt = obs.attempt;
  if (obs.heartbeat_ms > 0) {
    w.last_heartbeat_ms = obs.heartbeat_ms;
  }
  if (!obs.events.empty()) {
    w.events = obs.events;
  }
  if (obs.progress.is_object() && !obs.progress.empty()) {
    w.progress = obs.progress;
  }
  if (obs.state == "exited") {
    w.exit_code = obs.exit_code;
    w.ended_ms = obs.finished_ms;
    w.stopped = obs.stopped;
    w.last_line = obs.last_line;
    w.state = obs.exit_code == 0 ? WorkerState::succeeded
              : obs.stopped      ? WorkerState::stopped
                                 : WorkerState::failed;
    return;
  }
  const int64_t age = obs.heartbeat_ms > 0 ? obs.now_ms - obs.heartbeat_ms : 0;
  if (!obs.supervisor_alive) {
    w.state = WorkerState::lost;
    w.detail = "its supervisor process is gone without recording an exit status";
  } else {
    // A late heartbeat from a live supervisor is a slow (or stopped) host, not a lost worker.
    w.state = WorkerState::running;
    if (age > lost_after) {
      w.detail = "its supervisor is alive but its heartbeat is " + seconds(age) +
                 " old (a slow or stopped host)";
    }
  }
}

void fold_steps(Workload& wl, const std::optional<WorkerObservation>& obs0) {
  StepLedger& l = wl.steps;
  if (wl.attempt_started_ms > 0) {
    begin_attempt(l, wl.attempt, wl.attempt_started_ms);
  }
  if (!obs0 || obs0->attempt != wl.attempt || l.segment.attempt != wl.attempt) {
    return;
  }
  const auto& progress = obs0->progress;
  if (progress.is_object()) {
    if (const std::string source = progress.value("source", ""); !source.empty()) {
      l.source = source;
    }
    l.segment.save_ms = std::max<int64_t>(l.segment.save_ms, progress.value("save_ms", int64_t{0}));
    l.segment.restore_ms =
        std::max<int64_t>(l.segment.restore_ms, progress.value("restore_ms", int64_t{0}));
  }
  for (const auto& [step, at] : obs0->steps) {
    if (l.segment.first_step >= 0 && step <= l.segment.last_step && at <= l.segment.last_ms) {
      continue; // heard before
    }
    add_step(l, wl.attempt, step, at);
  }
}

Decision job_failure(const Workload& wl, const std::string& what) {
  Decision d;
  d.counts_restart = true;
  if (wl.restarts < wl.max_restarts) {
    d.verdict = Verdict::restart;
    d.message = "restarting every worker (restart " + std::to_string(wl.restarts + 1) + " of " +
                std::to_string(wl.max_restarts) + "): " + what;
  } else {
    d.verdict = Verdict::fail;
    d.message = what;
    if (wl.max_restarts > 0) {
      d.message += " (after " + std::to_string(wl.restarts) + " restart(s), --max-restarts " +
                   std::to_string(wl.max_restarts) + ")";
    }
  }
  return d;
}

Decision decide(const Workload& wl, int64_t now_ms) {
  Decision d;
  if (wl.workers.empty()) {
    return d;
  }
  bool all_ended = true;
  bool all_succeeded = true;
  for (size_t i = 0; i < wl.workers.size(); ++i) {
    const auto& w = wl.workers[i];
    all_ended = all_ended && (ended(w.state) || w.state == WorkerState::stopped);
    all_succeeded = all_succeeded && w.state == WorkerState::succeeded;
    if (bad(w.state)) {
      d.culprits.push_back(i);
    }
  }
  order_by_end(wl, d.culprits);
  // The first failure decides: a lost worker first is the infrastructure's failure (the peers
  // that died after it died of it), a failed one first is the job's. Lost workers are each
  // named; the failed ones after the first are counted, not blamed.
  std::vector<std::string> problems;
  size_t followed = 0;
  bool first_failed = false;
  const bool lost_first =
      !d.culprits.empty() && wl.workers[d.culprits.front()].state == WorkerState::lost;
  for (size_t i : d.culprits) {
    const auto& w = wl.workers[i];
    if (w.state == WorkerState::lost) {
      problems.push_back(what_happened(w));
    } else if (!first_failed && !lost_first) {
      first_failed = true;
      problems.insert(problems.begin(), what_happened(w));
    } else {
      ++followed;
    }
  }
  if (followed > 0 && !problems.empty()) {
    problems.front() += std::string(lost_first ? " (" : " (the first to fail; ") +
                        util::counted(followed, "other worker") + " failed after it)";
  }
  if (all_succeeded) {
    d.verdict = Verdict::succeeded;
    d.message = "every worker (" + std::to_string(wl.workers.size()) + ") exited with 0" +
                (wl.restarts > 0 ? " after " + std::to_string(wl.restarts) + " restart(s)" : "");
    return d;
  }
  const bool failing = !d.culprits.empty() && (wl.fail_policy == FailPolicy::any || all_ended);
  if (failing) {
    const std::string what = util::join(problems, "; ");
    bool job_failed = false;
    std::vector<std::string> final_codes; // exits the restart policy does not restart
    for (size_t i : d.culprits) {
      const auto& w = wl.workers[i];
      if (lost_first) {
        break; // the infrastructure's: the failures after it are its cascade
      }
      if (w.state == WorkerState::failed) {
        job_failed = true; // the first failure decides: the others followed it
        if (!restartable_exit(w.exit_code, wl.restart_on_exit_codes)) {
          final_codes.push_back(std::to_string(w.exit_code));
        }
        break;
      }
    }
    if (!final_codes.empty()) {
      d.verdict = Verdict::fail;
      d.message = what + " (exit " + util::join(final_codes, ", ") +
                  " is not restarted: only 42, 127-255 and --restart-on-exit-codes " +
                  wl.restart_on_exit_codes + " are)";
    } else if (job_failed) {
      const Decision job = job_failure(wl, what);
      d.verdict = job.verdict;
      d.counts_restart = job.counts_restart;
      d.message = job.message;
    } else if (wl.repairs < wl.max_repairs) { // lost workers only: the infrastructure's failure
      d.verdict = Verdict::restart;
      d.message = "repairing (repair " + std::to_string(wl.repairs + 1) + " of " +
                  std::to_string(wl.max_repairs) + "): " + what;
    } else {
      d.verdict = Verdict::fail;
      d.message = what + (wl.max_repairs > 0 ? " (after " + std::to_string(wl.repairs) +
                                                   " repair(s), --max-repairs " +
                                                   std::to_string(wl.max_repairs) + ")"
                                             : std::string(" (--max-repairs 0)"));
    }
    return d;
  }
  if (wl.timeout_ms > 0 && wl.started_at_ms > 0 && now_ms - wl.started_at_ms > wl.timeout_ms) {
    d.verdict = Verdict::fail;
    d.message = "timed out: still running after --timeout " +
                util::format_duration(std::chrono::milliseconds(wl.timeout_ms));
    return d;
  }
  return d;
}

Expected<std::vector<ExitCodes>> parse_exit_codes(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return usage_error("--restart-on-exit-codes " + util::printable(text) + ": " + why +
                       " (give exit codes 1-255, single or as ranges, e.g. 3,10-12)");
  };
  auto code = [](const std::string& s) -> int {
    if (s.empty() || s.size() > 3 || s.find_first_not_of("0123456789") != std::string::npos) {
      return -1;
    }
    const int c = std::stoi(s);
    return c >= 1 && c <= 255 ? c : -1;
  };
  std::vector<ExitCodes> out;
  for (const auto& item : util::split(text, ',')) {
    const std::string part(util::trim(item));
    const auto dash = part.find('-');
    ExitCodes r;
    r.from = code(part.substr(0, dash));
    r.to = dash == std::string::npos ? r.from : code(part.substr(dash + 1));
    if (r.from < 0 || r.to < 0) {
      return bad("'" + util::printable(part) + "' is not an exit code or range");
    }
    if (r.from > r.to) {
      return bad("the range '" + part + "' runs backwards");
    }
    out.push_back(r);
  }
  return out;
}

std::string to_string(const std::vector<ExitCodes>& codes) {
  std::vector<std::string> parts;
  for (const auto& r : codes) {
    parts.push_back(r.from == r.to ? std::to_string(r.from)
                                   : std::to_string(r.from) + "-" + std::to_string(r.to));
  }
  return util::join(parts, ",");
}

bool restartable_exit(int code, const std::string& given) {
  if (given.empty()) {
    return code != 0;
  }
  if (code == 42 || (code >= 127 && code <= 255)) {
    return true; // xpk's own restartable codes: deaths by signal, and 42
  }
  auto ranges = parse_exit_codes(given);
  return ranges && std::any_of(ranges->begin(), ranges->end(),
                               [&](const ExitCodes& r) { return code >= r.from && code <= r.to; });
}

} // namespace tpuctl::provision
