#include "provision/queue/queued_resource.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>

#include <spdlog/spdlog.h>

#include "provision/pool/ownership.hpp"
#include "provision/pool/projects.hpp"
#include "provision/pool/request_ssh.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

using Json = nlohmann::json;

namespace {

struct StateName {
  QrState state;
  std::string_view name;
};
constexpr std::array<StateName, 8> k_state_names{{
    {QrState::accepted, "ACCEPTED"},
    {QrState::waiting_for_resources, "WAITING_FOR_RESOURCES"},
    {QrState::provisioning, "PROVISIONING"},
    {QrState::active, "ACTIVE"},
    {QrState::suspending, "SUSPENDING"},
    {QrState::suspended, "SUSPENDED"},
    {QrState::failed, "FAILED"},
    {QrState::deleting, "DELETING"},
}};

struct TierName {
  Tier tier;
  std::string_view name;
};
constexpr std::array<TierName, 5> k_tier_names{{
    {Tier::reserved, "reserved"},
    {Tier::standard, "standard"},
    {Tier::flex_start, "flex-start"},
    {Tier::spot, "spot"},
    {Tier::best_effort, "best-effort"},
}};

Json dims_json(const Dims& d) {
  return Json::array({d[0], d[1], d[2]});
}

Json string_map_json(const std::map<std::string, std::string>& m) {
  Json j = Json::object();
  for (const auto& [k, v] : m) {
    j[k] = v;
  }
  return j;
}

std::map<std::string, std::string> string_map_from(const Json& j) {
  std::map<std::string, std::string> m;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      m[it.key()] = it.value().get<std::string>();
    }
  }
  return m;
}

QrState state_from(const Json& j) {
  auto s = parse_qr_state(j.get<std::string>());
  if (!s) {
    throw std::runtime_error("unknown state '" + j.get<std::string>() + "'");
  }
  return *s;
}

state::Initiator initiator_from(const Json& j) {
  auto i = state::parse_initiator(j.get<std::string>());
  if (!i) {
    throw std::runtime_error("unknown initiator '" + j.get<std::string>() + "'");
  }
  return *i;
}

} // namespace

std::string_view to_string(QrState state) {
  for (const auto& s : k_state_names) {
    if (s.state == state) {
      return s.name;
    }
  }
  return "STATE_UNSPECIFIED";
}

std::optional<QrState> parse_qr_state(std::string_view text) {
  std::string upper(text);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const auto& s : k_state_names) {
    if (s.name == upper) {
      return s.state;
    }
  }
  return std::nullopt;
}

const std::vector<QrState>& all_qr_states() {
  static const std::vector<QrState> states = [] {
    std::vector<QrState> v;
    for (const auto& s : k_state_names) {
      v.push_back(s.state);
    }
    return v;
  }();
  return states;
}

bool holds_hosts(QrState state) {
  return state == QrState::provisioning || state == QrState::active ||
         state == QrState::suspending || state == QrState::deleting;
}

std::string_view to_string(Tier tier) {
  for (const auto& t : k_tier_names) {
    if (t.tier == tier) {
      return t.name;
    }
  }
  return "standard";
}

std::optional<Tier> parse_tier(std::string_view text) {
  for (const auto& t : k_tier_names) {
    if (t.name == text) {
      return t.tier;
    }
  }
  return std::nullopt;
}

int tier_rank(Tier tier) {
  switch (tier) {
  case Tier::reserved:
    return 0;
  case Tier::standard:
  case Tier::flex_start:
    return 1;
  case Tier::spot:
  case Tier::best_effort:
    return 2;
  }
  return 1;
}

bool preemptible(Tier tier) {
  return tier == Tier::spot || tier == Tier::best_effort;
}

std::string_view to_string(OnPreemption value) {
  return value == OnPreemption::requeue ? "requeue" : "suspend";
}

Expected<OnPreemption> parse_on_preemption(std::string_view text) {
  if (text == "suspend") {
    return OnPreemption::suspend;
  }
  if (text == "requeue") {
    return OnPreemption::requeue;
  }
  return usage_error("--on-preemption '" + util::printable(text) +
                     "' is not known: use suspend (stay SUSPENDED until reset or deleted) or "
                     "requeue (back to the queue, in its place)");
}

Status validate_tpu_name(const std::string& name, std::string_view what) {
  auto bad = [&](std::string_view rule) {
    return make_error(ErrorKind::usage, std::string(what) + " '" + util::printable(name) +
                                            "' is not valid: " + std::string(rule));
  };
  if (name.empty()) {
    return make_error(ErrorKind::usage,
                      std::string(what) + " is empty: give a name such as 'qr-1'");
  }
  if (name.size() > 63) {
    return bad("at most 63 characters");
  }
  if (!std::islower(static_cast<unsigned char>(name.front()))) {
    return bad("it must start with a lowercase letter (use lowercase letters, digits and '-')");
  }
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return bad("use only lowercase letters, digits and '-'");
    }
  }
  if (name.back() == '-') {
    return bad("it must not end with '-'");
  }
  return tpuctl::ok();
}

void transition(QueuedResource& qr, QrState to, state::Initiator initiator, int64_t now_ms,
                std::string reason) {
  if (qr.state == to && !qr.history.empty()) {
    return;
  }
  StateChange change{qr.history.empty() ? to : qr.state, to, now_ms, initiator, std::move(reason)};
  qr.history.push_back(std::move(change));
  qr.state = to;
  qr.state_initiator = initiator;
  qr.state_since_ms = now_ms;
  if (to == QrState::active) {
    qr.active_since_ms = now_ms;
  }
}

const QrNode* find_node(const QueuedResource& qr, const std::string& node_id) {
  for (const auto& n : qr.nodes) {
    if (n.id == node_id) {
      return &n;
    }
  }
  return nullptr;
}

std::vector<std::string> hosts_of(const QueuedResource& qr) {
  std::vector<std::string> hosts;
  for (const auto& n : qr.nodes) {
    for (const auto& w : n.workers) {
      hosts.push_back(w.host);
    }
  }
  return hosts;
}

Json to_json(const QueuedResource& qr) {
  Json history = Json::array();
  for (const auto& h : qr.history) {
    history.push_back(Json{{"from", std::string(to_string(h.from))},
                           {"to", std::string(to_string(h.to))},
                           {"time_ms", h.time_ms},
                           {"initiator", std::string(state::to_string(h.initiator))},
                           {"reason", h.reason}});
  }
  Json nodes = Json::array();
  for (const auto& n : qr.nodes) {
    Json workers = Json::array();
    for (const auto& w : n.workers) {
      workers.push_back(Json{{"worker", w.worker},
                             {"host", w.host},
                             {"address", w.address},
                             {"position", dims_json(w.position)}});
    }
    nodes.push_back(Json{{"node_id", n.id}, {"workers", workers}});
  }
  Json error = nullptr;
  if (qr.error) {
    error = Json{{"code", qr.error->code},
                 {"message", qr.error->message},
                 {"worker", qr.error->worker},
                 {"node", qr.error->node},
                 {"host", qr.error->host}};
  }
  return Json{{"id", qr.id},
              {"pool", qr.pool},
              {"uid", qr.uid},
              {"accelerator_type", qr.accelerator_type},
              {"node_ids", qr.node_ids},
              {"runtime_version", qr.runtime_version},
              {"tier", std::string(to_string(qr.tier))},
              {"valid_until_ms", qr.valid_until_ms},
              {"valid_after_ms", qr.valid_after_ms},
              {"max_run_duration_ms", qr.max_run_duration_ms},
              {"on_preemption", std::string(to_string(qr.on_preemption))},
              {"requeue", qr.requeue},
              {"labels", string_map_json(qr.labels)},
              {"metadata", string_map_json(qr.metadata)},
              {"secrets", string_map_json(qr.secrets)},
              {"request_id", qr.request_id},
              {"owner", qr.owner},
              {"project", qr.project},
              {"ssh", to_json(qr.ssh)},
              {"state", std::string(to_string(qr.state))},
              {"state_initiator", std::string(state::to_string(qr.state_initiator))},
              {"created_at_ms", qr.created_at_ms},
              {"state_since_ms", qr.state_since_ms},
              {"active_since_ms", qr.active_since_ms},
              {"history", history},
              {"nodes", nodes},
              {"pending_reason", qr.pending_reason},
              {"error", error},
              {"provisioning", qr.provisioning}};
}

Expected<QueuedResource> qr_from_json(const Json& doc) {
  try {
    QueuedResource qr;
    qr.id = doc.at("id").get<std::string>();
    qr.pool = doc.at("pool").get<std::string>();
    qr.uid = doc.value("uid", "");
    qr.accelerator_type = doc.at("accelerator_type").get<std::string>();
    qr.node_ids = doc.at("node_ids").get<std::vector<std::string>>();
    qr.runtime_version = doc.value("runtime_version", "");
    auto tier = parse_tier(doc.value("tier", "standard"));
    if (!tier) {
      throw std::runtime_error("unknown tier '" + doc.value("tier", "") + "'");
    }
    qr.tier = *tier;
    qr.valid_until_ms = doc.value("valid_until_ms", int64_t{0});
    qr.valid_after_ms = doc.value("valid_after_ms", int64_t{0});
    qr.max_run_duration_ms = doc.value("max_run_duration_ms", int64_t{0});
    auto on_preemption = parse_on_preemption(doc.value("on_preemption", "suspend"));
    if (!on_preemption) {
      throw std::runtime_error(on_preemption.error().message);
    }
    qr.on_preemption = *on_preemption;
    qr.requeue = doc.value("requeue", false);
    qr.labels = string_map_from(doc.value("labels", Json::object()));
    qr.metadata = string_map_from(doc.value("metadata", Json::object()));
    qr.secrets = string_map_from(doc.value("secrets", Json::object()));
    qr.request_id = doc.value("request_id", "");
    qr.owner = doc.value("owner", "");
    qr.project = doc.value("project", std::string(k_default_project));
    qr.ssh = ssh_settings_from_json(doc.value("ssh", Json()));
    qr.state = state_from(doc.at("state"));
    qr.state_initiator = initiator_from(doc.value("state_initiator", Json("USER")));
    qr.created_at_ms = doc.value("created_at_ms", int64_t{0});
    qr.state_since_ms = doc.value("state_since_ms", int64_t{0});
    qr.active_since_ms = doc.value("active_since_ms", int64_t{0});
    for (const auto& h : doc.value("history", Json::array())) {
      qr.history.push_back(StateChange{
          state_from(h.at("from")), state_from(h.at("to")), h.value("time_ms", int64_t{0}),
          initiator_from(h.value("initiator", Json("USER"))), h.value("reason", "")});
    }
    for (const auto& n : doc.value("nodes", Json::array())) {
      QrNode node;
      node.id = n.at("node_id").get<std::string>();
      for (const auto& w : n.at("workers")) {
        const Json& p = w.at("position");
        node.workers.push_back(
            QrWorker{w.at("worker").get<int>(), w.at("host").get<std::string>(),
                     w.at("address").get<std::string>(),
                     Dims{p.at(0).get<int>(), p.at(1).get<int>(), p.at(2).get<int>()}});
      }
      qr.nodes.push_back(std::move(node));
    }
    qr.pending_reason = doc.value("pending_reason", "");
    if (auto it = doc.find("error"); it != doc.end() && it->is_object()) {
      qr.error = QrError{it->value("code", ""), it->value("message", ""), it->value("worker", -1),
                         it->value("node", ""), it->value("host", "")};
    }
    qr.provisioning = doc.value("provisioning", Json::object());
    return qr;
  } catch (const std::exception& e) {
    return Error(ErrorKind::failure,
                 std::string("queued resource record is malformed: ") + e.what(),
                 std::string(k_malformed_record));
  }
}

Expected<QueuedResource> qr_from_record(const state::Record& record) {
  if (!record.unreadable.empty()) {
    return Error(ErrorKind::failure, record.unreadable, std::string(k_malformed_record));
  }
  auto parsed = qr_from_json(record.doc);
  if (!parsed) {
    Error e = parsed.error();
    e.message = state::describe(record.key) + " cannot be read (" + e.message + ")";
    return e;
  }
  QueuedResource qr = std::move(*parsed);
  qr.version = record.version;
  qr.create_revision = record.create_revision;
  return qr;
}

Expected<std::vector<QueuedResource>> list_queued_resources(state::StateStore& store,
                                                            const std::string& pool,
                                                            std::vector<Error>* unreadable) {
  TPUCTL_TRY_ASSIGN(state::Listing listing, store.list(state::Kind::queued_resource, pool));
  std::vector<QueuedResource> out;
  for (const auto& r : listing.records) {
    auto qr = qr_from_record(r);
    if (!qr) {
      Error e = qr.error();
      e.message +=
          ": it is left out; 'tpuctl queued-resources delete " + r.key.id + " --force' removes it";
      if (unreadable != nullptr) {
        unreadable->push_back(std::move(e));
      } else if (static std::set<std::string> warned; warned.insert(e.message).second) {
        spdlog::warn("{}", e.message); // once per process
      }
      continue;
    }
    out.push_back(std::move(*qr));
  }
  return out;
}

namespace {

std::string known_names(const std::vector<QueuedResource>& qrs, bool with_nodes) {
  std::vector<std::string> names;
  for (const auto& q : qrs) {
    names.push_back(q.id);
    if (with_nodes) {
      for (const auto& n : q.node_ids) {
        if (n != q.id) {
          names.push_back(n);
        }
      }
    }
  }
  if (names.empty()) {
    return "there are none; create one with 'tpuctl queued-resources create'";
  }
  std::string text = "known: ";
  for (size_t i = 0; i < names.size() && i < 5; ++i) {
    text += (i ? ", " : "") + names[i];
  }
  if (names.size() > 5) {
    text += ", ... (" + std::to_string(names.size()) + " in all)";
  }
  return text;
}

} // namespace

Expected<QueuedResource> load_queued_resource(state::StateStore& store, const std::string& pool,
                                              const std::string& id) {
  TPUCTL_TRY_ASSIGN(auto found, store.find(state::queued_resource_key(pool, id)));
  if (found) {
    return qr_from_record(*found);
  }
  auto all = list_queued_resources(store, pool);
  Error e = make_error(ErrorKind::not_found, "queued resource '" + util::printable(id) +
                                                 "' not found in pool '" + pool + "'");
  if (all) {
    e.message += " (" + known_names(*all, false) + ")";
  }
  e.reason = std::string(state::reason::k_not_found);
  return e;
}

Expected<TargetNodes> resolve_target(state::StateStore& store, const std::string& pool,
                                     const std::string& target) {
  TPUCTL_TRY_ASSIGN(auto all, list_queued_resources(store, pool));
  for (auto& q : all) {
    if (q.id == target) {
      TargetNodes t;
      for (size_t i = 0; i < q.nodes.size(); ++i) {
        t.node_indices.push_back(static_cast<int>(i));
      }
      t.qr = std::move(q);
      return t;
    }
  }
  for (auto& q : all) {
    for (size_t i = 0; i < q.nodes.size(); ++i) {
      if (q.nodes[i].id == target) {
        TargetNodes t;
        t.node_indices.push_back(static_cast<int>(i));
        t.qr = std::move(q);
        return t;
      }
    }
    // A node id of a request that has no workers yet still names it.
    if (std::find(q.node_ids.begin(), q.node_ids.end(), target) != q.node_ids.end()) {
      TargetNodes t;
      t.qr = std::move(q);
      return t;
    }
  }
  Error e = make_error(ErrorKind::not_found, "no queued resource or node '" +
                                                 util::printable(target) + "' in pool '" + pool +
                                                 "' (" + known_names(all, true) + ")");
  e.reason = std::string(state::reason::k_not_found);
  return e;
}

Expected<TargetNodes> resolve_node(state::StateStore& store, const std::string& pool,
                                   const std::string& node) {
  TPUCTL_TRY_ASSIGN(TargetNodes target, resolve_target(store, pool, node));
  if (target.qr.id == node && target.qr.node_ids.size() > 1) {
    return make_error(ErrorKind::usage,
                      "'" + node + "' is a queued resource of " +
                          std::to_string(target.qr.node_ids.size()) + " nodes (" +
                          util::join(target.qr.node_ids, ", ") +
                          "), not a node: name one of them, or use 'tpuctl queued-resources' "
                          "for the whole request");
  }
  return target;
}

Status check_queued_resource_owner(state::StateStore& store, const std::string& pool,
                                   const std::string& id, const std::string& action,
                                   bool override_owner, std::vector<state::Event>& overrides) {
  auto qr = load_queued_resource(store, pool, id);
  if (!qr) {
    return ok(); // missing or unreadable (a damaged record has no owner to check): the action's
                 // own handling follows
  }
  return check_owner_intent(store,
                            OwnedObject{state::Kind::queued_resource, pool, id, qr->owner,
                                        "queued resource '" + id + "'"},
                            action, override_owner, overrides);
}

} // namespace tpuctl::provision
