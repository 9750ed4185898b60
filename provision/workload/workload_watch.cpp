#include "provision/workload/workload_watch.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "provision/workload/workload_remote.hpp"
#include "remote/fanout.hpp"
#include "util/shell_quote.hpp"

namespace tpuctl::provision {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds k_line_interval{3000};     // the agent's heartbeat lines
constexpr milliseconds k_check_connect{5000};     // an independent check's connect timeout
constexpr milliseconds k_stop_ack{15000};         // a stop's acknowledgement, at most
constexpr milliseconds k_stop_after_grace{15000}; // a stop's result, after its grace
constexpr milliseconds k_reopen_interval{
    10000}; // a worker's stream is opened again at most so often

int64_t ms(Clock::duration d) {
  return std::chrono::duration_cast<milliseconds>(d).count();
}

} // namespace

struct WorkerWatch::Seen {
  uint64_t lines = 0;
  WorkerObservation last;
  bool open = true;  // its stream runs (or is connecting)
  bool ever = false; // a line came, or the stream ended: from then on silence counts
  std::string ended; // why the stream ended
  uint64_t generation = 0;
  std::shared_ptr<remote::StreamInput> input; // the stream's stdin: stop()'s line
  int stop_phase = 0;                         // 1: the agent is stopping it, 2: it did
  bool removed = false;                       // its files are gone (phase 2)
  bool can_start = false;                     // its agent takes start lines (its first line)
  std::vector<std::pair<int64_t, int64_t>> steps; // from its lines since the last turn
  int dump_phase = 0;                             // 1: a dump line sent, 2: answered
  std::string dump;                               // the answer: the stacks, or why none
  int start_phase = 0;        // 1: send_start() sent one, 2: the answer came (until collected)
  remote::HostResult started; // that answer (phase 2)
};

struct WorkerWatch::Group {
  remote::CancelToken cancel;
  std::thread thread;
};

WorkerWatch::WorkerWatch(const Workload& workload, const std::vector<WorkerPlan>& plans,
                         const remote::SshOptions& ssh, const PolicyConfig& policy)
    : m_workload(workload), m_plans(plans), m_ssh(ssh), m_policy(policy), m_seen(plans.size()),
      m_track(plans.size()), m_last_turn(Clock::now()) {
  m_last_stalled = m_stall.stalled_ms();
  std::vector<size_t> all(plans.size());
  for (size_t i = 0; i < all.size(); ++i) {
    all[i] = i;
  }
  open(all);
}

WorkerWatch::~WorkerWatch() {
  for (auto& g : m_groups) {
    g->cancel.cancel();
  }
  for (auto& g : m_groups) {
    g->thread.join();
  }
}

void WorkerWatch::open(const std::vector<size_t>& workers) {
  std::vector<remote::Job> jobs;
  std::vector<uint64_t> generations(m_plans.size(), 0);
  {
    std::lock_guard lock(m_mutex);
    for (size_t i : workers) {
      Seen& s = m_seen[i];
      s.generation += 1;
      s.open = true;
      generations[i] = s.generation;
      const WorkerPlan& p = m_plans[i];
      remote::Job j;
      j.target = p.target;
      j.target.name = p.node + "/" + std::to_string(p.worker);
      j.command = "exec " + util::shell_quote_path(p.agent_dir + "/tpuctl") +
                  " agent supervise-watch --interval " + std::to_string(k_line_interval.count()) +
                  "ms --dir " +
                  util::shell_quote_path(workload_dir(p.workdir, m_workload.uid, p.node, p.worker)) +
                  (m_workload.step_pattern.empty()
                       ? std::string()
                       : " --step-pattern " + util::shell_quote(m_workload.step_pattern)) +
                  (i == 0 ? " --report-steps" : ""); // process 0's steps: the goodput ledger
      j.index = i;
      s.input = std::make_shared<remote::StreamInput>();
      s.stop_phase = 0;
      j.input = s.input;
      jobs.push_back(std::move(j));
    }
  }
  remote::SshOptions o = m_ssh;
  o.batch_size = std::max<size_t>({o.batch_size, jobs.size(), 1});
  o.command_timeout = milliseconds(0);
  o.keep_output = false; // a stream is read line by line, never kept
  o.tty = false;
  o.stdin_data = nullptr;
  auto group = std::make_unique<Group>();
  Group* g = group.get();
  g->thread = std::thread([this, g, jobs = std::move(jobs), o, generations]() {
    remote::FanoutCallbacks cb;
    cb.on_line = [this, &generations](const remote::HostLine& line) {
      if (line.stream != remote::Stream::out || !line.complete) {
        return;
      }
      if (line.text.rfind("{\"watching\"", 0) == 0 || line.text.rfind("{\"started\"", 0) == 0) {
        const auto j = nlohmann::json::parse(line.text, nullptr, false);
        std::lock_guard lock(m_mutex);
        Seen& s = m_seen[line.index];
        if (s.generation != generations[line.index] || !j.is_object()) {
          return;
        }
        if (j.contains("watching") && j["watching"].is_object()) { // what the agent takes
          const auto accepts = j["watching"].value("accepts", nlohmann::json::array());
          s.can_start = accepts.is_array() &&
                        std::find(accepts.begin(), accepts.end(), "start") != accepts.end();
        } else if (j.contains("started") && j["started"].is_object() && s.start_phase == 1) {
          const auto& a = j["started"]; // the answer to start()
          s.started.exit_code = a.value("exit_code", -1);
          s.started.outcome =
              s.started.exit_code == 0 ? remote::Outcome::ok : remote::Outcome::exit_code;
          s.started.out = a.value("out", std::string());
          s.started.err = a.value("err", std::string());
          s.start_phase = 2;
          m_changed.notify_all();
        }
        return;
      }
      if (line.text.rfind("{\"dumped\"", 0) == 0) { // the answer to dump_stacks()
        const auto j = nlohmann::json::parse(line.text, nullptr, false);
        std::lock_guard lock(m_mutex);
        Seen& s = m_seen[line.index];
        if (s.generation == generations[line.index] && s.dump_phase == 1 && j.is_object() &&
            j["dumped"].is_object()) {
          s.dump = j["dumped"].contains("error")
                       ? "(no stacks: " + j["dumped"].value("error", std::string()) + ")"
                       : j["dumped"].value("text", std::string());
          s.dump_phase = 2;
          m_changed.notify_all();
        }
        return;
      }
      if (line.text.rfind("{\"stopp", 0) == 0) { // the answer to stop()
        const auto j = nlohmann::json::parse(line.text, nullptr, false);
        std::lock_guard lock(m_mutex);
        Seen& s = m_seen[line.index];
        if (s.generation == generations[line.index] && j.is_object()) {
          if (j.contains("stopped") && j["stopped"].is_object()) {
            s.stop_phase = 2;
            s.removed = j["stopped"].value("removed", false);
          } else {
            s.stop_phase = std::max(s.stop_phase, 1);
          }
          m_changed.notify_all();
        }
        return;
      }
      WorkerObservation obs = parse_observation(std::string(line.text));
      if (!obs.reached) {
        return; // not a status line (a login banner, say)
      }
      std::lock_guard lock(m_mutex);
      Seen& s = m_seen[line.index];
      if (s.generation != generations[line.index]) {
        return; // a stream that was replaced
      }
      // News for the monitor's turn: the job's state moved (an exit above all), not a heartbeat.
      if (obs.state != s.last.state || obs.attempt != s.last.attempt ||
          obs.exit_code != s.last.exit_code || obs.supervisor_alive != s.last.supervisor_alive) {
        m_news = true;
        m_changed.notify_all();
      }
      s.steps.insert(s.steps.end(), obs.steps.begin(), obs.steps.end());
      obs.steps.clear();
      s.last = std::move(obs);
      s.lines += 1;
      s.ever = true;
    };
    cb.on_host_done = [this, &generations](const remote::HostResult& r) {
      std::lock_guard lock(m_mutex);
      Seen& s = m_seen[r.index];
      if (s.generation != generations[r.index]) {
        return;
      }
      s.open = false;
      s.ever = true;
      s.ended = r.error.empty() ? std::string(remote::to_string(r.outcome)) : r.error;
      m_news = true;
      m_changed.notify_all();
    };
    auto ran = remote::run_streams(jobs, o, cb, &g->cancel);
    if (!ran) {
      std::lock_guard lock(m_mutex);
      for (const auto& j : jobs) {
        Seen& s = m_seen[j.index];
        if (s.generation == generations[j.index]) {
          s.open = false;
          s.ever = true;
          s.ended = ran.error().message;
        }
      }
    }
  });
  m_groups.push_back(std::move(group));
}

bool WorkerWatch::wait_for_news(milliseconds timeout) {
  std::unique_lock lock(m_mutex);
  const bool news = m_changed.wait_for(lock, timeout, [this] { return m_news; });
  m_news = false;
  return news;
}

std::vector<std::optional<WorkerObservation>> WorkerWatch::turn() {
  if (!m_unopened.empty()) {
    open(m_unopened);
    m_unopened.clear();
  }
  const auto now = Clock::now();
  const int64_t stalled = m_stall.stalled_ms();
  // This process's running time since the last turn: its own stalls are nobody's silence.
  const int64_t credited = std::max<int64_t>(0, ms(now - m_last_turn) - (stalled - m_last_stalled));
  m_last_turn = now;
  m_last_stalled = stalled;
  std::vector<Seen> seen;
  {
    std::lock_guard lock(m_mutex);
    seen = m_seen;
    for (auto& s : m_seen) {
      s.steps.clear(); // handed out with this turn
    }
  }
  std::vector<std::optional<WorkerObservation>> out(seen.size());
  std::vector<size_t> suspects;
  for (size_t i = 0; i < seen.size(); ++i) {
    Track& t = m_track[i];
    if (seen[i].lines != t.lines) {
      m_stats.lines += seen[i].lines - t.lines;
      t.lines = seen[i].lines;
      t.silent_ms = 0;
      t.failed_checks = 0;
      out[i] = seen[i].last;
      out[i]->steps = std::move(seen[i].steps);
      continue;
    }
    if (!seen[i].ever) {
      continue; // still connecting: nothing known yet, nothing wrong yet
    }
    t.silent_ms += credited;
    if (!seen[i].open || t.silent_ms >= m_policy.suspect_after.count()) {
      suspects.push_back(i);
    }
  }
  if (suspects.empty()) {
    return out;
  }
  // The second, independent check: a new session each, now.
  std::vector<WorkerPlan> plans;
  for (size_t i : suspects) {
    plans.push_back(m_plans[i]);
  }
  remote::SshOptions check = m_ssh;
  check.connect_timeout = std::min(check.connect_timeout, k_check_connect);
  check.connect_retries = 0;
  m_stats.checks += suspects.size();
  auto answers = poll_workers(m_workload, plans, check);
  std::vector<size_t> reopen;
  for (size_t k = 0; k < suspects.size(); ++k) {
    const size_t i = suspects[k];
    Track& t = m_track[i];
    WorkerObservation obs;
    if (answers) {
      obs = (*answers)[k];
    } else {
      obs.error = answers.error().message;
    }
    if (obs.reached) {
      t.silent_ms = 0;
      t.failed_checks = 0;
      if (Clock::now() - t.reopened >= k_reopen_interval) {
        spdlog::info("{}: its stream {}; reached by a new session, watching it again",
                     worker_label(m_plans[i]),
                     seen[i].open ? "was silent" : "ended (" + seen[i].ended + ")");
        t.reopened = Clock::now();
        reopen.push_back(i);
      }
    } else {
      t.failed_checks += 1;
      if (!seen[i].open && !seen[i].ended.empty()) {
        obs.error = "its stream ended (" + seen[i].ended + "), a new connection: " + obs.error;
      }
      obs.silent_ms = t.silent_ms;
      obs.failed_checks = t.failed_checks;
    }
    out[i] = std::move(obs);
  }
  if (!reopen.empty()) {
    m_stats.reopened += reopen.size();
    open(reopen);
  }
  return out;
}

std::vector<bool> WorkerWatch::stop(milliseconds grace, const std::string& tag, bool remove) {
  const std::string line =
      nlohmann::json{{"stop", {{"grace_ms", grace.count()}, {"tag", tag}, {"remove", remove}}}}
          .dump() +
      "\n";
  std::unique_lock lock(m_mutex);
  std::vector<size_t> asked;
  for (size_t i = 0; i < m_seen.size(); ++i) {
    if (m_seen[i].open && m_seen[i].input) {
      m_seen[i].stop_phase = 0;
      m_seen[i].input->write(line);
      asked.push_back(i);
    }
  }
  const auto start = Clock::now();
  const auto ack_by = start + k_stop_ack;
  const auto done_by = start + grace + k_stop_after_grace;
  auto waiting = [&]() {
    const auto now = Clock::now();
    return std::any_of(asked.begin(), asked.end(), [&](size_t i) {
      const Seen& s = m_seen[i];
      return s.open && s.stop_phase < 2 && (s.stop_phase == 1 || now < ack_by);
    });
  };
  while (waiting() && Clock::now() < done_by) {
    m_changed.wait_for(lock, milliseconds(250));
  }
  std::vector<bool> confirmed(m_seen.size(), false);
  for (size_t i : asked) {
    confirmed[i] = m_seen[i].stop_phase == 2 && (m_seen[i].removed || !remove);
  }
  return confirmed;
}

std::vector<std::optional<std::string>> WorkerWatch::dump_stacks(milliseconds timeout) {
  std::unique_lock lock(m_mutex);
  std::vector<size_t> asked;
  for (size_t i = 0; i < m_seen.size(); ++i) {
    if (m_seen[i].open && m_seen[i].input) {
      m_seen[i].dump_phase = 1;
      m_seen[i].dump.clear();
      m_seen[i].input->write("{\"dump\": {}}\n");
      asked.push_back(i);
    }
  }
  const auto until = Clock::now() + timeout;
  auto waiting = [&]() {
    return std::any_of(asked.begin(), asked.end(),
                       [&](size_t i) { return m_seen[i].open && m_seen[i].dump_phase == 1; });
  };
  while (waiting() && Clock::now() < until) {
    m_changed.wait_for(lock, milliseconds(100));
  }
  std::vector<std::optional<std::string>> out(m_seen.size());
  for (size_t i : asked) {
    if (m_seen[i].dump_phase == 2) {
      out[i] = m_seen[i].dump;
    }
    m_seen[i].dump_phase = 0;
  }
  return out;
}

std::vector<bool> WorkerWatch::send_start(const std::vector<std::string>& commands,
                                          const std::string& input) {
  std::lock_guard lock(m_mutex);
  std::vector<bool> sent(commands.size(), false);
  for (size_t i = 0; i < m_seen.size() && i < commands.size(); ++i) {
    Seen& s = m_seen[i];
    s.start_phase = 0;
    if (!commands[i].empty() && s.open && s.can_start && s.input) {
      s.start_phase = 1;
      s.started = remote::HostResult{};
      nlohmann::json start{{"command", commands[i]}};
      if (!input.empty()) {
        start["input"] = input; // on the stream's stdin, never on a command line
      }
      s.input->write(nlohmann::json{{"start", start}}.dump() + "\n");
      sent[i] = true;
    }
  }
  return sent;
}

std::vector<std::optional<remote::HostResult>> WorkerWatch::collect_started(milliseconds timeout) {
  std::unique_lock lock(m_mutex);
  const auto until = Clock::now() + timeout;
  auto waiting = [&]() {
    return std::any_of(m_seen.begin(), m_seen.end(),
                       [](const Seen& s) { return s.open && s.start_phase == 1; });
  };
  while (waiting() && Clock::now() < until) {
    m_changed.wait_for(lock, milliseconds(250));
  }
  std::vector<std::optional<remote::HostResult>> out(m_seen.size());
  for (size_t i = 0; i < m_seen.size(); ++i) {
    Seen& s = m_seen[i];
    if (s.start_phase == 0) {
      continue;
    }
    remote::HostResult r;
    if (s.start_phase == 2) {
      r = s.started;
      m_stats.started += r.succeeded() ? 1 : 0;
    } else {
      r.outcome = remote::Outcome::error;
      r.error = s.open ? "no answer through its stream within " +
                             std::to_string(timeout.count() / 1000) + " s"
                       : "its stream ended before the start was answered (" + s.ended + ")";
    }
    s.start_phase = 0;
    r.index = i;
    r.host = m_plans[i].host;
    out[i] = std::move(r);
  }
  return out;
}

bool WorkerWatch::retarget(const Workload& workload, const std::vector<WorkerPlan>& plans) {
  if (plans.size() != m_plans.size()) {
    return false;
  }
  std::vector<size_t> moved;
  {
    std::lock_guard lock(m_mutex);
    for (size_t i = 0; i < plans.size(); ++i) {
      const WorkerPlan& was = m_plans[i];
      const WorkerPlan& now = plans[i];
      const bool same = was.target.address == now.target.address &&
                        was.target.port == now.target.port && was.target.user == now.target.user &&
                        was.agent_dir == now.agent_dir &&
                        workload_dir(was.workdir, m_workload.uid, was.node, was.worker) ==
                            workload_dir(now.workdir, workload.uid, now.node, now.worker);
      if (same) {
        continue;
      }
      Seen& s = m_seen[i];
      if (s.open && s.input) {
        s.input->write(nlohmann::json{{"close", nlohmann::json::object()}}.dump() + "\n");
      }
      // A new generation at once: the old stream's lines and its end are ignored from now.
      const uint64_t generation = s.generation + 1;
      s = Seen{};
      s.generation = generation;
      m_track[i] = Track{};
      moved.push_back(i);
    }
    m_plans = plans;
    m_workload = workload;
  }
  // The time the monitor spent recovering is nobody's silence.
  m_last_turn = Clock::now();
  m_last_stalled = m_stall.stalled_ms();
  // Their streams open at the next turn: after the start, so that their first line is the new
  // attempt's, not "nothing started here yet".
  m_stats.moved += moved.size();
  m_unopened.insert(m_unopened.end(), moved.begin(), moved.end());
  return true;
}

WorkerWatch::Stats WorkerWatch::stats() const {
  Stats s = m_stats;
  s.stalled_ms = m_stall.stalled_ms();
  return s;
}

} // namespace tpuctl::provision
