// tpuctl agent: the commands that run on a worker, shipped there by tpuctl itself. Hidden from
// `tpuctl --help` because users do not call them directly; their json output is an interface
// between the controller and the agent, so its field names are stable.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "agent/preflight.hpp"
#include "agent/python_hook.hpp"
#include "agent/probe.hpp"
#include "agent/serve_file.hpp"
#include "agent/shared_dir.hpp"
#include "agent/spmd_matmul.hpp"
#include "agent/supervise.hpp"
#include "agent/tcp.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "provision/slice/preflight_report.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

Json facts_json(const agent::HostFacts& f) {
  return Json{{"version", f.version},
              {"hostname", f.hostname},
              {"os", f.os},
              {"kernel", f.kernel},
              {"arch", f.arch},
              {"cores", f.cores},
              {"memory_total_mib", f.memory_total_mib},
              {"memory_available_mib", f.memory_available_mib},
              {"simd", f.simd},
              {"units", f.units},
              {"workdir", f.workdir},
              {"disk_free_mib", f.disk_free_mib},
              {"clock_unix_ms", f.clock_unix_ms}};
}

struct PreflightFlags {
  int worker = 0;
  std::string hostnames;
  int num_workers = 0;        // with I=ADDR entries: how many workers the slice has
  std::string calls, expects; // comma lists of worker indices; both empty: every pair
  bool probe = false;         // first print the host's facts (agent probe) as one JSON line
  std::string workdir = ".";
  std::string python_dir; // write the Python start-up there first (agent/python_hook.hpp)
  int port = 8476;
  std::string timeout = "20s";
  bool kernel_check = false;
};

struct SpmdFlags {
  int m = 0, n = 0, k = 0;
  std::string dtype = "int8";
  std::string mesh;
  std::string timeout = "30s";
  uint64_t seed = 1;
  int threads = 1;
};

double rounded(double v, double scale) {
  return std::round(v * scale) / scale;
}

Json spmd_json(const agent::SpmdResult& r) {
  const auto& id = r.identity;
  const auto& job = r.job;
  Json j{{"worker", id.worker},
         {"slice", id.slice},
         {"process", id.process},
         {"processes", id.processes},
         {"m", job.m},
         {"n", job.n},
         {"k", job.k},
         {"dtype", kernels::to_string(job.dtype)},
         {"mesh", Json{{"data", job.data}, {"model", job.model}}},
         {"seed", job.seed},
         {"threads", r.threads},
         {"isa", r.isa},
         {"peak_probe", r.peak_probe},
         {"peak_gops", rounded(r.peak_gops, 1e2)},
         {"mfu", rounded(r.mfu, 1e4)},
         {"block", Json{{"row", r.block.row},
                        {"col", r.block.col},
                        {"rows", r.block.rows},
                        {"cols", r.block.cols}}},
         {"ring_address", r.ring_address},
         {"generate_ms", rounded(r.generate_ms, 1e3)},
         {"compute_ms", rounded(r.compute_ms, 1e3)},
         {"comm_ms", rounded(r.comm_ms, 1e3)},
         {"check_ms", rounded(r.check_ms, 1e3)},
         {"gops", rounded(r.gops, 1e2)},
         {"checksum_ok", r.checksum.ok},
         {"checksum", Json{{"method", "freivalds"},
                           {"bad_rows", r.checksum.bad_rows},
                           {"worst_ratio", rounded(r.checksum.worst_ratio, 1e6)}}}};
  if (r.has_summary) {
    j["aggregate_gops"] = rounded(r.aggregate_gops, 1e2);
    j["parallel_ms"] = rounded(r.parallel_ms, 1e3);
    j["single_ms"] = rounded(r.single_ms, 1e3);
    j["efficiency"] = rounded(r.efficiency, 1e6);
    j["aggregate_mfu"] = rounded(r.aggregate_mfu, 1e4);
    j["all_checksums_ok"] = r.ok();
    Json peers = Json::array();
    for (size_t p = 0; p < r.reports.size(); ++p) {
      const auto& rep = r.reports[p];
      const auto& e = r.table[p];
      peers.push_back(Json{{"process", e.process},
                           {"slice", e.slice},
                           {"worker", e.worker},
                           {"host", e.host},
                           {"compute_ms", rounded(rep.compute_ms, 1e3)},
                           {"comm_ms", rounded(rep.comm_ms, 1e3)},
                           {"gops", rounded(rep.gops, 1e2)},
                           {"mfu", rounded(rep.peak_gops > 0 ? rep.gops / rep.peak_gops : 0, 1e4)},
                           {"checksum_ok", rep.checksum_ok},
                           {"error", error_json("", rep.error)}});
    }
    j["peers"] = peers;
  }
  return j;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void spmd_table(std::ostream& out, const Json& j) {
  const auto block = j["block"];
  const int r0 = block["row"].get<int>() * block["rows"].get<int>();
  const int c0 = block["col"].get<int>() * block["cols"].get<int>();
  out << "process " << j["process"].get<int>() << " of " << j["processes"].get<int>() << " (slice "
      << j["slice"].get<int>() << ", worker " << j["worker"].get<int>() << "): C[" << r0 << ":"
      << r0 + block["rows"].get<int>() << ", " << c0 << ":" << c0 + block["cols"].get<int>()
      << "] of " << j["m"].get<int>() << "x" << j["n"].get<int>() << "x" << j["k"].get<int>() << " "
      << j["dtype"].get<std::string>() << ", mesh " << j["mesh"]["data"].get<int>() << ","
      << j["mesh"]["model"].get<int>() << "\n";
  out << "  compute " << fixed(j["compute_ms"].get<double>(), 3) << " ms ("
      << fixed(j["gops"].get<double>(), 2) << " GOP/s, MFU "
      << fixed(100 * j["mfu"].get<double>(), 1) << "% of the " << j["isa"].get<std::string>()
      << " peak " << fixed(j["peak_gops"].get<double>(), 1) << "), comm "
      << fixed(j["comm_ms"].get<double>(), 3) << " ms, checksum "
      << (j["checksum_ok"].get<bool>() ? "ok" : "FAILED") << "\n";
  if (!j.contains("peers")) {
    return;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : j["peers"]) {
    rows.push_back({std::to_string(p["process"].get<int>()), std::to_string(p["slice"].get<int>()),
                    std::to_string(p["worker"].get<int>()), p["host"].get<std::string>(),
                    fixed(p["compute_ms"].get<double>(), 3), fixed(p["comm_ms"].get<double>(), 3),
                    fixed(p["gops"].get<double>(), 2),
                    p["error"].is_null() ? (p["checksum_ok"].get<bool>() ? "ok" : "FAILED")
                                         : "error: " + cell_text(p["error"]["message"])});
  }
  out << render_table(
      {"PROCESS", "SLICE", "WORKER", "HOST", "COMPUTE_MS", "COMM_MS", "GOPS", "CHECKSUM"}, rows);
  out << "aggregate " << fixed(j["aggregate_gops"].get<double>(), 2) << " GOP/s over "
      << j["processes"].get<int>() << " processes: parallel "
      << fixed(j["parallel_ms"].get<double>(), 3)
      << " ms (slowest compute + comm), one worker alone " << fixed(j["single_ms"].get<double>(), 3)
      << " ms, efficiency " << fixed(j["efficiency"].get<double>(), 3) << ", MFU "
      << fixed(100 * j["aggregate_mfu"].get<double>(), 1) << "%\n";
}

struct SuperviseFlags {
  agent::SuperviseOptions options;
  std::string heartbeat = "2s";
  std::string kill_grace = "2s";
};

// `agent supervise` (start a workload's command, detached) and `agent supervise-status`.
void add_supervise(CLI::App& group, Registry& registry) {
  auto sf = std::make_shared<SuperviseFlags>();
  CLI::App* supervise = registry.add(
      group, "supervise",
      "run a workload's command detached: own process group, log, exit status, heartbeat",
      [sf](Context& ctx) -> Expected<int> {
        agent::SuperviseOptions o = sf->options;
        TPUCTL_TRY_ASSIGN(o.heartbeat_interval,
                          util::parse_duration(sf->heartbeat, "--heartbeat-interval"));
        TPUCTL_TRY_ASSIGN(o.kill_grace, util::parse_duration(sf->kill_grace, "--kill-grace"));
        TPUCTL_TRY_ASSIGN(auto started, agent::start_supervised(o));
        TPUCTL_TRY(emit(ctx, Json{{"supervisor_pid", started.supervisor_pid},
                                  {"pid", started.pid},
                                  {"dir", started.dir},
                                  {"attempt", o.attempt}}));
        return 0;
      });
  supervise->add_option("--dir", sf->options.dir, "the workload's directory on this worker")
      ->required()
      ->type_name("DIR");
  supervise->add_option("--command", sf->options.command, "run by /bin/sh -c")
      ->required()
      ->type_name("CMD");
  supervise->add_option("--attempt", sf->options.attempt, "attempt number (0 = first run)")
      ->type_name("N");
  supervise->add_option("--heartbeat-interval", sf->heartbeat, "heartbeat period (default 2s)")
      ->type_name("D");
  supervise->add_option("--kill-grace", sf->kill_grace, "TERM -> KILL delay on stop (default 2s)")
      ->type_name("D");
  supervise
      ->add_option("--compilation-cache", sf->options.compilation_cache,
                   "JAX's persistent compilation cache for the command (JAX_COMPILATION_CACHE_DIR)")
      ->type_name("DIR");

  auto dir = std::make_shared<std::string>();
  CLI::App* status = registry.add(group, "supervise-status",
                                  "print a supervised command's status, heartbeat and liveness",
                                  [dir](Context& ctx) -> Expected<int> {
                                    TPUCTL_TRY(emit(ctx, agent::supervised_status(*dir)));
                                    return 0;
                                  });
  status->add_option("--dir", *dir, "the workload's directory on this worker")
      ->required()
      ->type_name("DIR");

  struct WatchFlags {
    std::string dir;
    std::string interval = "2s";
    std::string step_pattern;
    bool report_steps = false;
  };
  auto wf = std::make_shared<WatchFlags>();
  CLI::App* watch = registry.add(
      group, "supervise-watch",
      "stream supervise-status lines (on every change, and every --interval) until stdin closes",
      [wf](Context&) -> Expected<int> {
        agent::WatchOptions o;
        o.dir = wf->dir;
        TPUCTL_TRY_ASSIGN(o.interval, util::parse_duration(wf->interval, "--interval"));
        o.step_pattern = wf->step_pattern;
        o.report_steps = wf->report_steps;
        TPUCTL_TRY(agent::watch_supervised(o, 0, 1));
        return 0;
      });
  watch->add_option("--dir", wf->dir, "the workload's directory on this worker")
      ->required()
      ->type_name("DIR");
  watch->add_option("--interval", wf->interval, "a line at least this often (default 2s)")
      ->type_name("D");
  watch->add_option("--step-pattern", wf->step_pattern,
                    "log lines matching REGEX are steps (its first group the number)")
      ->type_name("REGEX");
  watch->add_flag("--report-steps", wf->report_steps,
                  "send the steps themselves (once a second), not only the progress counters");

  struct StopFlags {
    std::vector<std::string> dirs;
    std::string tag;
    std::string grace = "2s";
  };
  auto stf = std::make_shared<StopFlags>();
  CLI::App* stop = registry.add(
      group, "supervise-stop",
      "stop supervised commands through their supervisors (the tag scan only for orphans)",
      [stf](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto grace, util::parse_duration(stf->grace, "--grace"));
        if (!stf->tag.empty() && stf->tag.find('=') == std::string::npos) {
          return usage_error("--tag '" + util::printable(stf->tag) + "' is not VAR=value");
        }
        const auto s = agent::stop_supervised(stf->dirs, stf->tag, grace);
        TPUCTL_TRY(emit(ctx, Json{{"supervisors", s.supervisors},
                                  {"terminated", s.terminated},
                                  {"killed", s.killed},
                                  {"scanned", s.scanned}}));
        return 0;
      });
  stop->add_option("--dir", stf->dirs, "a worker's directory (repeat for each on this host)")
      ->required()
      ->type_name("DIR");
  stop->add_option("--tag", stf->tag,
                   "VAR=value in every process of the workload, for orphans of a killed "
                   "supervisor")
      ->type_name("VAR=VALUE");
  stop->add_option("--grace", stf->grace, "TERM -> KILL delay for orphans (default 2s)")
      ->type_name("D");
}

// --hostnames: "a,b,c" (every worker, in order), or "I=ADDR,J=ADDR" (only the entries this
// worker needs: provisioning's form, whose length does not grow with the slice) with the count.
Expected<std::vector<std::string>> hostnames_of(const std::string& text, int num_workers) {
  if (text.find('=') == std::string::npos) {
    return util::split(text, ',');
  }
  if (num_workers < 1) {
    return usage_error("--hostnames: I=ADDR entries need --num-workers N (the slice's workers)");
  }
  std::vector<std::string> out(static_cast<size_t>(num_workers));
  for (const auto& item : util::split(text, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      return usage_error("--hostnames: '" + util::printable(item) +
                         "' is not I=ADDR (give every entry as worker index = address)");
    }
    TPUCTL_TRY_ASSIGN(auto index,
                      util::parse_int(item.substr(0, eq), "--hostnames", 0, num_workers - 1));
    out[static_cast<size_t>(index)] = item.substr(eq + 1);
  }
  return out;
}

struct ServeFileFlags {
  std::string file, bind, timeout = "30s";
  int port = 0;
  int clients = 1;
  bool background = false;
  bool stop = false;
};

} // namespace

// `agent shared-dir`: this worker's part of the check that a checkpoint directory is one
// filesystem every worker sees (agent/shared_dir.hpp).
void add_shared_dir(CLI::App& group, Registry& registry) {
  struct Flags {
    agent::SharedDirOptions options;
    std::string timeout = "10s";
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = registry.add(
      group, "shared-dir",
      "check with the other workers that DIR is one filesystem they all see (run on each)",
      [f](Context& ctx) -> Expected<int> {
        agent::SharedDirOptions o = f->options;
        TPUCTL_TRY_ASSIGN(o.timeout, util::parse_duration(f->timeout, "--timeout"));
        TPUCTL_TRY_ASSIGN(auto r, agent::check_shared_dir(o));
        TPUCTL_TRY(emit(ctx, agent::to_json(r)));
        return r.shared ? 0 : 1;
      });
  cmd->add_option("--dir", f->options.dir, "the directory (absolute)")->required()->type_name("DIR");
  cmd->add_option("--token", f->options.token, "the check's token, the same on every worker")
      ->required()
      ->type_name("HEX");
  cmd->add_option("--index", f->options.index, "this worker's place in the check (0: the writer)")
      ->required()
      ->type_name("I");
  cmd->add_option("--count", f->options.count, "how many workers take part")
      ->required()
      ->type_name("N");
  cmd->add_option("--timeout", f->timeout, "how long to wait for the others (default 10s)")
      ->type_name("D");
}

void setup_agent(CLI::App& group, Registry& registry) {
  auto workdir = std::make_shared<std::string>(".");
  CLI::App* probe =
      registry.add(group, "probe", "print this host's facts (cores, memory, SIMD, disk, clock)",
                   [workdir](Context& ctx) -> Expected<int> {
                     TPUCTL_TRY(emit(ctx, facts_json(agent::probe_local_host(*workdir))));
                     return 0;
                   });
  probe->add_option("--workdir", *workdir, "directory whose free space is reported")
      ->type_name("DIR");

  auto pf = std::make_shared<PreflightFlags>();
  CLI::App* preflight = registry.add(
      group, "preflight",
      "check the links to the slice's other workers (--calls/--expects, default all pairs)",
      [pf](Context& ctx) -> Expected<int> {
        agent::PreflightOptions o;
        o.worker = pf->worker;
        TPUCTL_TRY_ASSIGN(o.hostnames, hostnames_of(pf->hostnames, pf->num_workers));
        o.port = pf->port;
        TPUCTL_TRY_ASSIGN(o.timeout, util::parse_duration(pf->timeout, "--timeout"));
        o.kernel_check = pf->kernel_check;
        o.links_given = !pf->calls.empty() || !pf->expects.empty();
        for (auto [text, list, flag] : {std::tuple{&pf->calls, &o.calls, "--calls"},
                                        std::tuple{&pf->expects, &o.expects, "--expects"}}) {
          if (!text->empty() && *text != "none") {
            TPUCTL_TRY_ASSIGN(auto ids, util::parse_int_list(*text, flag, 0, 1 << 20));
            for (auto id : ids) {
              list->push_back(static_cast<int>(id));
            }
          }
        }
        if (!pf->python_dir.empty()) {
          TPUCTL_TRY(agent::install_python_hook(pf->python_dir));
        }
        const char* corrupt = std::getenv("TPUCTL_DEBUG_CORRUPT_RESULT");
        o.corrupt_kernel = corrupt && std::string(corrupt) == "1";
        if (pf->probe) {
          // One line, flushed at once: provisioning times its arrival for the clock check.
          ctx.stdout_stream() << facts_json(agent::probe_local_host(pf->workdir)).dump() << "\n"
                              << std::flush;
        }
        TPUCTL_TRY_ASSIGN(auto result, agent::run_preflight(o));
        TPUCTL_TRY(emit(ctx, provision::preflight_to_json(result)));
        return result.ok() ? 0 : 1;
      });
  preflight->add_option("--worker", pf->worker, "this worker's index in --hostnames")
      ->required()
      ->type_name("N");
  preflight
      ->add_option("--hostnames", pf->hostnames,
                   "every worker's address, worker order, comma list; or only the ones needed "
                   "as I=ADDR,J=ADDR with --num-workers")
      ->required()
      ->type_name("A,B,...");
  preflight->add_option("--num-workers", pf->num_workers, "with I=ADDR hostnames: the worker count")
      ->type_name("N");
  preflight
      ->add_option("--calls", pf->calls,
                   "the workers to reach, comma list (none: no one); default every one")
      ->type_name("I,J,...");
  preflight
      ->add_option("--expects", pf->expects,
                   "the workers that will call, comma list (none: no one); default every one")
      ->type_name("I,J,...");
  preflight->add_option("--port", pf->port, "port every worker listens on (default 8476)")
      ->type_name("PORT");
  preflight->add_option("--timeout", pf->timeout, "give up on unreachable peers after D (20s)")
      ->type_name("D");
  preflight->add_flag("--probe", pf->probe,
                      "first print this host's facts as one JSON line (what agent probe prints)");
  preflight->add_option("--python-dir", pf->python_dir,
                        "first write the workers' Python start-up (sitecustomize.py) into DIR")
      ->type_name("DIR");
  preflight->add_option("--workdir", pf->workdir, "with --probe: the directory whose space counts")
      ->type_name("DIR");
  preflight->add_flag("--kernel-check", pf->kernel_check,
                      "also run a 64x64x64 int8 gemm and compare it to the reference");

  add_supervise(group, registry);
  add_shared_dir(group, registry);

  auto serve = std::make_shared<ServeFileFlags>();
  CLI::App* serve_cmd = registry.add(
      group, "serve-file",
      "send a file to N TCP clients (provisioning's relay of the agent between workers)",
      [serve](Context& ctx) -> Expected<int> {
        if (serve->stop) {
          const bool stopped =
              agent::stop_file_server(serve->bind, serve->port, std::chrono::milliseconds(1000));
          TPUCTL_TRY(emit(ctx, Json{{"stopped", stopped}}));
          return 0; // nothing to stop is not an error: it may have ended by itself
        }
        if (serve->file.empty()) {
          return Error{ErrorKind::usage, "--file is required (or --stop)"};
        }
        agent::ServeFileOptions o;
        o.file = serve->file;
        o.host = serve->bind;
        o.port = serve->port;
        o.clients = serve->clients;
        o.background = serve->background;
        TPUCTL_TRY_ASSIGN(o.timeout, util::parse_duration(serve->timeout, "--timeout"));
        TPUCTL_TRY_ASSIGN(auto r, agent::serve_file(o));
        if (o.background) {
          TPUCTL_TRY(emit(
              ctx, Json{{"listening", agent::join_host_port(o.host, o.port)}, {"pid", r.pid}}));
          return 0;
        }
        TPUCTL_TRY(emit(ctx, Json{{"served", r.served},
                                  {"failed", r.failed},
                                  {"clients", o.clients},
                                  {"stopped", r.stopped}}));
        return r.ok(o.clients) ? 0 : 1;
      });
  serve_cmd->add_option("--file", serve->file, "the file to send")->type_name("PATH");
  serve_cmd->add_option("--bind", serve->bind, "this worker's address to listen on")
      ->required()
      ->type_name("ADDR");
  serve_cmd->add_option("--port", serve->port, "the port to listen on")
      ->required()
      ->type_name("PORT");
  serve_cmd
      ->add_option("--clients", serve->clients,
                   "return after serving this many (default 1; 0: until a client sends Q)")
      ->type_name("N");
  serve_cmd->add_flag("--background", serve->background,
                      "return once listening; a detached process serves");
  serve_cmd->add_flag("--stop", serve->stop, "ask the server on --bind and --port to stop");
  serve_cmd
      ->add_option("--timeout", serve->timeout,
                   "give up on clients that did not come after D (30s)")
      ->type_name("D");

  auto sf = std::make_shared<SpmdFlags>();
  CLI::App* spmd = registry.add(
      group, "spmd-matmul",
      "multi-controller matmul: run on every worker; rendezvous, shard, ring all-gather, check",
      [sf](Context& ctx) -> Expected<int> {
        agent::SpmdMatmulOptions o;
        o.m = sf->m;
        o.n = sf->n;
        o.k = sf->k;
        TPUCTL_TRY_ASSIGN(o.dtype, agent::parse_spmd_dtype(sf->dtype));
        o.mesh = sf->mesh;
        TPUCTL_TRY_ASSIGN(o.timeout, util::parse_duration(sf->timeout, "--timeout"));
        o.seed = sf->seed;
        o.threads = sf->threads;
        const char* corrupt = std::getenv("TPUCTL_DEBUG_CORRUPT_RESULT");
        o.corrupt = corrupt && std::string(corrupt) == "1";
        TPUCTL_TRY_ASSIGN(auto result, agent::run_spmd_matmul(o, agent::read_spmd_env()));
        TPUCTL_TRY(emit(ctx, spmd_json(result), spmd_table));
        return result.ok() ? 0 : 1;
      });
  spmd->add_option("--m", sf->m, "rows of A and C")->required()->type_name("M");
  spmd->add_option("--n", sf->n, "columns of B and C")->required()->type_name("N");
  spmd->add_option("--k", sf->k, "columns of A, rows of B")->required()->type_name("K");
  spmd->add_option("--dtype", sf->dtype, "int8 (exact, default), bf16 or fp32")->type_name("TYPE");
  spmd->add_option("--mesh", sf->mesh,
                   "data,model: process p computes C block (p / model, p % model) (default P,1)")
      ->type_name("D,M");
  spmd->add_option("--timeout", sf->timeout,
                   "deadline of the rendezvous and of each ring step (default 30s)")
      ->type_name("D");
  spmd->add_option("--seed", sf->seed, "seed of A and B (default 1)")->type_name("S");
  spmd->add_option("--threads", sf->threads,
                   "GEMM threads per process and for the baseline; 0 = all (default 1)")
      ->type_name("N");
  spmd->footer(
      "Run it on every worker of every slice at once; each process reads its place from the\n"
      "worker environment and meets process 0 at JAX_COORDINATOR_ADDRESS. Exit status: 0 when\n"
      "the gathered C passed the check, 1 when it did not or a peer was missing, 2 on bad "
      "input.\n\n"
      "Example:\n"
      "  tpuctl ssh qr-1 --worker=all -- tpuctl agent spmd-matmul --m 1024 --n 1024 --k 1024\n");
}

} // namespace tpuctl::cli
