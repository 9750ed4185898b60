#include "agent/serve_file.hpp"

#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "agent/tcp.hpp"

namespace tpuctl::agent {

Expected<ServeFileResult> serve_file(const ServeFileOptions& options) {
  if (options.clients < 1) {
    return Error{ErrorKind::usage,
                 "--clients: " + std::to_string(options.clients) + " is out of range (at least 1)"};
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
  TPUCTL_TRY_ASSIGN(Socket listener, listen_on(options.host, options.port));
  const Deadline deadline = SteadyClock::now() + options.timeout;

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
      cv.notify_all();
    }
  };
  std::vector<std::thread> senders;
  for (int i = 0; i < std::min(8, options.clients); ++i) {
    senders.emplace_back(sender);
  }
  for (int accepted = 0; accepted < options.clients; ++accepted) {
    auto s = accept_until(listener, deadline);
    if (!s) {
      break; // the timeout: whoever did not come is not served
    }
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

} // namespace tpuctl::agent
