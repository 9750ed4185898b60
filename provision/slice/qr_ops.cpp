#include "provision/slice/qr_ops.hpp"

#include <algorithm>
#include <cctype>

#include <spdlog/spdlog.h>

#include "provision/pool/pools.hpp"
#include "provision/queue/quota.hpp"
#include "provision/queue/reconcile.hpp"
#include "provision/queue/usage.hpp"
#include "provision/slice/provisioning.hpp"
#include "topology/accelerator_type.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::provision {

namespace {

Expected<topology::AcceleratorType> request_type(const CreateRequest& req, ErrorList& errors) {
  const bool by_name = !req.accelerator_type.empty();
  const bool by_topology = !req.topology.empty() || !req.type.empty();
  if (by_name && by_topology) {
    errors.add(ErrorKind::usage,
               "--accelerator-type '" + util::printable(req.accelerator_type) +
                   "' and --type/--topology are mutually exclusive: give one way of naming the "
                   "slice");
    return make_error(ErrorKind::usage, "");
  }
  if (!by_name && !by_topology) {
    errors.add(ErrorKind::usage, "no slice type: give --accelerator-type (e.g. v5litepod-16) or "
                                 "--type and --topology (e.g. --type v5litepod --topology 4x4)");
    return make_error(ErrorKind::usage, "");
  }
  auto type = by_name ? topology::parse_accelerator_type(req.accelerator_type)
              : (req.type.empty() || req.topology.empty())
                  ? Expected<topology::AcceleratorType>(make_error(
                        ErrorKind::usage, "--type and --topology go together: give both (e.g. "
                                          "--type v5p --topology 4x4x4)"))
                  : topology::accelerator_type_from_topology(req.type, req.topology);
  if (!type) {
    errors.add(type.error());
  }
  return type;
}

std::vector<std::string> node_ids_of(const CreateRequest& req, ErrorList& errors) {
  if (!req.node_id.empty() && req.node_count > 0) {
    errors.add(ErrorKind::usage, "--node-id '" + util::printable(req.node_id) +
                                     "' and --node-count are mutually exclusive");
    return {};
  }
  if (!req.node_prefix.empty() && req.node_count == 0) {
    errors.add(ErrorKind::usage, "--node-prefix needs --node-count");
  }
  if (req.node_count < 0 || req.node_count > 1024) {
    errors.add(ErrorKind::usage, "--node-count " + std::to_string(req.node_count) +
                                     " is out of range: give 1 to 1024");
    return {};
  }
  // A node id or prefix taken from the request id is checked with it (one message per value).
  if (req.node_count > 0) {
    std::string prefix = req.node_prefix.empty() ? req.id : req.node_prefix;
    if (auto s = validate_tpu_name(prefix, "node prefix"); !s) {
      if (!req.node_prefix.empty()) {
        errors.add(s.error());
      }
      return {};
    }
    std::vector<std::string> ids;
    for (int i = 0; i < req.node_count; ++i) {
      ids.push_back(prefix + "-" + std::to_string(i));
    }
    return ids;
  }
  std::string id = req.node_id.empty() ? req.id : req.node_id;
  if (auto s = validate_tpu_name(id, "node id"); !s) {
    if (!req.node_id.empty()) {
      errors.add(s.error());
    }
    return {};
  }
  return {id};
}

QueuedResource new_record(const CreateRequest& req, const topology::AcceleratorType& type,
                          std::vector<std::string> node_ids, int64_t now) {
  QueuedResource qr;
  qr.id = req.id;
  qr.pool = req.pool;
  qr.uid = util::random_hex_id();
  qr.accelerator_type = type.name;
  qr.node_ids = std::move(node_ids);
  qr.runtime_version = req.runtime_version;
  qr.tier = req.tier;
  qr.valid_until_ms = req.valid_until_ms;
  qr.valid_after_ms = req.valid_after_ms;
  qr.max_run_duration_ms = req.max_run_duration_ms;
  qr.on_preemption = req.on_preemption;
  qr.labels = req.labels;
  qr.metadata = req.metadata;
  qr.request_id = req.request_id;
  qr.project = req.project;
  qr.secrets = req.secrets;
  qr.ssh = req.ssh;
  qr.created_at_ms = now;
  transition(qr, QrState::accepted, state::Initiator::user, now, "created");
  return qr;
}

state::Op event_op(const QueuedResource& qr, const std::string& type, QrState from, QrState to,
                   state::Initiator who, int64_t now, const std::string& reason) {
  state::Event e;
  e.time_ms = now;
  e.pool = qr.pool;
  e.subject = qr.id;
  e.type = type;
  e.from_state = std::string(to_string(from));
  e.to_state = std::string(to_string(to));
  e.initiator = who;
  e.detail = nlohmann::json{{"reason", reason}};
  add_usage_detail(e.detail, qr);
  return state::EventOp{std::move(e)};
}

// The ops that remove a record at once (delete --force of a record this tpuctl cannot read, or
// cannot rewrite): the record goes and the hosts it holds are released. Nothing on the workers
// is stopped (`why` says why not).
Expected<std::vector<state::Op>> remove_at_once(state::StateStore& s, const std::string& pool,
                                                const std::string& id,
                                                const std::vector<state::Claim>& held, int64_t now,
                                                const std::string& why) {
  TPUCTL_TRY_ASSIGN(state::Record rec, s.get(state::queued_resource_key(pool, id)));
  spdlog::warn("queued resource '{}' in pool '{}' {}: removing its record and releasing its {} "
               "hosts without stopping anything on them",
               id, pool, why, held.size());
  std::vector<state::Op> ops;
  if (!held.empty()) {
    std::vector<std::string> hosts;
    for (const auto& c : held) {
      hosts.push_back(c.host);
    }
    ops.push_back(state::ReleaseOp{pool, std::move(hosts), id});
  }
  ops.push_back(state::RemoveOp{rec.key, rec.version});
  QueuedResource gone;
  gone.id = id;
  gone.pool = pool;
  ops.push_back(event_op(gone, "DELETED", QrState::deleting, QrState::deleting,
                         state::Initiator::user, now, "removed at once: " + why));
  return ops;
}

// What differs between a stored request and the one `asked` now under the same request id:
// "--accelerator-type v5litepod-4 (not v5litepod-8)", ...; "" when they ask for the same.
std::string request_difference(const QueuedResource& stored, const QueuedResource& asked) {
  std::vector<std::string> diffs;
  auto differ = [&](const std::string& what, const std::string& was, const std::string& now) {
    if (was != now) {
      diffs.push_back(what + " '" + util::printable(was) + "' (now '" + util::printable(now) +
                      "')");
    }
  };
  differ("accelerator type", stored.accelerator_type, asked.accelerator_type);
  differ("nodes", util::join(stored.node_ids, ","), util::join(asked.node_ids, ","));
  differ("tier", std::string(to_string(stored.tier)), std::string(to_string(asked.tier)));
  differ("project", stored.project, asked.project);
  differ("runtime version", stored.runtime_version, asked.runtime_version);
  differ("max run duration", std::to_string(stored.max_run_duration_ms / 1000) + "s",
         std::to_string(asked.max_run_duration_ms / 1000) + "s");
  if (stored.labels != asked.labels) {
    diffs.push_back("other labels");
  }
  if (stored.metadata != asked.metadata) {
    diffs.push_back("other metadata");
  }
  if (stored.secrets != asked.secrets) {
    diffs.push_back("other secrets"); // never their values
  }
  return util::join(diffs, ", ");
}

} // namespace

Status check_request_limits(const CreateRequest& req) {
  ErrorList errors;
  if (auto labels = check_label_count(req.labels.size(), "a queued resource"); !labels) {
    errors.add(labels.error());
  }
  if (req.metadata.size() > k_max_metadata_entries) {
    errors.add(ErrorKind::usage, std::to_string(req.metadata.size()) +
                                     " metadata entries: a queued resource takes at most " +
                                     std::to_string(k_max_metadata_entries));
  }
  size_t bytes = 0;
  for (const auto& [k, v] : req.metadata) {
    bytes += k.size() + v.size();
  }
  if (bytes > k_max_metadata_bytes) {
    errors.add(ErrorKind::usage, "the metadata is " + std::to_string(bytes) +
                                     " bytes: a queued resource takes at most " +
                                     std::to_string(k_max_metadata_bytes) +
                                     " (512 KiB, as Google Cloud): copy large files to the "
                                     "workers with 'tpuctl scp' instead");
  }
  if (!errors.empty()) {
    return errors.combined();
  }
  return tpuctl::ok();
}

Expected<CreateOutcome> create_queued_resource(state::StateStore& store, const CreateRequest& req,
                                               const state::Clock& clock, bool dry_run) {
  ErrorList errors;
  if (auto s = validate_tpu_name(req.id, "queued resource id"); !s) {
    errors.add(s.error());
  }
  if (auto s = validate_project_id(req.project); !s) {
    errors.add(s.error());
  }
  auto type = request_type(req, errors);
  auto node_ids = node_ids_of(req, errors);
  for (const auto& [key, value] : req.metadata) {
    // gcloud's rule for metadata keys, starting with a letter or digit as label keys do.
    bool key_ok = !key.empty() && key.size() <= 128 &&
                  std::isalnum(static_cast<unsigned char>(key.front())) &&
                  std::all_of(key.begin(), key.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
                  });
    if (!key_ok) {
      errors.add(ErrorKind::usage, "metadata key '" + util::printable(key) +
                                       "' is not valid: use letters, digits, '-' and '_', "
                                       "starting with a letter or digit, at most 128 characters");
    }
  }
  if (req.valid_until_ms > 0 && req.valid_after_ms > 0 &&
      req.valid_until_ms <= req.valid_after_ms) {
    errors.add(ErrorKind::usage, "the valid-until time is not after the valid-after time: the "
                                 "request could never start");
  }
  const int64_t now = state::to_unix_ms(clock());
  if (req.valid_until_ms > 0 && req.valid_until_ms <= now) {
    errors.add(ErrorKind::usage, "the valid-until time " +
                                     util::format_timestamp(req.valid_until_ms) +
                                     " has passed: the request would expire at once (give a "
                                     "later --valid-until-time, or --valid-until-duration)");
  }
  if (auto sized = check_request_limits(req); !sized) {
    errors.add(sized.error());
  }
  if (!errors.empty()) {
    return errors.combined();
  }
  TPUCTL_TRY_ASSIGN(PoolView view, load_pool(store, req.pool));
  TPUCTL_TRY(check_compatible(view.info.layout, *type, req.pool));
  const int count = static_cast<int>(node_ids.size());
  if (!fits_empty(view.info.layout, *type, count)) {
    NoFit why = explain_no_fit(view.grid, *type, count, req.pool);
    return Error(ErrorKind::capacity, why.message, "never_fits");
  }
  TPUCTL_TRY(check_quota_can_fit(view.info, new_record(req, *type, node_ids, now)));

  CreateOutcome outcome;
  if (dry_run) {
    TPUCTL_TRY_ASSIGN(auto existing, store.find(state::queued_resource_key(req.pool, req.id)));
    if (existing) {
      return Error(ErrorKind::failure,
                   "queued resource '" + req.id + "' already exists in pool '" + req.pool + "'",
                   std::string(state::reason::k_already_exists));
    }
    outcome.qr = new_record(req, *type, node_ids, now);
    outcome.qr.owner = store.actor();
    auto placed = place_slices(view.grid, *type, count, req.pool);
    if (placed) {
      assign_nodes(outcome.qr, *placed, view);
      outcome.dry_run_placement = *placed;
    } else {
      outcome.why = placed.error().message;
    }
    return outcome;
  }

  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    outcome = {};
    if (!req.request_id.empty()) {
      TPUCTL_TRY_ASSIGN(auto all, list_queued_resources(s, req.pool));
      for (auto& q : all) {
        if (q.request_id != req.request_id) {
          continue;
        }
        if (q.id != req.id) {
          return make_error(ErrorKind::usage, "request id '" + util::printable(req.request_id) +
                                                  "' was already used by queued resource '" + q.id +
                                                  "': use a new request id per request");
        }
        // A retry must ask for what the first try asked for (the TPU API refuses a request id
        // reused with other parameters); the time window is relative to each try, so not
        // compared.
        const QueuedResource asked = new_record(req, *type, node_ids, now);
        if (auto diff = request_difference(q, asked); !diff.empty()) {
          return make_error(ErrorKind::usage,
                            "request id '" + util::printable(req.request_id) +
                                "' was already used by queued resource '" + q.id + "' with " +
                                diff +
                                ": a retry must repeat the same request (or use a new request id)");
        }
        outcome.qr = std::move(q);
        outcome.existed = true;
        return std::vector<state::Op>{};
      }
    }
    outcome.qr = new_record(req, *type, node_ids, now);
    outcome.qr.owner = store.actor();
    std::vector<state::Op> ops;
    ops.push_back(
        state::CreateOp{state::queued_resource_key(req.pool, req.id), to_json(outcome.qr)});
    ops.push_back(event_op(outcome.qr, "CREATED", QrState::accepted, QrState::accepted,
                           state::Initiator::user, now, "created"));
    ops.insert(ops.end(), req.also_commit.begin(), req.also_commit.end());
    return ops;
  });
  if (!committed) {
    Error e = committed.error();
    if (state::has_reason(e, state::reason::k_already_exists)) {
      e.message = "queued resource '" + req.id + "' already exists in pool '" + req.pool +
                  "' (delete it first, or pick another id)";
    }
    return e;
  }
  if (!outcome.existed) {
    outcome.qr.version = committed->revision;
    outcome.qr.create_revision = committed->revision;
  }
  return outcome;
}

Expected<std::optional<QueuedResource>> begin_delete(state::StateStore& store,
                                                     const std::string& pool, const std::string& id,
                                                     bool force, const state::Clock& clock,
                                                     bool take_lease) {
  std::optional<QueuedResource> result;
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    result.reset();
    TPUCTL_TRY_ASSIGN(auto held, s.claims_of(pool, id));
    const int64_t now = state::to_unix_ms(clock());
    auto loaded = load_queued_resource(s, pool, id);
    if (!loaded && state::has_reason(loaded.error(), k_malformed_record)) {
      if (force) {
        return remove_at_once(s, pool, id, held, now, "cannot be read");
      }
      Error e = loaded.error();
      e.message += ": 'tpuctl queued-resources delete " + id + " --force' removes its record" +
                   (held.empty() ? std::string()
                                 : " and releases its " + util::counted(held.size(), "host"));
      return e;
    }
    TPUCTL_TRY_ASSIGN(QueuedResource qr, std::move(loaded));
    const bool has_hosts = holds_hosts(qr.state) || !held.empty();
    if (has_hosts && !force && qr.state != QrState::deleting) {
      return make_error(ErrorKind::failure, "queued resource '" + id + "' is " +
                                                std::string(to_string(qr.state)) + " and holds " +
                                                std::to_string(held.size()) +
                                                " hosts: use --force to delete its nodes too");
    }
    const QrState from = qr.state;
    std::vector<state::Op> ops;
    if (!has_hosts) {
      ops.push_back(state::RemoveOp{state::queued_resource_key(pool, id), qr.version});
      ops.push_back(
          event_op(qr, "DELETED", from, QrState::deleting, state::Initiator::user, now, "deleted"));
      return ops;
    }
    QueuedResource before = qr;
    transition(qr, QrState::deleting, state::Initiator::user, now, "delete requested");
    qr.provisioning.erase("lease");
    if (take_lease) {
      Lease lease = own_lease(now, std::chrono::minutes(10));
      qr.provisioning["lease"] = nlohmann::json{{"host", lease.host},
                                                {"pid", lease.pid},
                                                {"taken_ms", lease.taken_ms},
                                                {"expires_ms", lease.expires_ms}};
    }
    ops.push_back(state::UpdateOp{state::queued_resource_key(pool, id), to_json(qr), qr.version});
    auto events = transition_events(before, qr);
    ops.insert(ops.end(), events.begin(), events.end());
    result = qr;
    return ops;
  });
  if (!committed && force && state::is_permanent_refusal(committed.error())) {
    // The store cannot even record DELETING (a record too large to rewrite): --force still
    // deletes, at once.
    const std::string why = "cannot be rewritten (" + committed.error().message + ")";
    committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
      TPUCTL_TRY_ASSIGN(auto held, s.claims_of(pool, id));
      return remove_at_once(s, pool, id, held, state::to_unix_ms(clock()), why);
    });
    result.reset();
  }
  if (!committed) {
    return committed.error();
  }
  if (result) {
    result->version = committed->revision;
  }
  return result;
}

Expected<QueuedResource> reset_queued_resource(state::StateStore& store, const std::string& pool,
                                               const std::string& id, const state::Clock& clock) {
  QueuedResource out;
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(QueuedResource qr, load_queued_resource(s, pool, id));
    if (qr.state != QrState::suspended && qr.state != QrState::failed) {
      return make_error(ErrorKind::failure,
                        "queued resource '" + id + "' is " + std::string(to_string(qr.state)) +
                            ": only a SUSPENDED or FAILED request can be reset");
    }
    QueuedResource before = qr;
    const int64_t now = state::to_unix_ms(clock());
    if (qr.valid_until_ms > 0 && qr.valid_until_ms <= now) {
      // Queued again, it would expire at once: refuse, as the TPU API refuses a request whose
      // window has closed.
      return make_error(ErrorKind::usage, "queued resource '" + id +
                                              "' cannot be reset: its valid-until time " +
                                              util::format_timestamp(qr.valid_until_ms) +
                                              " has passed (create a new request with a later "
                                              "--valid-until-time or --valid-until-duration)");
    }
    qr.error.reset();
    qr.nodes.clear();
    qr.pending_reason.clear();
    qr.provisioning.erase("lease");
    transition(qr, QrState::waiting_for_resources, state::Initiator::user, now, "reset");
    std::vector<state::Op> ops{
        state::UpdateOp{state::queued_resource_key(pool, id), to_json(qr), qr.version}};
    auto events = transition_events(before, qr);
    ops.insert(ops.end(), events.begin(), events.end());
    out = qr;
    return ops;
  });
  if (!committed) {
    return committed.error();
  }
  out.version = committed->revision;
  return out;
}

Expected<NodeDeletion> delete_node(state::StateStore& store, const std::string& pool,
                                   const std::string& node_id, const state::Clock& clock) {
  TPUCTL_TRY_ASSIGN(TargetNodes target, resolve_node(store, pool, node_id));
  NodeDeletion del;
  del.before = target.qr;
  const QrNode* node = find_node(target.qr, node_id);
  if (node != nullptr) {
    del.node = *node;
  }
  if (target.qr.node_ids.size() <= 1 || target.qr.nodes.size() <= 1) {
    del.whole_request = true;
    TPUCTL_TRY_ASSIGN(del.after, begin_delete(store, pool, target.qr.id, true, clock));
    return del;
  }
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(QueuedResource qr, load_queued_resource(s, pool, target.qr.id));
    const QrNode* n = find_node(qr, node_id);
    if (n == nullptr) {
      return make_error(ErrorKind::not_found, "node '" + node_id + "' has no workers now");
    }
    std::vector<std::string> hosts;
    for (const auto& w : n->workers) {
      hosts.push_back(w.host);
    }
    qr.nodes.erase(std::remove_if(qr.nodes.begin(), qr.nodes.end(),
                                  [&](const QrNode& x) { return x.id == node_id; }),
                   qr.nodes.end());
    qr.node_ids.erase(std::remove(qr.node_ids.begin(), qr.node_ids.end(), node_id),
                      qr.node_ids.end());
    const int64_t now = state::to_unix_ms(clock());
    std::vector<state::Op> ops{
        state::UpdateOp{state::queued_resource_key(pool, qr.id), to_json(qr), qr.version},
        state::ReleaseOp{pool, hosts, qr.id},
        event_op(qr, "NODE_DELETED", qr.state, qr.state, state::Initiator::user, now,
                 "node '" + node_id + "' deleted")};
    del.after = qr;
    return ops;
  });
  if (!committed) {
    return committed.error();
  }
  return del;
}

Status note_launch(state::StateStore& store, const std::string& pool, const QueuedResource& qr) {
  if (!qr.provisioning.is_object() || !qr.provisioning.value(k_nothing_launched, false)) {
    return {};
  }
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(QueuedResource now, load_queued_resource(s, pool, qr.id));
    if (now.state != QrState::active) {
      return make_error(ErrorKind::failure, "queued resource '" + qr.id + "' is " +
                                                std::string(to_string(now.state)) +
                                                ", not ACTIVE: nothing was started on it");
    }
    if (!now.provisioning.is_object() || !now.provisioning.contains(k_nothing_launched)) {
      return std::vector<state::Op>{};
    }
    now.provisioning.erase(k_nothing_launched);
    return std::vector<state::Op>{
        state::UpdateOp{state::queued_resource_key(pool, qr.id), to_json(now), now.version}};
  });
  if (!committed) {
    return committed.error();
  }
  return {};
}

} // namespace tpuctl::provision
