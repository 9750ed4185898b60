#include "provision/controller/monitors.hpp"

#include "provision/workload/workload_ops.hpp"

namespace tpuctl::provision {

void ensure_monitor(const Launcher& launcher, state::StateStore& store, const Workload& wl) {
  const int64_t now = state::to_unix_ms(state::system_clock()());
  if (needs_monitor(wl, now)) {
    MonitorOptions as;
    as.as_controller = launcher.as_controller;
    auto refusal = workload_ssh_refusal(store, wl, as);
    if (refusal && *refusal) {
      return; // someone else's to watch: its owner's commands, or the controller
    }
    spawn_detached(launcher, wl.pool, {"workload", "monitor", wl.name},
                   "workload-" + wl.name + ".log");
  } else if (ttl_expired(wl, now)) {
    // Its --ttl-seconds-after-finished passed with no monitor left to delete it.
    spawn_detached(launcher, wl.pool, {"workload", "delete", wl.name},
                   "workload-" + wl.name + "-delete.log");
  }
}

void ensure_monitors(const Launcher& launcher, state::StateStore& store,
                     const std::vector<Workload>& workloads) {
  const Launcher plain = launcher.with_default_ssh();
  for (const auto& w : workloads) {
    ensure_monitor(plain, store, w);
  }
}

} // namespace tpuctl::provision
