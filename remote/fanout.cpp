// run_fanout: each worker connects, runs its job's command and streams the output through a
// LineSplitter per stream, so callbacks always see whole lines (a partial last line is flushed at
// EOF) however the bytes were split into packets.
#include "remote/fanout.hpp"

#include <memory>
#include <optional>
#include <thread>

#include "remote/line_splitter.hpp"
#include "remote/spool.hpp"
#include "remote/ssh_session.hpp"
#include "remote/worker_pool.hpp"

namespace tpuctl::remote {

namespace {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

} // namespace

namespace detail {

void exec_on(SshSession& session, const ExecRequest& request, bool keep_output,
             const std::function<void(Stream, const char*, size_t)>& on_bytes, EventSink& events,
             HostResult& r, Clock::time_point t0) {
  ExecOutput out{&events, &r, t0};
  exec_on(session, request, keep_output, on_bytes, out);
}

void exec_on(SshSession& session, const ExecRequest& request, bool keep_output,
             const std::function<void(Stream, const char*, size_t)>& on_bytes, ExecOutput& out) {
  LineSplitter split_out, split_err;
  auto emitter = [&](Stream stream) {
    return [&, stream](std::string_view text, bool complete) {
      out.events->line(HostLine{out.r->index, out.r->host, stream, text, complete});
    };
  };
  const LineSplitter::Emit emit_out = emitter(Stream::out);
  const LineSplitter::Emit emit_err = emitter(Stream::err);
  auto finish_lines = [&]() {
    if (out.events->wants_lines()) {
      split_out.finish(emit_out);
      split_err.finish(emit_err);
      out.events->lines_flush();
    }
  };
  ExecSink sink = [&](Stream stream, const char* data, size_t size) {
    HostResult& r = *out.r;
    if (r.first_byte_ms < 0) {
      r.first_byte_ms = ms_since(out.t0);
    }
    if (on_bytes) {
      on_bytes(stream, data, size);
    }
    if (keep_output) {
      (stream == Stream::out ? r.out : r.err).append(data, size);
    }
    if (Spool* spool = (stream == Stream::out ? r.out_spool : r.err_spool).get()) {
      spool->append(std::string_view(data, size));
    }
    if (out.events->wants_lines()) {
      if (stream == Stream::out) {
        split_out.feed(std::string_view(data, size), emit_out);
      } else {
        split_err.feed(std::string_view(data, size), emit_err);
      }
      out.events->lines_flush();
    }
  };
  ExecRequest held = request;
  if (request.on_hold) {
    held.on_hold = [&](int status) {
      finish_lines(); // the first part's lines end here, whoever gets the rest
      return request.on_hold(status);
    };
  }
  ExecResult e = session.exec(held, sink);
  finish_lines();
  HostResult& r = *out.r;
  r.outcome = e.outcome;
  r.exit_code = e.exit_code;
  r.signal_name = e.signal_name;
  r.signal_number = e.signal_number;
  r.error = e.error;
}

} // namespace detail

Status check_command_length(const std::string& command) {
  const size_t sent = detail::wrap_command(std::string(16, '0'), command).size();
  if (sent <= k_max_command_bytes) {
    return tpuctl::ok();
  }
  return usage_error("the command is " + std::to_string(sent) +
                     " bytes as sent (with what tpuctl adds in front), longer than a worker's "
                     "shell takes: at most " +
                     std::to_string(k_max_command_bytes) +
                     " (Linux's MAX_ARG_STRLEN); put it in a script, copy it to the workers "
                     "with 'tpuctl scp' and run that");
}

namespace {

Expected<std::vector<HostResult>> run_jobs(const std::vector<Job>& jobs, const SshOptions& options,
                                           const FanoutCallbacks& callbacks,
                                           const CancelToken* cancel, bool stream) {
  std::vector<const SshTarget*> targets;
  for (const auto& j : jobs) {
    TPUCTL_TRY(check_command_length(j.command));
    targets.push_back(&j.target);
  }
  TPUCTL_TRY_ASSIGN(auto identities, detail::prepare_run(targets, options));
  detail::EventSink events(callbacks);
  return detail::run_pool(
      jobs.size(), options.batch_size, identities, cancel,
      [&](size_t i, detail::WorkerContext& ctx) {
        const Job& job = jobs[i];
        return detail::run_host(
            job.index, job.target, options, ctx, events,
            [&](detail::SshSession& session, HostResult& r, Clock::time_point t0) {
              detail::ExecRequest request(job.command, options.stdin_data, options.command_timeout,
                                          !stream);
              if (options.spool_output && !stream) {
                r.out_spool = std::make_shared<Spool>();
                r.err_spool = std::make_shared<Spool>();
              }
              if (stream) {
                request.stream = true;
                request.poll_slice = std::chrono::milliseconds(10000); // a cancel cuts the socket
                request.input = job.input;
              }
              request.forwards = job.forwards.get();
              detail::exec_on(session, request, options.keep_output, job.on_bytes, events, r, t0);
            });
      });
}

} // namespace

Expected<std::vector<HostResult>> run_fanout(const std::vector<Job>& jobs,
                                             const SshOptions& options,
                                             const FanoutCallbacks& callbacks,
                                             const CancelToken* cancel) {
  return run_jobs(jobs, options, callbacks, cancel, false);
}

Expected<std::vector<HostResult>> run_streams(const std::vector<Job>& jobs,
                                              const SshOptions& options,
                                              const FanoutCallbacks& callbacks,
                                              const CancelToken* cancel) {
  return run_jobs(jobs, options, callbacks, cancel, true);
}

std::vector<Job> make_jobs(const std::vector<SshTarget>& targets, const std::string& command) {
  std::vector<Job> jobs;
  for (size_t i = 0; i < targets.size(); ++i) {
    jobs.push_back(Job{targets[i], command, i, {}});
  }
  return jobs;
}

} // namespace tpuctl::remote
