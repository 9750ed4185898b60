// Internal to remote/: the bounded pool of worker threads behind run_fanout and push_file.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include "remote/push.hpp"
#include "remote/ssh_session.hpp"

namespace tpuctl::remote::detail {

// Serializes the user's callbacks: they are called one at a time, from worker threads.
class EventSink {
public:
  explicit EventSink(const FanoutCallbacks& callbacks) : m_callbacks(callbacks) {}
  bool wants_lines() const { return static_cast<bool>(m_callbacks.on_line); }
  void line(const HostLine& line);
  void lines_flush(); // FanoutCallbacks::on_lines_flush, if set
  void host_done(const HostResult& result);

private:
  const FanoutCallbacks& m_callbacks;
  std::mutex m_mutex;
};

// Runs task(i, ctx) for i in [0, count) on min(batch_size, count) threads, each taking the next
// index when it finishes one (a sliding window, not waves). Each thread has its own libssh
// logging, key copies and WorkerSlot; the calling thread watches `cancel` and interrupts workers
// still connecting. Results come back in index order. Never fails.
std::vector<HostResult> run_pool(size_t count, size_t batch_size, const IdentityStore& identities,
                                 const CancelToken* cancel,
                                 const std::function<HostResult(size_t, WorkerContext&)>& task);

// Loads the identity keys the targets name (with their user certificates), after checking
// SshTarget::extra keywords and the batch size, then fetches the host certificates of the
// targets trusted through a @cert-authority line (fetch_host_certificates). Errors: usage (bad
// option, a malformed known_hosts marker line), auth (an identity file that cannot be loaded).
Expected<IdentityStore> prepare_run(const std::vector<const SshTarget*>& targets,
                                    const SshOptions& options);

// What push_file sends: read, hashed and checked once for all hosts.
struct PushPayload {
  std::shared_ptr<const std::string> content;
  std::string sha256;
  unsigned mode = 0;
  PushOptions options;
};

// Reads push.local_path and checks every remote path (a directory is refused). Errors: failure
// (the local file cannot be read), usage (a remote path names a directory).
Expected<PushPayload> load_push_payload(const PushOptions& push,
                                        const std::vector<std::string>& remote_paths,
                                        const std::vector<std::string>& host_names);

// push_file's work on one connected session: the check (skip_if_same), then the upload, each
// bounded by `timeout`. Fills r's outcome, error, output and `unchanged`. Without
// `may_upload`, a copy that differs is left as it is (ok, `unchanged` false).
void push_on(SshSession& session, const std::string& remote_path, const PushPayload& payload,
             std::chrono::milliseconds timeout, HostResult& r,
             std::chrono::steady_clock::time_point t0, bool may_upload = true);

// run_fanout's work on one connected session: runs the request, keeps the output when
// keep_output, hands raw bytes to on_bytes and whole lines to `events`. Fills r's outcome,
// exit status, signal and error (not duration_ms, and host_done is not called).
void exec_on(SshSession& session, const ExecRequest& request, bool keep_output,
             const std::function<void(Stream, const char*, size_t)>& on_bytes, EventSink& events,
             HostResult& r, std::chrono::steady_clock::time_point t0);

// Where exec_on puts a command's output and result. A held command's on_hold may point it
// elsewhere (the next step's sink and result) before it answers.
struct ExecOutput {
  EventSink* events;
  HostResult* r;
  std::chrono::steady_clock::time_point t0;
};
void exec_on(SshSession& session, const ExecRequest& request, bool keep_output,
             const std::function<void(Stream, const char*, size_t)>& on_bytes, ExecOutput& out);

// One host of run_fanout or push_file, start to end: not started when the run is cancelled,
// else connected (connect_with_retries) and handed to `work`, which fills r from the session;
// then timed and reported to `events`.
using HostWork = std::function<void(SshSession& session, HostResult& r,
                                    std::chrono::steady_clock::time_point t0)>;
HostResult run_host(size_t index, const SshTarget& target, const SshOptions& options,
                    WorkerContext& ctx, EventSink& events, const HostWork& work);

// A HostResult for a host skipped because the run was cancelled before it started.
HostResult not_started(size_t index, const std::string& host);

} // namespace tpuctl::remote::detail
