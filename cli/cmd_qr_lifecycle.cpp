// tpuctl queued-resources delete / reset / wait.
#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/output.hpp"
#include "cli/qr_view.hpp"
#include "cli/runtime_options.hpp"
#include "cli/state_access.hpp"
#include "cli/values.hpp"
#include "provision/pool/ownership.hpp"
#include "provision/pool/pools.hpp"
#include "provision/slice/qr_ops.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

using provision::QrState;
using provision::QueuedResource;

struct LifecycleFlags {
  std::string id;
  bool force = false;
  bool async = false;
  std::string timeout;
  std::string for_condition = "state=ACTIVE";
  bool override_owner = false;
  SshFlags ssh;
};

Expected<int> run_delete(Context& ctx, const LifecycleFlags& f) {
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto drive, drive_options(ctx, f.ssh));
  TPUCTL_TRY_ASSIGN(auto timeout, util::parse_optional_duration(f.timeout, "--timeout"));
  const auto clock = state::system_clock();
  std::vector<state::Event> overrides;
  TPUCTL_TRY(provision::check_queued_resource_owner(*store, pool, f.id, "delete", f.override_owner,
                                                    overrides));
  TPUCTL_TRY_ASSIGN(auto deleting,
                    provision::begin_delete(*store, pool, f.id, f.force, clock, !f.async));
  TPUCTL_TRY(provision::record_overrides(*store, overrides));
  bool waiting = false;
  if (deleting && f.async) {
    provision::spawn_driver(launcher(ctx, f.ssh),
                            pool); // takes the free lease and finishes the delete
  } else if (deleting) {
    TPUCTL_TRY_ASSIGN(auto followed,
                      follow(
                          ctx, *store, pool, f.id,
                          [](const std::optional<QueuedResource>& q) { return !q.has_value(); },
                          timeout, drive, f.ssh, true));
    waiting = !followed.waiting_for.empty(); // its owner finishes it (said on stderr)
    if (!followed.done && !waiting) {
      return Error(ErrorKind::capacity,
                   "queued resource '" + f.id + "' is still DELETING after --timeout " + f.timeout);
    }
  }
  TPUCTL_TRY(provision::reconcile_and_spawn(launcher(ctx),
                                            *store)); // freed hosts may start waiting requests
  const bool under_way = deleting && (f.async || waiting);
  Json j{{"id", f.id},
         {"pool", pool},
         {"deleted", !under_way},
         {"state", under_way ? "DELETING" : "DELETED"}};
  TPUCTL_TRY(emit(ctx, j, [&](std::ostream& os, const Json&) {
    os << (under_way ? "deleting" : "deleted") << " queued resource '" << f.id << "'\n";
  }));
  return 0;
}

Expected<int> run_reset(Context& ctx, const LifecycleFlags& f) {
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto drive, drive_options(ctx, f.ssh));
  TPUCTL_TRY_ASSIGN(auto timeout, util::parse_optional_duration(f.timeout, "--timeout"));
  std::vector<state::Event> overrides;
  TPUCTL_TRY(provision::check_queued_resource_owner(*store, pool, f.id, "reset", f.override_owner,
                                                    overrides));
  TPUCTL_TRY_ASSIGN(auto qr,
                    provision::reset_queued_resource(*store, pool, f.id, state::system_clock()));
  TPUCTL_TRY(provision::record_overrides(*store, overrides));
  if (f.async) {
    TPUCTL_TRY(provision::reconcile_and_spawn(launcher(ctx), *store));
    TPUCTL_TRY_ASSIGN(qr, provision::load_queued_resource(*store, pool, f.id));
  } else {
    TPUCTL_TRY_ASSIGN(auto followed, follow(
                                         ctx, *store, pool, f.id,
                                         [](const std::optional<QueuedResource>& q) {
                                           return !q || q->state == QrState::active ||
                                                  q->state == QrState::failed;
                                         },
                                         timeout, drive, f.ssh, true));
    if (!followed.qr) {
      return Error(ErrorKind::failure, "queued resource '" + f.id + "' was deleted meanwhile");
    }
    qr = *followed.qr;
  }
  TPUCTL_TRY(emit(ctx, qr_json(qr), [&](std::ostream& os, const Json&) { print_qr(os, qr); }));
  return 0;
}

struct WaitCondition {
  bool for_delete = false;
  QrState state = QrState::active;
};

Expected<WaitCondition> parse_for(const std::string& text) {
  if (text == "delete") {
    return WaitCondition{true, QrState::active};
  }
  // state=STATE as kubectl's --for=jsonpath spells a condition, or the bare state (any case).
  const std::string state = util::starts_with(text, "state=") ? text.substr(6) : text;
  if (auto s = provision::parse_qr_state(state)) {
    return WaitCondition{false, *s};
  }
  return usage_error("--for '" + util::printable(text) +
                     "' is not a state (ACTIVE, SUSPENDED, FAILED, ..., or state=STATE) or delete");
}

Expected<int> run_wait(Context& ctx, const LifecycleFlags& f) {
  TPUCTL_TRY_ASSIGN(auto cond, parse_for(f.for_condition));
  TPUCTL_TRY_ASSIGN(auto timeout, util::parse_optional_duration(f.timeout, "--timeout"));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
  TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
  TPUCTL_TRY_ASSIGN(auto drive, drive_options(ctx, f.ssh));
  if (auto existing = provision::load_queued_resource(*store, pool, f.id); !existing) {
    // Already gone: waiting for its deletion is done at once (kubectl wait --for=delete);
    // waiting for a state is not_found at once.
    if (!cond.for_delete || existing.error().kind != ErrorKind::not_found) {
      return existing.error();
    }
  }
  auto done = [&](const std::optional<QueuedResource>& q) {
    if (!q) {
      return true;
    }
    if (cond.for_delete) {
      return false;
    }
    return q->state == cond.state || q->state == QrState::failed;
  };
  TPUCTL_TRY_ASSIGN(auto followed, follow(ctx, *store, pool, f.id, done, timeout, drive, f.ssh));
  if (!followed.qr) {
    if (cond.for_delete) {
      TPUCTL_TRY(emit(ctx, Json{{"id", f.id}, {"deleted", true}},
                      [&](std::ostream& os, const Json&) { os << "'" << f.id << "' is gone\n"; }));
      return 0;
    }
    return Error(ErrorKind::not_found, "queued resource '" + f.id + "' was deleted while waiting",
                 "not_found");
  }
  const QueuedResource& qr = *followed.qr;
  TPUCTL_TRY(emit(ctx, qr_json(qr), [&](std::ostream& os, const Json&) { print_qr(os, qr); }));
  if (!followed.done) {
    return Error(ErrorKind::capacity, "timed out after " + f.timeout + ": '" + f.id + "' is " +
                                          std::string(to_string(qr.state)) + ", not " +
                                          f.for_condition.substr(f.for_condition.find('=') + 1));
  }
  if (qr.state == QrState::failed && cond.state != QrState::failed) {
    return Error(ErrorKind::failure,
                 "'" + f.id + "' reached FAILED instead of " + std::string(to_string(cond.state)) +
                     (qr.error ? ": " + qr.error->code + ": " + qr.error->message : ""));
  }
  return 0;
}

} // namespace

void add_qr_lifecycle(CLI::App& group, Registry& registry) {
  auto del = std::make_shared<LifecycleFlags>();
  CLI::App* d =
      registry.add(group, "delete", "delete a queued resource (and with --force its nodes)",
                   [del](Context& ctx) { return run_delete(ctx, *del); });
  d->add_option("QR_ID", del->id, "the queued resource")->required();
  d->add_flag("--force", del->force, "also delete live nodes: kill their processes, free hosts");
  d->add_flag("--async", del->async, "return at once; a background tpuctl finishes it");
  d->add_flag("--override-owner", del->override_owner,
              "delete another owner's request anyway (recorded with both names)");
  d->add_option("--timeout", del->timeout, "stop waiting after this long (exit 3; 0: no limit)")
      ->type_name("D")
      ->check(timeout_duration());
  add_ssh_policy_flags(*d, del->ssh);

  auto reset = std::make_shared<LifecycleFlags>();
  CLI::App* r = registry.add(group, "reset", "queue a SUSPENDED or FAILED request again",
                             [reset](Context& ctx) { return run_reset(ctx, *reset); });
  r->add_option("QR_ID", reset->id, "the queued resource")->required();
  r->add_flag("--async", reset->async, "return at once");
  r->add_flag("--override-owner", reset->override_owner,
              "reset another owner's request anyway (recorded with both names)");
  r->add_option("--timeout", reset->timeout, "stop waiting after this long (exit 3; 0: no limit)")
      ->type_name("D")
      ->check(timeout_duration());
  add_ssh_policy_flags(*r, reset->ssh);

  auto wait = std::make_shared<LifecycleFlags>();
  CLI::App* w = registry.add(group, "wait", "wait until a request reaches a state (or is deleted)",
                             [wait](Context& ctx) { return run_wait(ctx, *wait); });
  w->add_option("QR_ID", wait->id, "the queued resource")->required();
  w->add_option("--for", wait->for_condition, "STATE or state=STATE (default ACTIVE), or delete")
      ->type_name("COND");
  w->add_option("--timeout", wait->timeout, "give up after this long: exit 3 (0: no limit)")
      ->type_name("D")
      ->check(timeout_duration());
  add_ssh_policy_flags(*w, wait->ssh);
  w->footer("Exit status: 0 when the condition holds, 3 on timeout, 1 when the request reaches\n"
            "FAILED instead, 4 when it does not exist (or is deleted while waiting);\n"
            "--for delete succeeds at once for a request that is already gone.\n"
            "While waiting, this process applies due transitions and carries the request on.");
}

} // namespace tpuctl::cli
