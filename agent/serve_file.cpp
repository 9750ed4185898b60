#include "agent/serve_file.hpp"

#include <condition_variable>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <vector>

#include "agent/tcp.hpp"

namespace tpuctl::agent {

namespace {

// Listens on host:port; a port held by an earlier server is asked to stop and tried again.
Expected<Socket> listen_taking_over(const std::string& host, int port) {
  auto listener = listen_on(host, port);
  const auto until = SteadyClock::now() + std::chrono::seconds(2);
  bool asked = false;
  while (!listener && SteadyClock::now() < until) {
    if (!asked) {
      asked = stop_file_server(host, port, std::chrono::milliseconds(200));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    listener = listen_on(host, port);
  }
  return listener;
}

// The child of a background server: its own session, stdio on /dev/null.
void detach() {
  ::setsid();
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::close(null);
  }
}

ServeFileResult serve(const Socket& listener, const std::string& content,
                      const ServeFileOptions& options, Deadline deadline) {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Socket> queue;
  bool accepting = true;
  ServeFileResult result;
  auto sender = [&]() {
    for (;;) {
      Socket s;
      {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return !queue.empty() || !accepting; });
        if (queue.empty()) {
          return;
        }
        s = std::move(queue.front());
        queue.pop_front();
      }
      const bool sent =
          static_cast<bool>(send_all_until(s, content.data(), content.size(), deadline));
      s.close();
      std::lock_guard lock(mutex);
      (sent ? result.served : result.failed) += 1;
    }
  };
  std::vector<std::thread> senders;
  const int threads = options.clients == 0 ? 8 : std::min(8, options.clients);
  for (int i = 0; i < threads; ++i) {
    senders.emplace_back(sender);
  }
  for (int fetches = 0; options.clients == 0 || fetches < options.clients;) {
    auto s = accept_until(listener, deadline);
    if (!s) {
      break; // the timeout: whoever did not come is not served
    }
    char request = 0;
    const auto asked_by = std::min(deadline, SteadyClock::now() + std::chrono::seconds(5));
    if (!recv_exact_until(*s, &request, 1, asked_by)) {
      continue; // a client that said nothing gets nothing
    }
    if (request == k_serve_quit) {
      result.stopped = true;
      break;
    }
    if (request != k_serve_fetch) {
      continue;
    }
    ++fetches;
    std::lock_guard lock(mutex);
    queue.push_back(std::move(*s));
    cv.notify_all();
  }
  {
    std::lock_guard lock(mutex);
    accepting = false;
  }
  cv.notify_all();
  for (auto& t : senders) {
    t.join();
  }
  return result;
}

} // namespace

Expected<ServeFileResult> serve_file(const ServeFileOptions& options) {
  if (options.clients < 0) {
    return Error{ErrorKind::usage, "--clients: " + std::to_string(options.clients) +
                                       " is out of range (0 for no limit, or more)"};
  }
  if (options.timeout.count() <= 0) {
    return Error{ErrorKind::usage, "--timeout: must be longer than 0 (e.g. 30s)"};
  }
  std::ifstream in(options.file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) {
    return Error{ErrorKind::failure, "cannot read '" + options.file + "'"};
  }
  const std::string content = ss.str();
  TPUCTL_TRY_ASSIGN(Socket listener, listen_taking_over(options.host, options.port));
  const Deadline deadline = SteadyClock::now() + options.timeout;
  if (options.background) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      return Error{ErrorKind::failure, "cannot start the file server in the background"};
    }
    if (pid == 0) {
      detach();
      serve(listener, content, options, deadline);
      ::_exit(0);
    }
    ServeFileResult started;
    started.pid = static_cast<int>(pid);
    return started;
  }
  return serve(listener, content, options, deadline);
}

bool stop_file_server(const std::string& host, int port, std::chrono::milliseconds wait) {
  auto address = resolve_address(host, port);
  if (!address) {
    return false;
  }
  const Deadline deadline = SteadyClock::now() + wait;
  auto s = connect_until(*address, deadline);
  return s && static_cast<bool>(send_all_until(*s, &k_serve_quit, 1, deadline));
}

} // namespace tpuctl::agent
