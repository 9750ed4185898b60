// Provisioning a slice over SSH, step by step, every worker of every node at once.
//
// One SSH session per worker for the whole of it (remote::run_steps): each worker connects once,
// in the first step, and every later step is a new channel on that session, so a slice of N
// workers pays N handshakes, not N per step. The steps, in lockstep over the slice (the next
// starts when every worker finished the one before and none failed):
//   push       push_file's check and upload of the local binary to
//              <workdir>/agent/<sha256>/tpuctl on the seeds (worker 0, 64, 128...; on every
//              worker without the relay), 64 at a time (the caller's batch): the path is
//              content-addressed and the copy is stamped when its sha256 is verified, so a
//              worker that already has this binary costs one `stat` (`unchanged`), and any
//              change to the file since its stamp makes the check hash it in full again.
//   relay      each seed starts serving its copy in the background (`agent serve-file
//              --background`, bounded by 30 s; its preflight command stops it).
//   check      every other worker checks its copy and, when it lacks it, fetches it from its
//              seed over plain TCP (remote::push_check_or_fetch_script), checked against the
//              sha256 sent over SSH: the controller sends N/64 copies, not N. Without a startup
//              script this channel is held into the preflight (remote::Step::hold_into): the
//              same shell runs the agent's preflight when that step starts.
//   push-fallback  over SSH to the workers whose fetch failed (a firewalled port, a dead seed).
//   startup    metadata "startup-script" through `bash -s` (the script on stdin), after the
//              worker's environment (worker_env with no profile) is exported, so the script
//              sees TPU_WORKER_ID, TPU_WORKER_HOSTNAMES, TPUCTL_QR_UID and the agent on PATH.
//   preflight  `<agent> agent preflight --probe` on all workers at once: first the host's facts
//              and its clock on one line (agent probe's), then the check of the worker's O(N)
//              links (agent/preflight.cpp, preflight_peers.hpp: coordinator, torus neighbours,
//              DCN peers). The clock was read at some local instant between the start of the
//              step and the arrival of that first line; check_clock() fails a worker only when
//              its clock lies more than max_clock_skew outside that interval. Then the kernel
//              check's verdict.
// With the agents in place that is one SSH round and one channel per worker (two on the seeds).
// Only the agent binary just pushed is ever run (by its full path), never a tpuctl from PATH.
// The first step that fails on any worker ends provisioning; the report names the first failing
// worker in node and worker order.
#include "provision/slice/provisioning.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include "provision/slice/preflight_peers.hpp"
#include "provision/slice/preflight_report.hpp"
#include "provision/slice/secrets.hpp"
#include "provision/slice/slice_env.hpp"
#include "provision/slice/slice_workers.hpp"
#include "remote/fanout.hpp"
#include "remote/session_steps.hpp"
#include "topology/accelerator_type.hpp"
#include "util/failpoint.hpp"
#include "util/sha256.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::provision {

using nlohmann::json;
using std::chrono::milliseconds;

namespace {

struct SliceWorker {
  int node_index = 0;
  std::string node_id;
  int worker = 0;
  HostEntry host;
  remote::SshTarget target;
  std::string agent_dir;
  std::string agent_path;
  std::vector<std::string> peers; // the node's addresses, worker order
};

constexpr milliseconds k_relay_timeout{30000};

int64_t steady_ms() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What went wrong with one SSH command, lowercase: "connection refused (...)", "exit code 3:
// <last stderr line>", "timed out after 120s".
std::string outcome_text(const remote::HostResult& r, milliseconds timeout) {
  using remote::Outcome;
  std::string err = util::last_line(r.err);
  switch (r.outcome) {
  case Outcome::ok:
    return "ok";
  case Outcome::exit_code:
    return "exit code " + std::to_string(r.exit_code) + (err.empty() ? "" : ": " + err);
  case Outcome::signal:
    return "killed by signal " +
           (r.signal_name.empty() ? std::to_string(r.signal_number) : "SIG" + r.signal_name);
  case Outcome::timeout:
    return "timed out after " + std::to_string(timeout.count()) + " ms";
  case Outcome::interrupted:
    return "interrupted";
  default:
    return std::string(remote::to_string(r.outcome)) + (r.error.empty() ? "" : ": " + r.error) +
           (err.empty() ? "" : ": " + err);
  }
}

QrError worker_error(const SliceWorker& w, const std::string& code, const std::string& what) {
  QrError e;
  e.code = code;
  e.worker = w.worker;
  e.node = w.node_id;
  e.host = w.host.name;
  e.message = "worker " + worker_label(w.node_id, w.worker, w.host.name) + ": " + what;
  return e;
}

// preflight_problem with the peers named as the slice knows them: worker and node, address,
// and which link it was ("worker qr-1/5@node06 at 10.0.0.7:8476 over the ICI x link").
std::string link_problem(const agent::PreflightResult& r, const std::vector<SliceWorker>& workers,
                         const std::vector<WorkerLinks>& links, size_t self) {
  agent::PreflightResult rest = r;
  rest.unreachable.clear();
  std::string out = preflight_problem(rest);
  for (const auto& p : r.unreachable) {
    std::string who = "worker " + std::to_string(p.worker);
    if (p.worker >= 0 && static_cast<size_t>(p.worker) < workers.size()) {
      const auto& peer = workers[static_cast<size_t>(p.worker)];
      who = "worker " + worker_label(peer.node_id, peer.worker, peer.host.name);
    }
    const std::string label = link_label(links, static_cast<int>(self), p.worker);
    out += (out.empty() ? "" : "; ") + std::string("cannot reach ") + who + " at " + p.address +
           (label.empty() ? "" : " over the " + label + " link") + " (" + p.error + ")";
  }
  return out;
}

Expected<std::vector<SliceWorker>> collect_workers(const QueuedResource& qr, const PoolView& pool,
                                                   const std::string& sha,
                                                   const std::vector<int>& only_nodes) {
  if (qr.nodes.empty()) {
    return Error{ErrorKind::failure,
                 "queued resource '" + qr.id + "' has no nodes yet (place it before provisioning)"};
  }
  std::vector<SliceWorker> out;
  for (size_t n = 0; n < qr.nodes.size(); ++n) {
    if (!only_nodes.empty() &&
        std::find(only_nodes.begin(), only_nodes.end(), static_cast<int>(n)) == only_nodes.end()) {
      continue;
    }
    const QrNode& node = qr.nodes[n];
    std::vector<std::string> peers;
    for (const auto& w : node.workers) {
      peers.push_back(w.address);
    }
    for (size_t i = 0; i < node.workers.size(); ++i) {
      TPUCTL_TRY_ASSIGN(HostEntry host,
                        worker_host(qr, static_cast<int>(n), static_cast<int>(i), pool));
      SliceWorker w;
      w.node_index = static_cast<int>(n);
      w.node_id = node.id;
      w.worker = static_cast<int>(i);
      w.target = ssh_target(pool.info, host);
      w.agent_dir = agent_dir(host, sha);
      w.agent_path = agent_path(host, sha);
      w.host = std::move(host);
      w.peers = peers;
      out.push_back(std::move(w));
    }
  }
  return out;
}

void say(const ProvisionOptions& o, const std::string& line) {
  if (o.progress) {
    o.progress(line);
  }
}

// The first result that did not succeed, as an error on its worker; nullopt when all did.
std::optional<QrError> first_failure(const std::vector<SliceWorker>& workers,
                                     const std::vector<remote::HostResult>& results,
                                     const std::string& what, milliseconds timeout) {
  for (const auto& r : results) {
    if (!r.succeeded()) {
      return worker_error(workers[r.index], k_provisioning_failed,
                          what + " failed: " + outcome_text(r, timeout));
    }
  }
  return std::nullopt;
}

} // namespace

json to_json(const ProvisionReport& report) {
  json doc{{"ok", report.ok},
           {"agent_sha256", report.agent_sha256},
           {"workers", report.workers},
           {"timings",
            {{"push_ms", report.timings.push_ms},
             {"probe_ms", report.timings.probe_ms},
             {"startup_ms", report.timings.startup_ms},
             {"preflight_ms", report.timings.preflight_ms},
             {"total_ms", report.timings.total_ms}}}};
  if (report.failure) {
    const QrError& f = *report.failure;
    doc["failure"] = json{{"code", f.code},
                          {"message", f.message},
                          {"worker", f.worker},
                          {"node", f.node},
                          {"host", f.host}};
  }
  return doc;
}

namespace {

bool worker_failed(const json& w) {
  const json& pf = w.value("preflight", json(nullptr));
  return w.value("facts", json(nullptr)).is_null() || !pf.is_object() || !pf.value("ok", false);
}

} // namespace

json to_stored_json(const ProvisionReport& report) {
  json doc = to_json(report);
  const json& all = report.workers;
  if (all.size() <= k_report_workers_kept) {
    return doc;
  }
  json kept = json::array();
  json common;
  int passed = 0;
  int64_t max_skew = 0;
  for (const auto& w : all) {
    const json& facts = w.value("facts", json(nullptr));
    if (facts.is_object()) {
      if (common.is_null()) {
        common = facts;
      } else {
        for (auto it = common.begin(); it != common.end();) {
          auto f = facts.find(it.key());
          it = f != facts.end() && *f == it.value() ? std::next(it) : common.erase(it);
        }
      }
    }
    const json& pf = w.value("preflight", json(nullptr));
    if (pf.is_object() && pf.contains("clock") && pf["clock"].is_object()) {
      max_skew = std::max<int64_t>(max_skew, std::abs(pf["clock"].value("skew_ms", int64_t{0})));
    }
    if (!worker_failed(w)) {
      ++passed;
    } else if (kept.size() < k_report_workers_kept) {
      kept.push_back(w);
    }
  }
  doc["workers"] = std::move(kept);
  doc["workers_total"] = all.size();
  doc["facts_common"] = common.is_null() ? json::object() : common;
  doc["preflight_summary"] = json{{"passed", passed},
                                  {"failed", static_cast<int>(all.size()) - passed},
                                  {"max_skew_ms", max_skew}};
  return doc;
}

Expected<ProvisionReport> provision_slice(const QueuedResource& qr_in, const PoolView& pool,
                                          const ProvisionOptions& options,
                                          const remote::CancelToken* cancel) {
  const int64_t t_start = steady_ms();
  // The agent's bytes, read and hashed once: the paths name the hash, and every push step
  // sends these bytes (a binary rebuilt meanwhile cannot make the two disagree).
  std::ifstream binary_in(options.binary, std::ios::binary);
  std::ostringstream binary_bytes;
  binary_bytes << binary_in.rdbuf();
  if (!binary_in) {
    return Error{ErrorKind::failure, "cannot read the agent binary '" + options.binary.string() +
                                         "' (give a readable tpuctl binary)"};
  }
  auto agent_bytes = std::make_shared<const std::string>(binary_bytes.str());
  const std::string sha = util::sha256_hex(*agent_bytes);
  QueuedResource qr = qr_in; // with the agent's sha256, so slice_env_input finds its directory
  qr.provisioning["agent_sha256"] = sha;
  TPUCTL_TRY_ASSIGN(std::vector<SliceWorker> workers,
                    collect_workers(qr, pool, sha, options.only_nodes));

  ProvisionReport report;
  report.agent_sha256 = sha;
  for (const auto& w : workers) {
    report.workers.push_back(json{{"node", w.node_id},
                                  {"worker", w.worker},
                                  {"host", w.host.name},
                                  {"agent_path", w.agent_path},
                                  {"unchanged", false},
                                  {"facts", nullptr},
                                  {"preflight", nullptr}});
  }
  // Push, probe and the startup script go through the caller's batch (64 by default): a few
  // hundred simultaneous key exchanges only slow every host down. The preflight needs every
  // worker at once, so it alone is widened to the worker count.
  remote::SshOptions ssh = options.ssh;
  // One slow sshd among hundreds must not fail a slice: a transient connect failure is tried
  // again three times, with the connect timeout doubled each time (10 s, 20 s, 40 s, 80 s).
  ssh.connect_retries = std::max(ssh.connect_retries, 3);
  ssh.connect_timeout_growth = 2;
  ssh.command_timeout = options.step_timeout;
  ssh.keep_output = true;
  ssh.tty = false;
  ssh.stdin_data = nullptr;
  const size_t count = workers.size();
  auto finish = [&](std::optional<QrError> failure) {
    report.failure = std::move(failure);
    report.ok = !report.failure.has_value();
    report.timings.total_ms = steady_ms() - t_start;
    if (report.failure) {
      say(options, "provisioning failed: " + report.failure->message);
    }
    return report;
  };

  // Counts finished workers per step for options.worker_progress. The step's failpoint
  // (util/failpoint.hpp) fires when the first worker is done, while the others are still in it.
  // Steps that pass the same `done` count their workers together (the push: the seeds in one
  // step, the others in the check).
  auto counting = [&options, count](const std::string& step, remote::FanoutCallbacks cb = {},
                                    std::shared_ptr<size_t> done = nullptr) {
    if (!done) {
      done = std::make_shared<size_t>(0);
    }
    auto inner = cb.on_host_done;
    cb.on_host_done = [&options, step, count, done, inner](const remote::HostResult& r) {
      if (inner) {
        inner(r);
      }
      if (++*done == 1) {
        util::failpoint("provision." + step);
      }
      if (options.worker_progress) {
        options.worker_progress(step, *done, count, r.host);
      }
    };
    return cb;
  };

  // The slice's tag on every agent step, so that stop_slice_processes finds one left behind.
  const std::string tag =
      qr.uid.empty() ? std::string() : "TPUCTL_QR_UID=" + util::shell_quote(qr.uid) + " ";
  std::vector<remote::SshTarget> targets;
  for (const auto& w : workers) {
    targets.push_back(w.target);
  }
  std::vector<remote::Step> steps;

  // (a) push: content-addressed and stamped, so an agent already in place costs one `stat`.
  // Over SSH to the seeds only (to every worker without the relay); each seed then serves its
  // copy (a2) and the rest of its group check theirs and fetch it from the seed when they lack
  // it (a3), on a channel held into the preflight; what the relay could not bring goes over SSH
  // after all (a4).
  const bool relay = options.relay_port > 0 && count > 1;
  const size_t group = std::max<size_t>(1, options.relay_group);
  auto seed_of = [group](size_t i) { return i - i % group; };
  auto is_seed = [&](size_t i) { return !relay || seed_of(i) == i; };
  const size_t seed_count = relay ? (count + group - 1) / group : count;
  std::vector<char> serving(count, 0), fallback(count, 0);
  const std::string relay_suffix = sha.substr(0, 12);
  remote::Step push_step;
  push_step.name = "push";
  push_step.concurrency = ssh.batch_size;
  push_step.timeout = options.step_timeout;
  push_step.push = remote::StepPush{};
  push_step.push->options.local_path = options.binary;
  push_step.push->options.mode = 0700; // run by its owner only, like everything under the workdir
  push_step.push->options.skip_if_same = true;
  push_step.push->options.make_parents = true;
  push_step.push->options.stamp = true;
  push_step.push->options.content = agent_bytes;
  push_step.push->options.sha256 = sha;
  for (const auto& w : workers) {
    push_step.push->remote_paths.push_back(w.agent_path);
  }
  auto pushed = std::make_shared<size_t>(0);
  push_step.callbacks = counting("push", {}, pushed);
  if (relay) {
    push_step.runs_on = is_seed;
    push_step.connect_all = true; // the others connect meanwhile, for their check
  }
  remote::StepPush fallback_push = *push_step.push;
  steps.push_back(std::move(push_step));

  auto relay_address = [&](size_t seed) {
    return util::shell_quote(workers[seed].host.address) + " --port " +
           std::to_string(options.relay_port);
  };
  size_t check_step = 0; // (a3)'s index
  if (relay) {
    remote::Step serve;
    serve.name = "relay";
    serve.concurrency = ssh.batch_size;
    serve.timeout = options.step_timeout;
    serve.reap = false; // the server is detached and bounded by its --timeout
    serve.runs_on = is_seed;
    serve.command_of = [&](size_t i) {
      const auto& w = workers[i];
      return tag + util::shell_quote_path(w.agent_path) + " agent serve-file --background --file " +
             util::shell_quote_path(w.agent_path) + " --bind " + relay_address(i) +
             " --clients 0 --timeout " + std::to_string(k_relay_timeout.count()) +
             "ms --format json";
    };
    serve.callbacks = counting("relay");
    steps.push_back(std::move(serve));

    remote::Step check;
    check.name = "check";
    check.concurrency = ssh.batch_size;
    // A relay port that a firewall drops would hold bash's /dev/tcp connect for minutes: give
    // the check and fetch 30 s, then whoever has no copy gets it over SSH.
    check.timeout = std::min(options.step_timeout, k_relay_timeout);
    check.reap = false; // the check and the fetch end by themselves, or at the timeout
    check.runs_on = [&](size_t i) { return !is_seed(i); };
    check.command_of = [&, seed_of](size_t i) -> std::string {
      const auto& w = workers[i];
      const size_t seed = seed_of(i);
      return remote::with_bash(remote::push_check_or_fetch_script(
          w.agent_path, sha, 0700, serving[seed] ? workers[seed].host.address : std::string(),
          options.relay_port, relay_suffix));
    };
    check.callbacks = counting("push", {}, pushed);
    check_step = steps.size();
    steps.push_back(std::move(check));

    remote::Step over_ssh;
    over_ssh.name = "push-fallback";
    over_ssh.concurrency = ssh.batch_size;
    over_ssh.timeout = options.step_timeout;
    over_ssh.push = std::move(fallback_push);
    over_ssh.runs_on = [&](size_t i) { return fallback[i] != 0; };
    over_ssh.callbacks = counting("push");
    steps.push_back(std::move(over_ssh));
  }

  // (b) startup script
  auto script = qr.metadata.find("startup-script");
  if (script != qr.metadata.end() && !script->second.empty()) {
    remote::Step startup;
    startup.name = "startup";
    startup.concurrency = ssh.batch_size;
    startup.timeout = options.step_timeout;
    // The secrets first on stdin (read by the shell, secrets.hpp), then the script for bash -s.
    startup.stdin_data = remote::InputBytes::of(secret_input(qr.secrets) + script->second);
    for (size_t i = 0; i < count; ++i) {
      const auto& w = workers[i];
      TPUCTL_TRY_ASSIGN(SliceEnvInput in, slice_env_input(qr, w.node_index, w.worker, pool));
      TPUCTL_TRY_ASSIGN(EnvVars env, worker_env(in, w.worker, EnvProfile::none));
      startup.commands.push_back(secret_read_prefix(qr.secrets) +
                                 env_command_prefix(env, w.agent_dir) + "bash -s");
    }
    startup.callbacks = counting("startup");
    steps.push_back(std::move(startup));
  }

  // (c) probe and preflight in one agent invocation on every worker of every node at the same
  // time: the host's facts on the first line (timed on arrival for the clock check), then each
  // worker checks its O(N) links (preflight_peers.hpp) over the slice's global numbering.
  std::vector<WorkerLinks> links;
  if (auto type = topology::parse_accelerator_type(qr.accelerator_type); type) {
    if (auto planned = preflight_links(*type, static_cast<int>(qr.nodes.size()));
        planned && planned->size() == count) {
      links = std::move(*planned);
    }
  }
  remote::Step preflight;
  preflight.name = "preflight";
  preflight.concurrency = 0; // every worker at once: they check each other
  preflight.timeout = options.preflight_timeout + options.step_timeout;
  preflight.reap = false; // the agent ends by itself within its --timeout
  for (size_t i = 0; i < count; ++i) {
    const auto& w = workers[i];
    std::string cmd = tag + util::shell_quote_path(w.agent_path) +
                      " agent preflight --format json --probe --workdir " +
                      util::shell_quote_path(w.agent_dir) + " --python-dir " +
                      util::shell_quote_path(w.agent_dir + "/python");
    if (links.empty()) { // not a grid tpuctl knows: every pair of the node
      cmd += " --worker " + std::to_string(w.worker) + " --hostnames " +
             util::shell_quote(util::join(w.peers, ","));
    } else {
      // Only this worker's and its peers' addresses, as I=ADDR: the command's length does not
      // grow with the slice (a full list was 5 MB of commands at 2,304 workers).
      std::vector<std::string> hostnames{std::to_string(i) + "=" + workers[i].host.address};
      std::vector<std::string> calls, expects;
      for (const auto& l : links[i].calls) {
        hostnames.push_back(std::to_string(l.peer) + "=" +
                            workers[static_cast<size_t>(l.peer)].host.address);
        calls.push_back(std::to_string(l.peer));
      }
      for (int e : links[i].expects) {
        expects.push_back(std::to_string(e));
      }
      cmd += " --worker " + std::to_string(i) + " --num-workers " + std::to_string(count) +
             " --hostnames " + util::shell_quote(util::join(hostnames, ",")) + " --calls " +
             (calls.empty() ? "none" : util::join(calls, ",")) + " --expects " +
             (expects.empty() ? "none" : util::join(expects, ","));
    }
    cmd += " --port " + std::to_string(options.coordinator_port) + " --timeout " +
           std::to_string(options.preflight_timeout.count()) + "ms";
    if (options.kernel_check) {
      cmd += " --kernel-check";
    }
    if (relay && is_seed(i)) { // its fetchers are done: the seed's server can go
      cmd = util::shell_quote_path(w.agent_path) + " agent serve-file --stop --bind " +
            relay_address(i) + " >/dev/null 2>&1; " + cmd;
    }
    preflight.commands.push_back(std::move(cmd));
  }
  if (check_step != 0 && steps.back().name == "push-fallback") {
    steps[check_step].hold_into = steps.size(); // no startup script: check, then preflight
  }
  std::vector<int64_t> first_line(count, 0);
  remote::FanoutCallbacks timing;
  timing.on_line = [&first_line](const remote::HostLine& line) {
    if (line.stream == remote::Stream::out && first_line[line.index] == 0) {
      first_line[line.index] = util::unix_now_ms();
    }
  };
  preflight.callbacks = counting("preflight", timing);
  steps.push_back(std::move(preflight));

  // Between steps: the report, the first failure (which ends provisioning) and what comes next.
  say(options,
      "pushing the agent (sha256 " + sha.substr(0, 12) + ") to " + util::counted(count, "worker"));
  std::optional<QrError> failure;
  int64_t t = steady_ms();
  int64_t probe_before = util::unix_now_ms();
  auto gate = [&](size_t k, const std::vector<remote::HostResult>& results) {
    const std::string& name = steps[k].name;
    const int64_t elapsed = steady_ms() - t;
    if (name == "push") {
      report.timings.push_ms = elapsed;
      size_t unchanged = 0, seeds = 0;
      for (const auto& r : results) {
        if (is_seed(r.index)) {
          ++seeds;
          report.workers[r.index]["unchanged"] = r.unchanged;
          unchanged += r.unchanged ? 1 : 0;
        }
      }
      failure = first_failure(workers, results, "agent push", options.step_timeout);
      if (!failure) {
        say(options, "agent checked in " + std::to_string(elapsed) + " ms on " +
                         std::to_string(seeds) + (relay ? " seeds (" : " workers (") +
                         std::to_string(seeds - unchanged) + " sent over SSH, " +
                         std::to_string(unchanged) + " already there)");
      }
    } else if (name == "relay") {
      report.timings.push_ms += elapsed;
      for (const auto& r : results) {
        if (!is_seed(r.index)) {
          continue;
        }
        serving[r.index] = r.succeeded();
        report.workers[r.index]["serving"] = r.succeeded();
        if (!r.succeeded() &&
            (r.outcome == remote::Outcome::ok || r.outcome == remote::Outcome::exit_code)) {
          // Not fatal: its group gets the agent over SSH instead.
          const auto& w = workers[r.index];
          say(options, "worker " + worker_label(w.node_id, w.worker, w.host.name) +
                           " cannot serve the agent to its group: " +
                           outcome_text(r, options.step_timeout));
        } else if (!r.succeeded()) {
          failure = first_failure(workers, results, "agent relay", options.step_timeout);
        }
      }
    } else if (name == "check") {
      report.timings.push_ms += elapsed;
      size_t unchanged = 0, relayed = 0, failed = 0;
      std::string first;
      for (const auto& r : results) {
        if (is_seed(r.index)) {
          continue;
        }
        const bool ran = r.outcome == remote::Outcome::ok ||
                         r.outcome == remote::Outcome::exit_code ||
                         r.outcome == remote::Outcome::timeout;
        if (!ran) {
          failure = worker_error(workers[r.index], k_provisioning_failed,
                                 "agent push failed: " + outcome_text(r, options.step_timeout));
          break;
        }
        const bool same = r.outcome == remote::Outcome::ok;
        const bool fetched =
            r.outcome == remote::Outcome::exit_code && r.exit_code == remote::k_fetched_exit;
        report.workers[r.index]["unchanged"] = same;
        unchanged += same ? 1 : 0;
        if (!same) {
          report.workers[r.index]["relayed"] = fetched;
          relayed += fetched ? 1 : 0;
        }
        if (!same && !fetched) {
          fallback[r.index] = 1;
          if (failed++ == 0) {
            const auto& w = workers[r.index];
            first = "worker " + worker_label(w.node_id, w.worker, w.host.name) + ": " +
                    outcome_text(r, k_relay_timeout);
          }
        }
      }
      if (!failure) {
        say(options,
            "agent checked on " + std::to_string(count - seed_count) + " more workers in " +
                std::to_string(elapsed) + " ms (" + std::to_string(unchanged) + " already there, " +
                std::to_string(relayed) + " fetched from their seed" +
                (failed ? ", " + std::to_string(failed) +
                              " could not fetch it and get it over SSH; the first, " + first
                        : std::string()) +
                ")");
      }
    } else if (name == "push-fallback") {
      report.timings.push_ms += elapsed;
      failure = first_failure(workers, results, "agent push", options.step_timeout);
    } else if (name == "startup") {
      report.timings.startup_ms = elapsed;
      failure = first_failure(workers, results, "startup script", options.step_timeout);
    } else {
      report.timings.preflight_ms = elapsed;
      return false;
    }
    if (failure) {
      return false;
    }
    const std::string& next = steps[k + 1].name; // relay and push-fallback: the push said
    if (next == "startup") {
      say(options, "running the startup script on " + util::counted(count, "worker"));
    } else if (next == "preflight") {
      say(options, "preflight on " + util::counted(count, "worker") + " (" +
                       (links.empty() ? std::string("all pairs")
                                      : "coordinator, torus neighbours" +
                                            std::string(qr.nodes.size() > 1 ? ", DCN peers" : "")) +
                       ", port " + std::to_string(options.coordinator_port) + ")");
    }
    t = steady_ms();
    probe_before = util::unix_now_ms();
    return true;
  };
  TPUCTL_TRY_ASSIGN(auto step_results, remote::run_steps(targets, ssh, steps, gate, cancel));
  if (failure || step_results.size() < steps.size()) {
    return finish(failure);
  }
  auto& checked = step_results.back();
  const milliseconds preflight_timeout = steps.back().timeout;
  // The facts line, then the preflight's JSON; the clock read when the facts were printed.
  std::vector<ClockCheck> clocks(count);
  for (auto& r : checked) {
    const auto nl = r.out.find('\n');
    json facts = json::parse(r.out.substr(0, nl), nullptr, false);
    if (facts.is_discarded() || !facts.is_object() || !facts.contains("clock_unix_ms")) {
      continue; // reported below as a preflight that printed nothing usable
    }
    report.workers[r.index]["facts"] = facts;
    r.out = nl == std::string::npos ? std::string() : r.out.substr(nl + 1);
    const int64_t after = first_line[r.index] ? first_line[r.index] : util::unix_now_ms();
    clocks[r.index] = check_clock(facts["clock_unix_ms"].get<int64_t>(), probe_before, after,
                                  options.max_clock_skew);
  }
  for (const auto& r : checked) {
    const auto& w = workers[r.index];
    auto parsed = preflight_from_text(r.out);
    bool ran = r.outcome == remote::Outcome::ok ||
               (r.outcome == remote::Outcome::exit_code && r.exit_code == 1);
    std::string problem;
    if (!ran || !parsed) {
      problem = "agent preflight failed: " + outcome_text(r, preflight_timeout);
    } else {
      json doc = preflight_to_json(*parsed);
      const ClockCheck& c = clocks[r.index];
      doc["clock"] = json{{"ok", c.ok},
                          {"skew_ms", c.skew_ms},
                          {"uncertainty_ms", c.uncertainty_ms},
                          {"max_skew_ms", options.max_clock_skew.count()}};
      report.workers[r.index]["preflight"] = doc;
      problem = links.empty() ? preflight_problem(*parsed)
                              : link_problem(*parsed, workers, links, r.index);
      if (problem.empty() && !c.ok) {
        problem = "clock is " + std::to_string(c.skew_ms) + " ms off this machine's (+- " +
                  std::to_string(c.uncertainty_ms) + " ms), more than the allowed " +
                  std::to_string(options.max_clock_skew.count()) + " ms";
      } else if (!problem.empty()) {
        problem = "preflight: " + problem;
      }
    }
    if (!problem.empty() && !failure) {
      failure = worker_error(w, k_preflight_failed, problem);
    }
  }
  if (!failure) {
    say(options, "preflight passed in " + std::to_string(report.timings.preflight_ms) + " ms");
  }
  return finish(failure);
}

std::string stop_processes_script(const std::string& uid, int64_t grace_ms) {
  return stop_tagged_processes_script("TPUCTL_QR_UID", uid, grace_ms);
}

std::string stop_tagged_processes_script(const std::string& variable, const std::string& value,
                                         int64_t grace_ms) {
  // Two passes over the environments at most (the second for what the first one's processes
  // forked before they ended); between TERM and KILL only the pids found are watched, so the
  // cost does not grow with the grace (a rescan every 100 ms did, on every host at once). A
  // workload's processes carry their own grace (-tgps): the longest found is waited for, in one
  // grep over the found processes' environments, capped at k_max_grace_seconds.
  int64_t rounds = std::max<int64_t>(1, (grace_ms + 99) / 100);
  return "u=" + util::shell_quote(variable + "=" + value) +
         "; me=$$\n"
         "pids() {\n"
         "  for f in $(grep -lzxF -e \"$u\" /proc/[0-9]*/environ 2>/dev/null); do\n"
         "    f=${f#/proc/}; f=${f%%/*}; [ \"$f\" = \"$me\" ] || echo \"$f\"\n"
         "  done\n"
         "}\n"
         "alive() {\n" // a zombie is dead; `read` is a builtin: no process per look
         "  l=; read -r l 2>/dev/null < \"/proc/$1/stat\" || return 1\n"
         "  case \"$l\" in *\") Z \"*|*\") X \"*) return 1 ;; esac\n"
         "}\n"
         "own() {\n" // the longest grace the processes ask for, in rounds of 0.1 s
         "  f=; for x in \"$@\"; do f=\"$f /proc/$x/environ\"; done\n"
         "  grep -ahzo '^" +
         std::string(k_process_grace_var) +
         "=[0-9]*$' $f 2>/dev/null | tr '\\0' '\\n' | sed 's/.*=//' | sort -n | tail -n 1\n"
         "}\n"
         "t=0; k=0\n"
         "for pass in 1 2; do\n"
         "  p=$(pids)\n"
         "  [ -n \"$p\" ] || break\n"
         "  r=" +
         std::to_string(rounds) + "; g=$(own $p); [ -n \"$g\" ] && [ \"$g\" -le " +
         std::to_string(k_max_grace_seconds) +
         " ] 2>/dev/null && [ $((g*10)) -gt $r ] && r=$((g*10))\n"
         "  for x in $p; do kill -TERM \"$x\" 2>/dev/null && t=$((t+1)); done\n"
         "  i=0\n"
         "  while [ $i -lt $r ]; do\n"
         "    a=; for x in $p; do alive \"$x\" && a=1 && break; done\n"
         "    [ -n \"$a\" ] || break\n"
         "    sleep 0.1; i=$((i+1))\n"
         "  done\n"
         "  for x in $p; do alive \"$x\" && kill -KILL \"$x\" 2>/dev/null && k=$((k+1)); done\n"
         "done\n"
         "echo \"terminated $t killed $k\"\n";
}

Expected<std::vector<remote::HostResult>> stop_slice_processes(const QueuedResource& qr,
                                                               const PoolView& pool,
                                                               const remote::SshOptions& ssh,
                                                               const remote::CancelToken* cancel) {
  bool valid = !qr.uid.empty() && std::all_of(qr.uid.begin(), qr.uid.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '_';
  });
  if (qr.provisioning.is_object() && qr.provisioning.value(k_nothing_launched, false)) {
    return std::vector<remote::HostResult>{}; // nothing of it can be running: no round of SSH
  }
  if (!valid) {
    return usage_error("queued resource '" + qr.id + "': uid '" + qr.uid +
                       "' must be non-empty letters, digits, '-' or '_' to find its processes");
  }
  std::vector<remote::SshTarget> targets;
  std::vector<remote::SshTarget> shared; // hosts of a local pool: this machine
  std::vector<std::string> seen;
  for (const auto& name : hosts_of(qr)) {
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      continue;
    }
    seen.push_back(name);
    auto it = std::find_if(pool.hosts.begin(), pool.hosts.end(),
                           [&](const HostEntry& h) { return h.name == name; });
    if (it == pool.hosts.end()) {
      return Error{ErrorKind::failure, "queued resource '" + qr.id + "' names host '" + name +
                                           "', which is not in pool '" + pool.info.name + "'"};
    }
    (shares_this_machine(pool.info, *it) ? shared : targets).push_back(ssh_target(pool.info, *it));
  }
  // The caller's batch (64 by default): hundreds of simultaneous key exchanges only slow
  // every host down, and stopping needs no two hosts at the same moment.
  remote::SshOptions o = ssh;
  // A workload's processes may ask for up to k_max_grace_seconds (the script waits for them).
  o.command_timeout =
      ssh.kill_grace + std::chrono::seconds(k_max_grace_seconds) + milliseconds(30000);
  o.keep_output = true;
  o.tty = false;
  o.stdin_data = nullptr;
  const std::string script = stop_processes_script(qr.uid, ssh.kill_grace.count());
  TPUCTL_TRY_ASSIGN(auto results,
                    remote::run_fanout(remote::make_jobs(targets, script), o, {}, cancel));
  // A local pool's hosts are this machine: they share one process table, so one host's scan
  // finds every host's processes. One scan serves them all (one per host would make stopping a
  // local pool quadratic in its size); another host is tried when that one cannot be reached.
  for (size_t i = 0; i < shared.size() && i < 3; ++i) {
    TPUCTL_TRY_ASSIGN(auto one,
                      remote::run_fanout(remote::make_jobs({shared[i]}, script), o, {}, cancel));
    const bool reached = !one.empty() && !remote::is_transport_failure(one[0].outcome);
    if (reached || i + 1 == shared.size() || i == 2) {
      one[0].index = results.size();
      results.push_back(std::move(one[0]));
      break;
    }
  }
  return results;
}

} // namespace tpuctl::provision
