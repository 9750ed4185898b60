#include "util/failpoint.hpp"

#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <mutex>
#include <set>
#include <string>
#include <unistd.h>

#include "util/strings.hpp"

namespace tpuctl::util {

void failpoint(std::string_view name) {
  static const char* spec = std::getenv("TPUCTL_FAILPOINT");
  if (spec == nullptr || *spec == '\0') {
    return;
  }
  static std::mutex mu;
  static std::set<std::string> fired;
  std::string action;
  for (const auto& item : split(spec, ',')) {
    auto colon = item.find(':');
    if (item.substr(0, colon) == name) {
      action = colon == std::string::npos ? "kill" : item.substr(colon + 1);
      break;
    }
  }
  if (action.empty()) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!fired.insert(std::string(name)).second) {
      return;
    }
  }
  if (auto at = action.find('@'); at != std::string::npos) { // once, among every process
    const std::string marker = action.substr(at + 1);
    action.resize(at);
    const int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) {
      return; // another process fired it already
    }
    ::close(fd);
  }
  if (action == "sigint") {
    std::raise(SIGINT);
  } else if (action == "stop") {
    std::raise(SIGSTOP); // until SIGCONT: the test changes the world meanwhile
  } else {
    std::raise(SIGKILL);
  }
}

} // namespace tpuctl::util
