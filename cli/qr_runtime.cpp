#include "cli/qr_runtime.hpp"

#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <iostream>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "cli/exit_codes.hpp"
#include "cli/terminal.hpp"
#include "provision/queue/reconcile.hpp"
#include "state/location.hpp"
#include "util/private_files.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("/proc/self/exe") : p.string();
}

} // namespace

Expected<std::string> state_dir(const Context& ctx) {
  auto env = state::PathEnvironment::from_process();
  TPUCTL_TRY_ASSIGN(auto loc, state::parse_state_url(ctx.globals.state, env));
  if (loc.backend == state::Backend::sqlite) {
    return std::filesystem::path(loc.path).parent_path().string();
  }
  TPUCTL_TRY_ASSIGN(std::string path, state::default_state_path(env));
  return std::filesystem::path(path).parent_path().string();
}

Expected<provision::DriveOptions> drive_options(const Context& ctx, const SshFlags& flags) {
  provision::DriveOptions o;
  TPUCTL_TRY_ASSIGN(o.provision.ssh, ssh_options(flags));
  o.provision.binary = self_exe();
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

void spawn_detached(const Context& ctx, const std::string& pool,
                    const std::vector<std::string>& command, const SshFlags& flags,
                    const std::string& log_name) {
  std::string log_dir;
  if (auto dir = state_dir(ctx)) {
    log_dir = *dir + "/logs";
    if (!util::make_private_directories(log_dir)) {
      log_dir.clear(); // best effort: the background tpuctl then logs nowhere
    } else {
      std::error_code ec; // ours: tightened even when an older tpuctl made it
      std::filesystem::permissions(log_dir, std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::replace, ec);
    }
  }
  std::vector<std::string> args{self_exe()};
  if (!ctx.globals.state.empty()) {
    args.insert(args.end(), {"--state", ctx.globals.state});
  }
  // The same etcd access (TPUCTL_ETCD_PASSWORD, if used, is inherited with the environment).
  const GlobalOptions& g = ctx.globals;
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string&>{"--etcd-user", g.etcd_user},
        {"--etcd-password-file", g.etcd_password_file},
        {"--etcd-cacert", g.etcd_cacert},
        {"--etcd-cert", g.etcd_cert},
        {"--etcd-key", g.etcd_key}}) {
    if (!value.empty()) {
      args.insert(args.end(), {flag, value});
    }
  }
  args.insert(args.end(), {"--pool", pool, "--quiet", "--verbosity", "info"});
  if (!log_dir.empty()) {
    args.insert(args.end(), {"--log-file", log_dir + "/" + log_name});
  }
  args.insert(args.end(), command.begin(), command.end());
  args.insert(args.end(), {"--strict-host-key-checking", flags.strict});
  if (!flags.ssh_config.empty()) {
    args.insert(args.end(), {"--ssh-config", flags.ssh_config});
  }
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  pid_t child = fork();
  if (child < 0) {
    spdlog::warn("could not start '{}' for pool '{}': fork failed", util::join(command, " "), pool);
    return;
  }
  if (child == 0) {
    setsid();
    pid_t grandchild = fork();
    if (grandchild != 0) {
      _exit(0);
    }
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    // Its stderr (the one `tpuctl: error:` line a failing command ends with) goes to its log.
    if (!log_dir.empty()) {
      const std::string log = log_dir + "/" + log_name;
      int err = open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
      if (err >= 0) {
        dup2(err, 2);
      }
    }
    for (int fd = 3; fd < 1024; ++fd) {
      close(fd);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  spdlog::info("started '{}' for pool '{}'", util::join(command, " "), pool);
}

void spawn_driver(const Context& ctx, const std::string& pool, const SshFlags& flags) {
  spawn_detached(ctx, pool, {"controller", "drive"}, flags, "driver.log");
}

void warn_unreconciled(const std::vector<Error>& errors) {
  for (const auto& e : errors) {
    if (state::has_reason(e, state::reason::k_schema_too_new) ||
        state::has_reason(e, state::reason::k_read_only)) {
      continue; // read-only store: reads still work, writes say so themselves
    }
    spdlog::warn("due transitions were not applied: {}", e.message);
  }
}

Status reconcile_and_spawn(const Context& ctx, state::StateStore& store) {
  TPUCTL_TRY_ASSIGN(auto result, provision::reconcile_all(store, state::system_clock()));
  warn_unreconciled(result.errors);
  SshFlags defaults;
  for (const auto& pool : result.driver_pools) {
    spawn_driver(ctx, pool, defaults);
  }
  return tpuctl::ok();
}

namespace {

// One tick of follow(): reconciles `pool`, drives `id` and the requests whose lease this
// process holds, and starts one detached driver for the others that need one and were not
// handed off before. Returns how many it carried.
Expected<int> drive_own(const Context& ctx, state::StateStore& store, const std::string& pool,
                        const std::string& id, const provision::DriveOptions& options,
                        const SshFlags& flags, const remote::CancelToken* cancel,
                        std::set<std::string>& handed_off) {
  if (cancel != nullptr && cancel->cancelled()) {
    return 0; // interrupted: nothing more is started here
  }
  TPUCTL_TRY_ASSIGN(auto r, provision::reconcile_pool(store, pool, options.clock));
  int carried = 0;
  bool hand_off = false;
  for (const auto& need : r.needs_driver) {
    TPUCTL_TRY_ASSIGN(auto found, store.find(state::queued_resource_key(pool, need)));
    bool ours = false;
    if (found) {
      if (auto q = provision::qr_from_record(*found)) {
        auto lease = provision::lease_of(*q);
        ours = lease && provision::is_own_lease(*lease);
      }
    }
    if (need == id || ours) {
      TPUCTL_TRY_ASSIGN(auto d, provision::drive(store, pool, need, options, cancel));
      carried += d.carried ? 1 : 0;
    } else if (handed_off.insert(need).second) {
      hand_off = true;
    }
  }
  if (hand_off) {
    spawn_driver(ctx, pool, flags);
  }
  return carried;
}

} // namespace

bool settled(const std::optional<provision::QueuedResource>& qr) {
  using provision::QrState;
  return !qr || qr->state == QrState::active || qr->state == QrState::failed ||
         qr->state == QrState::suspended;
}

Expected<FollowResult> follow(const Context& ctx, state::StateStore& store, const std::string& pool,
                              const std::string& id, const DoneFn& done,
                              std::chrono::milliseconds timeout,
                              const provision::DriveOptions& options, const SshFlags& flags) {
  remote::CancelToken cancel;
  InterruptGuard guard(cancel);
  const auto start = std::chrono::steady_clock::now();
  std::string last_shown;
  auto shown_since = start;
  Progress progress(ctx);
  FollowResult result;
  std::set<std::string> handed_off; // requests given to a detached driver by this call
  // Shows the request's state (when it changed), then drives what is due, so the first line
  // a user sees is where the request stands, not the provisioning detail that follows.
  auto refresh = [&]() -> Status {
    TPUCTL_TRY_ASSIGN(auto found, store.find(state::queued_resource_key(pool, id)));
    result.qr.reset();
    if (found) {
      TPUCTL_TRY_ASSIGN(result.qr, provision::qr_from_record(*found));
    }
    if (progress.enabled()) {
      std::string shown = "gone";
      if (result.qr) {
        const auto& q = *result.qr;
        shown = std::string(to_string(q.state));
        std::string why = q.error ? q.error->message
                          : q.state == provision::QrState::waiting_for_resources
                              ? q.pending_reason
                              : (q.history.empty() ? "" : q.history.back().reason);
        if (!why.empty()) {
          shown += ": " + why;
        }
      }
      if (shown != last_shown) {
        progress.line(id + ": " + shown);
        last_shown = shown;
        shown_since = std::chrono::steady_clock::now();
      } else if (result.qr && !done(result.qr)) {
        // Still in the same state: an elapsed-time status (live on a terminal, else periodic).
        const auto waited = std::chrono::duration_cast<std::chrono::seconds>(
            std::chrono::steady_clock::now() - shown_since);
        progress.status(id + ": still " + std::string(to_string(result.qr->state)) + " after " +
                        util::format_duration(waited));
      }
    }
    return tpuctl::ok();
  };
  TPUCTL_TRY_ASSIGN(auto listing, store.list(state::Kind::queued_resource, pool));
  int64_t revision = listing.revision;
  for (;;) {
    TPUCTL_TRY(refresh());
    if (done(result.qr)) {
      // What this request's change unblocked (a waiting request placed on hosts a delete
      // freed) starts now, in a detached driver, not at the next command.
      TPUCTL_TRY(drive_own(ctx, store, pool, id, options, flags, &cancel, handed_off));
      result.done = true;
      return result;
    }
    TPUCTL_TRY_ASSIGN(int carried,
                      drive_own(ctx, store, pool, id, options, flags, &cancel, handed_off));
    if (carried > 0) {
      continue; // show the new state at once
    }
    if (guard.interrupted() || cancel.cancelled()) {
      std::string where;
      if (auto found = store.find(state::queued_resource_key(pool, id)); found && *found) {
        if (auto q = provision::qr_from_record(**found)) {
          where = " (now " + std::string(to_string(q->state)) +
                  "; the next tpuctl command on this pool, or a running `tpuctl controller`, "
                  "carries it on)";
        }
      }
      return Error(ErrorKind::interrupted, "interrupted while waiting for '" + id + "'" + where);
    }
    if (timeout.count() > 0 && std::chrono::steady_clock::now() - start >= timeout) {
      TPUCTL_TRY(refresh());
      result.done = done(result.qr);
      return result;
    }
    // Sleep until the store changes (etcd: a watch; SQLite: polling its revision), or a second
    // passes: time-based transitions (valid-until, max-run-duration) need ticks too.
    TPUCTL_TRY_ASSIGN(revision, store.wait_for_change(pool, revision, std::chrono::seconds(1)));
  }
}

CarryOn carry_on(const Context& ctx, state::StateStore& store,
                 const provision::QueuedResource& recorded, bool async,
                 std::chrono::milliseconds timeout, const provision::DriveOptions& options,
                 const SshFlags& flags, const std::string& what, std::string_view group) {
  CarryOn result;
  result.qr = recorded;
  result.done = true;
  auto refresh = [&] {
    if (auto now = provision::load_queued_resource(store, recorded.pool, recorded.id)) {
      result.qr = std::move(*now);
    }
  };
  if (async) {
    if (auto r = reconcile_and_spawn(ctx, store); !r) {
      spdlog::warn("{} was created; starting what carries it on failed (the next tpuctl "
                   "command on its pool does): {}",
                   what, r.error().message);
    }
    refresh();
    return result;
  }
  auto followed = follow(ctx, store, recorded.pool, recorded.id, settled, timeout, options, flags);
  if (followed) {
    if (followed->qr) {
      result.qr = *followed->qr;
    }
    result.gone = !followed->qr;
    result.done = followed->done;
    return result;
  }
  result.done = false;
  const Error& e = followed.error();
  if (e.kind == ErrorKind::interrupted || state::has_reason(e, state::reason::k_store_replaced)) {
    result.gone = state::has_reason(e, state::reason::k_store_replaced);
    result.failed = e;
    return result;
  }
  refresh();
  result.failed =
      recorded_then_failed(what, "last seen " + std::string(to_string(result.qr.state)), e,
                           "it stays until deleted: follow it with 'tpuctl qr wait " + recorded.id +
                               "' once the cause is fixed, or delete it with 'tpuctl " +
                               std::string(group) + " delete " + recorded.id + "'");
  return result;
}

} // namespace tpuctl::cli
