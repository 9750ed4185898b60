#include "provision/controller/monitors.hpp"

#include "provision/workload/workload_ops.hpp"

namespace tpuctl::provision {

void ensure_monitor(const Launcher& launcher, const Workload& wl) {
  const int64_t now = state::to_unix_ms(state::system_clock()());
  if (needs_monitor(wl, now)) {
    spawn_detached(launcher, wl.pool, {"workload", "monitor", wl.name},
                   "workload-" + wl.name + ".log");
  } else if (ttl_expired(wl, now)) {
    // Its --ttl-seconds-after-finished passed with no monitor left to delete it.
    spawn_detached(launcher, wl.pool, {"workload", "delete", wl.name},
                   "workload-" + wl.name + "-delete.log");
  }
}

void ensure_monitors(const Launcher& launcher, const std::vector<Workload>& workloads) {
  const Launcher plain = launcher.with_default_ssh();
  for (const auto& w : workloads) {
    ensure_monitor(plain, w);
  }
}

} // namespace tpuctl::provision
