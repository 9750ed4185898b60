#include "agent/shared_dir.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "util/strings.hpp"

namespace tpuctl::agent {

namespace {

constexpr std::chrono::milliseconds k_poll{50};

std::string read_small(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      return false;
    }
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

} // namespace

Expected<SharedDirResult> check_shared_dir(const SharedDirOptions& o) {
  if (o.dir.empty() || o.dir.front() != '/') {
    return usage_error("--dir '" + util::printable(o.dir) + "' must be an absolute path");
  }
  if (o.token.size() < 8 || o.token.size() > 64 ||
      o.token.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return usage_error("--token must be 8 to 64 lowercase hex digits");
  }
  if (o.count < 1 || o.index < 0 || o.index >= o.count) {
    return usage_error("--index must be in 0.." + std::to_string(o.count - 1));
  }
  namespace fs = std::filesystem;
  SharedDirResult r;
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (ec || !fs::is_directory(o.dir)) {
    r.problem = "cannot create '" + o.dir + "': " + (ec ? ec.message() : "not a directory");
    return r;
  }
  const std::string sentinel = o.dir + "/.tpuctl-shared-" + o.token;
  auto ack = [&](int i) { return sentinel + "." + std::to_string(i); };
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  if (o.index == 0) {
    if (!write_file(sentinel, o.token)) {
      r.problem = "cannot write in '" + o.dir + "': " + std::strerror(errno);
      return r;
    }
    std::vector<int> waiting;
    for (int i = 1; i < o.count; ++i) {
      waiting.push_back(i);
    }
    while (!waiting.empty()) {
      std::vector<int> still;
      for (int i : waiting) {
        if (!fs::exists(ack(i), ec)) {
          still.push_back(i);
        }
      }
      waiting = std::move(still);
      if (waiting.empty() || std::chrono::steady_clock::now() >= deadline) {
        break;
      }
      std::this_thread::sleep_for(k_poll);
    }
    for (int i = 1; i < o.count; ++i) {
      fs::remove(ack(i), ec);
    }
    fs::remove(sentinel, ec);
    r.missing = waiting;
    r.shared = waiting.empty();
    if (!r.shared) {
      r.problem = "worker 0 did not see the files of " + util::counted(waiting.size(), "worker") +
                  " in '" + o.dir + "'";
    }
    return r;
  }
  for (;;) {
    if (read_small(sentinel) == o.token) {
      if (!write_file(ack(o.index), o.token)) {
        r.problem = "cannot write in '" + o.dir + "': " + std::strerror(errno);
        return r;
      }
      r.shared = true;
      // Worker 0 removes it; if it gave up first, this one's own file must not stay behind.
      while (fs::exists(sentinel, ec) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(k_poll);
      }
      fs::remove(ack(o.index), ec);
      return r;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      r.problem = "the file worker 0 wrote in '" + o.dir + "' did not appear here within " +
                  std::to_string(o.timeout.count() / 1000) + "s";
      return r;
    }
    std::this_thread::sleep_for(k_poll);
  }
}

nlohmann::json to_json(const SharedDirResult& r) {
  return nlohmann::json{{"shared", r.shared}, {"problem", r.problem}, {"missing", r.missing}};
}

} // namespace tpuctl::agent
