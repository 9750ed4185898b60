#include "cli/runtime_options.hpp"

#include <cstdlib>
#include <filesystem>

#include "cli/exit_codes.hpp"
#include "cli/state_access.hpp"
#include "cli/terminal.hpp"
#include "provision/controller/controller.hpp"
#include "state/location.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

Expected<std::string> state_dir(const Context& ctx) {
  auto env = state::PathEnvironment::from_process();
  TPUCTL_TRY_ASSIGN(auto loc, state::parse_state_url(ctx.globals.state, env));
  if (loc.backend == state::Backend::sqlite) {
    return std::filesystem::path(loc.path).parent_path().string();
  }
  TPUCTL_TRY_ASSIGN(std::string path, state::default_state_path(env));
  return std::filesystem::path(path).parent_path().string();
}

provision::Launcher launcher(const Context& ctx, const SshFlags& flags) {
  provision::Launcher l;
  l.binary = provision::self_exe();
  if (auto dir = state_dir(ctx)) {
    l.log_dir = *dir + "/logs";
  }
  const GlobalOptions& g = ctx.globals;
  if (!g.state.empty()) {
    l.store_args.insert(l.store_args.end(), {"--state", g.state});
  }
  // The same etcd access (TPUCTL_ETCD_PASSWORD, if used, is inherited with the environment).
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string&>{"--etcd-user", g.etcd_user},
        {"--etcd-password-file", g.etcd_password_file},
        {"--etcd-cacert", g.etcd_cacert},
        {"--etcd-cert", g.etcd_cert},
        {"--etcd-key", g.etcd_key}}) {
    if (!value.empty()) {
      l.store_args.insert(l.store_args.end(), {flag, value});
    }
  }
  l.strict = flags.strict;
  l.ssh_config = flags.ssh_config;
  l.passphrase_file = flags.passphrase_file;
  return l;
}

Expected<provision::DriveOptions> drive_options(const Context& ctx, const SshFlags& flags) {
  provision::DriveOptions o;
  TPUCTL_TRY_ASSIGN(o.provision.ssh, ssh_options(flags));
  o.provision.binary = provision::self_exe();
  // How long the workers' preflight waits for its peers (default 20s): a tuning knob for slow
  // networks, inherited by detached drivers.
  if (const char* t = std::getenv("TPUCTL_PREFLIGHT_TIMEOUT"); t != nullptr && *t != '\0') {
    TPUCTL_TRY_ASSIGN(o.provision.preflight_timeout,
                      util::parse_duration(t, "TPUCTL_PREFLIGHT_TIMEOUT"));
  }
  // The port seeds serve the agent on to the rest of their group (default 8477; 0: every worker
  // gets it over SSH), for hosts where it is taken or firewalled.
  if (const char* p = std::getenv("TPUCTL_RELAY_PORT"); p != nullptr && *p != '\0') {
    TPUCTL_TRY_ASSIGN(auto port, util::parse_int(p, "TPUCTL_RELAY_PORT", 0, 65535));
    o.provision.relay_port = static_cast<int>(port);
  }
  auto progress = make_progress(ctx);
  if (progress->enabled()) {
    o.provision.progress = [progress](const std::string& line) { progress->line(line); };
    o.provision.worker_progress = [progress](const std::string& step, size_t done, size_t total,
                                             const std::string& host) {
      progress->status(step + " " + std::to_string(done) + "/" + std::to_string(total) + " " + host,
                       done == total);
    };
  }
  return o;
}

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
  if (std::getenv(provision::k_leader_env) != nullptr) {
    // Started by the elected controller: it acts for it when the leadership checks out.
    TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Drivers::none));
    o.as_controller = provision::acting_for_controller(*store);
  }
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

namespace {

// Progress lines and Ctrl-C for one follow: the guard and the token live as long as it.
struct Terminal {
  explicit Terminal(const Context& ctx) : progress(ctx), guard(cancel) {
    if (progress.enabled()) {
      following.line = [this](const std::string& s) { progress.line(s); };
      following.status = [this](const std::string& s) { progress.status(s); };
    }
    following.cancel = &cancel;
  }
  Progress progress;
  remote::CancelToken cancel;
  InterruptGuard guard;
  provision::Following following;
};

} // namespace

Expected<provision::FollowResult>
follow(const Context& ctx, state::StateStore& store, const std::string& pool, const std::string& id,
       const provision::DoneFn& done, std::chrono::milliseconds timeout,
       const provision::DriveOptions& options, const SshFlags& flags, bool own_action) {
  Terminal t(ctx);
  t.following.stop_when_owners = own_action;
  auto followed =
      provision::follow(store, pool, id, done, timeout, options, launcher(ctx, flags), t.following);
  if (followed && !followed->waiting_for.empty() && !ctx.globals.quiet) {
    *ctx.err << "tpuctl: notice: queued resource '" << id << "' is "
             << (followed->qr ? std::string(to_string(followed->qr->state)) : "gone") << ", "
             << followed->waiting_for << "\n";
  }
  return followed;
}

provision::CarryOn carry_on(const Context& ctx, state::StateStore& store,
                            const provision::QueuedResource& recorded, bool async,
                            std::chrono::milliseconds timeout,
                            const provision::DriveOptions& options, const SshFlags& flags,
                            const std::string& what, std::string_view group) {
  Terminal t(ctx);
  auto result = provision::carry_on(store, recorded, async, timeout, options, launcher(ctx, flags),
                                    t.following, what);
  if (result.failed && result.failed->kind != ErrorKind::interrupted && !result.gone) {
    result.failed = recorded_then_failed(
        what, "last seen " + std::string(to_string(result.qr.state)), *result.failed,
        "it stays until deleted: follow it with 'tpuctl qr wait " + recorded.id +
            "' once the cause is fixed, or delete it with 'tpuctl " + std::string(group) +
            " delete " + recorded.id + "'");
  }
  return result;
}

} // namespace tpuctl::cli
