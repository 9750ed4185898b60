#include "remote/worker_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <set>
#include <thread>

#include "remote/jump_spec.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote::detail {

void EventSink::line(const HostLine& line) {
  if (!m_callbacks.on_line) {
    return;
  }
  std::lock_guard lock(m_mutex);
  m_callbacks.on_line(line);
}

void EventSink::lines_flush() {
  if (!m_callbacks.on_lines_flush) {
    return;
  }
  std::lock_guard lock(m_mutex);
  m_callbacks.on_lines_flush();
}

void EventSink::host_done(const HostResult& result) {
  if (!m_callbacks.on_host_done) {
    return;
  }
  std::lock_guard lock(m_mutex);
  m_callbacks.on_host_done(result);
}

std::vector<HostResult> run_pool(size_t count, size_t batch_size, const IdentityStore& identities,
                                 const CancelToken* cancel,
                                 const std::function<HostResult(size_t, WorkerContext&)>& task) {
  std::vector<HostResult> results(count);
  if (count == 0) {
    return results;
  }
  size_t workers = std::clamp<size_t>(batch_size, 1, count);
  std::vector<std::unique_ptr<WorkerSlot>> slots;
  for (size_t w = 0; w < workers; ++w) {
    slots.push_back(std::make_unique<WorkerSlot>());
  }
  std::atomic<size_t> next{0};
  std::mutex done_mutex;
  std::condition_variable done_cv;
  size_t running = workers;
  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      install_thread_logging();
      ThreadKeys keys;
      WorkerContext ctx{*slots[w], keys, identities, cancel};
      for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
        results[i] = task(i, ctx);
      }
      std::lock_guard lock(done_mutex);
      --running;
      done_cv.notify_all();
    });
  }
  {
    std::unique_lock lock(done_mutex);
    while (running > 0) {
      done_cv.wait_for(lock, std::chrono::milliseconds(50));
      if (cancel != nullptr && cancel->cancelled()) {
        for (auto& slot : slots) {
          slot->interrupt();
        }
      }
    }
  }
  for (auto& t : threads) {
    t.join();
  }
  return results;
}

Expected<IdentityStore> prepare_run(const std::vector<const SshTarget*>& targets,
                                    const SshOptions& options) {
  static const std::set<std::string> k_extra = {"proxycommand", "ciphers", "kexalgorithms",
                                                "hostkeyalgorithms", "compression"};
  ErrorList problems;
  if (options.batch_size == 0) {
    problems.add(ErrorKind::usage, "--batch-size: 0 is out of range (must be at least 1)");
  }
  if (options.connect_timeout.count() <= 0) {
    problems.add(ErrorKind::usage, "--connect-timeout: must be positive");
  }
  std::set<std::string> reported;
  for (const SshTarget* t : targets) {
    if (t->address.empty()) {
      problems.add(ErrorKind::usage, "host '" + t->display_name() + "' has no address");
    }
    if (!t->proxy_jump.empty() && reported.insert("\njump " + t->proxy_jump).second) {
      if (auto hops = parse_jump_spec(t->proxy_jump, "host '" + t->display_name() + "' proxy_jump");
          !hops) {
        problems.add(hops.error());
      }
    }
    for (const auto& [key, value] : t->extra) {
      if (!k_extra.count(util::to_lower(key)) && reported.insert(key).second) {
        problems.add(ErrorKind::usage,
                     "ssh option '" + key +
                         "' is not supported (use ProxyCommand, Ciphers, KexAlgorithms, "
                         "HostKeyAlgorithms or Compression, or put it in ~/.ssh/config)");
      }
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  TPUCTL_TRY_ASSIGN(auto store,
                    IdentityStore::load(targets, options.identity_passphrase,
                                        options.passphrase_source, options.use_agent, &options));
  TPUCTL_TRY_ASSIGN(auto host_certs, fetch_host_certificates(targets, options));
  store.set_host_certs(std::move(host_certs));
  return store;
}

HostResult run_host(size_t index, const SshTarget& target, const SshOptions& options,
                    WorkerContext& ctx, EventSink& events, const HostWork& work) {
  const auto t0 = std::chrono::steady_clock::now();
  HostResult r;
  r.index = index;
  r.host = target.display_name();
  if (ctx.cancelled()) {
    r = not_started(index, r.host);
  } else {
    SshOptions attempt;
    Connected c = connect_with_retries(ctx, options, target, attempt);
    if (c.failure) {
      r.outcome = c.failure->outcome;
      r.error = c.failure->message;
    } else {
      work(*c.session, r, t0);
    }
  }
  r.duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  events.host_done(r);
  return r;
}

HostResult not_started(size_t index, const std::string& host) {
  HostResult r;
  r.index = index;
  r.host = host;
  r.outcome = Outcome::interrupted;
  r.error = "interrupted before this host was contacted";
  return r;
}

} // namespace tpuctl::remote::detail
