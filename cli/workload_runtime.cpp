#include "cli/workload_runtime.hpp"

#include <cstdlib>
#include <ostream>

#include "cli/qr_runtime.hpp"
#include "cli/state_access.hpp"
#include "cli/terminal.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

Expected<provision::MonitorOptions> monitor_options(Context& ctx, const SshFlags& flags) {
  provision::MonitorOptions o;
  TPUCTL_TRY_ASSIGN(o.ssh, ssh_options(flags));
  // A recovering workload moves its cluster's request itself: reconcile, then drive what needs
  // it (suspend, provision) in this process.
  TPUCTL_TRY_ASSIGN(auto drive, drive_options(ctx, flags));
  // A repair places and provisions only the broken slice again, and the next attempt starts
  // through the monitor's streams, unless asked to repair as tpuctl did before: the whole request
  // back through the queue, every worker over a new session (bench/queue_bench.sh compares).
  const char* whole = std::getenv("TPUCTL_REPAIR_WHOLE_REQUEST");
  if (whole == nullptr || std::string(whole) != "1") {
    o.provision = drive.provision;
  }
  const char* sessions = std::getenv("TPUCTL_RESTART_OVER_NEW_SESSIONS");
  o.start_through_streams = sessions == nullptr || std::string(sessions) != "1";
  o.drive_pool = [&ctx, drive](const std::string& pool) -> Status {
    TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Drivers::none));
    auto carried = provision::drive_pending(*store, pool, drive);
    return carried ? tpuctl::ok() : Status(carried.error());
  };
  auto progress = make_progress(ctx);
  if (progress->enabled()) {
    o.progress = [progress](const std::string& line) { progress->line(line); };
    o.worker_started = [progress](size_t done, size_t total, const std::string& host) {
      progress->status("started " + std::to_string(done) + "/" + std::to_string(total) + " " + host,
                       done == total);
    };
  }
  return o;
}

void ensure_monitor(const Context& ctx, const provision::Workload& wl, const SshFlags& flags) {
  const int64_t now = state::to_unix_ms(state::system_clock()());
  if (provision::needs_monitor(wl, now)) {
    spawn_detached(ctx, wl.pool, {"workload", "monitor", wl.name}, flags,
                   "workload-" + wl.name + ".log");
  } else if (provision::ttl_expired(wl, now)) {
    // Its --ttl-seconds-after-finished passed with no monitor left to delete it.
    spawn_detached(ctx, wl.pool, {"workload", "delete", wl.name}, flags,
                   "workload-" + wl.name + "-delete.log");
  }
}

void ensure_monitors(const Context& ctx, const std::vector<provision::Workload>& workloads) {
  SshFlags defaults;
  for (const auto& w : workloads) {
    ensure_monitor(ctx, w, defaults);
  }
}

} // namespace tpuctl::cli
