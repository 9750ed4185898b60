// Internal to remote/: the bounded pool of worker threads behind run_fanout and push_file.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include "remote/ssh_session.hpp"

namespace tpuctl::remote::detail {

// Serializes the user's callbacks: they are called one at a time, from worker threads.
class EventSink {
public:
  explicit EventSink(const FanoutCallbacks& callbacks) : m_callbacks(callbacks) {}
  bool wants_lines() const { return static_cast<bool>(m_callbacks.on_line); }
  void line(const HostLine& line);
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

// Loads the identity keys the targets name, after checking SshTarget::extra keywords and the
// batch size. Errors: usage (bad option), auth (an identity file that cannot be loaded).
Expected<IdentityStore> prepare_run(const std::vector<const SshTarget*>& targets,
                                    const SshOptions& options);

// A HostResult for a host skipped because the run was cancelled before it started.
HostResult not_started(size_t index, const std::string& host);

} // namespace tpuctl::remote::detail
