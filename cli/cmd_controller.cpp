// tpuctl controller run / drive: applying due transitions continuously (a shared pool's
// optional babysitter) and carrying requests through PROVISIONING/SUSPENDING/DELETING (the
// hidden `drive`, started detached by commands that leave work behind).
#include <chrono>
#include <thread>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/runtime_options.hpp"
#include "cli/state_access.hpp"
#include "cli/values.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

struct ControllerFlags {
  std::string interval = "2s";
  bool once = false;
  SshFlags ssh;
};

} // namespace

void setup_controller(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<ControllerFlags>();
  CLI::App* run = registry.add(
      group, "run", "apply due transitions continuously, in the foreground",
      [f](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto interval, util::parse_duration(f->interval, "--interval"));
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Drivers::none));
        TPUCTL_TRY_ASSIGN(auto o, drive_options(ctx, f->ssh));
        remote::CancelToken cancel;
        InterruptGuard guard(cancel);
        int total = 0;
        for (;;) {
          TPUCTL_TRY_ASSIGN(int n, provision::drive_pools(*store, ctx.globals.pool, o, &cancel));
          total += n;
          if (f->once || guard.interrupted()) {
            break;
          }
          for (auto waited = std::chrono::milliseconds(0);
               waited < interval && !guard.interrupted();
               waited += std::chrono::milliseconds(100)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
          if (guard.interrupted()) {
            break;
          }
        }
        TPUCTL_TRY(emit(ctx, Json{{"carried", total}}, [&](std::ostream& os, const Json&) {
          os << "carried " << util::counted(static_cast<size_t>(total), "request") << "\n";
        }));
        return guard.interrupted() ? guard.exit_status() : 0;
      });
  run->add_option("--interval", f->interval, "time between passes (default 2s)")
      ->type_name("D")
      ->check(positive_duration());
  run->add_flag("--once", f->once, "one pass, then exit");
  add_ssh_policy_flags(*run, f->ssh);
  run->footer("Every tpuctl command already reconciles the pools it touches; run a controller\n"
              "when nobody may run commands for a while but time-driven transitions (valid-until,\n"
              "max-run-duration, queue advancement after a slice ends) must still happen on time.\n"
              "Two controllers (or a controller and commands) never apply a transition twice.");

  auto d = std::make_shared<ControllerFlags>();
  CLI::App* drive =
      registry.add(group, "drive", "carry pending requests on (started detached)",
                   [d](Context& ctx) -> Expected<int> {
                     TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Drivers::none));
                     TPUCTL_TRY_ASSIGN(auto o, drive_options(ctx, d->ssh));
                     TPUCTL_TRY(provision::drive_pools(*store, ctx.globals.pool, o, nullptr));
                     return 0;
                   });
  add_ssh_policy_flags(*drive, d->ssh);
  drive->group(""); // hidden
}

} // namespace tpuctl::cli
