#include "state/event_retention.hpp"

#include <cstdlib>
#include <string>

#include <spdlog/spdlog.h>

#include "util/strings.hpp"

namespace tpuctl::state {

EventRetention event_retention() {
  static const EventRetention k_retention = [] {
    EventRetention r;
    if (const char* age = std::getenv("TPUCTL_EVENT_RETENTION"); age != nullptr && *age != '\0') {
      if (std::string(age) == "0") {
        r.max_age_ms = 0;
      } else if (auto d = util::parse_duration(age, "TPUCTL_EVENT_RETENTION")) {
        r.max_age_ms = d->count();
      } else {
        spdlog::warn("{}; keeping events 90d", d.error().message);
      }
    }
    if (const char* max = std::getenv("TPUCTL_EVENT_MAX"); max != nullptr && *max != '\0') {
      if (auto n = util::parse_int(max, "TPUCTL_EVENT_MAX", 0)) {
        r.max_events = *n;
      } else {
        spdlog::warn("{}; keeping 20000 events a pool", n.error().message);
      }
    }
    return r;
  }();
  return k_retention;
}

} // namespace tpuctl::state
