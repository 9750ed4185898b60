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
#include "provision/controller/controller.hpp"
#include "state/location.hpp"
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
      group, "run", "carry the pools' requests and workloads on, in the foreground",
      [f](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto interval, util::parse_duration(f->interval, "--interval"));
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Drivers::none));
        provision::ControllerOptions o;
        TPUCTL_TRY_ASSIGN(o.drive, drive_options(ctx, f->ssh));
        o.launcher = launcher(ctx, f->ssh);
        o.pool = ctx.globals.pool;
        o.interval = interval;
        o.once = f->once;
        if (!ctx.globals.quiet) {
          o.progress = [&ctx](const std::string& line) {
            *ctx.err << "tpuctl: controller: " << line << "\n";
          };
        }
        o.open_store = [&ctx]() -> Expected<std::unique_ptr<state::StateStore>> {
          TPUCTL_TRY_ASSIGN(auto options, open_options(ctx));
          return state::open_store(ctx.globals.state, options);
        };
        remote::CancelToken cancel;
        InterruptGuard guard(cancel);
        TPUCTL_TRY_ASSIGN(auto result, provision::run_controller(*store, o, &cancel));
        TPUCTL_TRY(emit(ctx, Json{{"carried", result.carried}, {"led", result.led}},
                        [&](std::ostream& os, const Json&) {
                          os << "carried "
                             << util::counted(static_cast<size_t>(result.carried), "request")
                             << (result.led ? "" : " (stood by: another controller led)") << "\n";
                        }));
        return guard.interrupted() ? guard.exit_status() : 0;
      });
  run->add_option("--interval", f->interval, "time between passes (default 2s)")
      ->type_name("D")
      ->check(positive_duration());
  run->add_flag("--once", f->once, "one pass, then exit");
  add_ssh_policy_flags(*run, f->ssh);
  run->footer(
      "Every tpuctl command already reconciles the pools it touches; run a controller when\n"
      "nobody may run commands for a while but time-driven transitions (valid-until,\n"
      "max-run-duration, queue advancement after a slice ends) must still happen on time, and\n"
      "for a pool whose SSH work is the controller's (pool set-ssh-work --by controller): then\n"
      "only the controller provisions, repairs, watches and stops, with its own SSH identity.\n"
      "Several controllers on one etcd store elect one leader (an etcd lease of 5s); the\n"
      "others stand by and one of them leads within seconds when the leader dies.\n"
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
