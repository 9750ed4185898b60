#include "util/failpoint.hpp"

#include <csignal>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

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
  if (action == "sigint") {
    std::raise(SIGINT);
  } else if (action == "stop") {
    std::raise(SIGSTOP); // until SIGCONT: the test changes the world meanwhile
  } else {
    std::raise(SIGKILL);
  }
}

} // namespace tpuctl::util
