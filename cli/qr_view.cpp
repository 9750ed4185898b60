#include "cli/qr_view.hpp"

#include <algorithm>

#include "provision/pool/pool_layout.hpp"
#include "provision/slice/driver.hpp"
#include "provision/slice/secrets.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

using provision::QrState;

namespace {

std::string reason_of(const provision::QueuedResource& qr) {
  if (qr.error) {
    return qr.error->code + ": " + qr.error->message;
  }
  if (qr.state == QrState::waiting_for_resources) {
    return qr.pending_reason;
  }
  if (auto waiting = provision::waiting_for(qr); !waiting.empty()) {
    return waiting;
  }
  if (!qr.history.empty()) {
    return qr.history.back().reason;
  }
  return "";
}

std::string duration_text(int64_t ms) {
  if (ms <= 0) {
    return "";
  }
  return std::to_string(ms / 1000) + "s";
}

} // namespace

namespace {

// The placed node of `qr` named `id`, or nullptr (not placed, or its hosts are freed).
const provision::QrNode* placed_node(const provision::QueuedResource& qr, const std::string& id) {
  for (const auto& n : qr.nodes) {
    if (n.id == id) {
      return &n;
    }
  }
  return nullptr;
}

Json workers_of(const provision::QueuedResource& qr, size_t slice) {
  Json workers = Json::array();
  const std::string& id = qr.node_ids.at(slice);
  if (const auto* n = placed_node(qr, id)) {
    for (const auto& w : n->workers) {
      workers.push_back(worker_json(id, static_cast<int>(slice), w));
    }
  }
  return workers;
}

// A worker's clock reading in its report (the agent's unix milliseconds) as the time text every
// other time is: `clock_at` in place of `from` ("clock_unix_ms", "clock_ms").
void clock_as_time(Json& record, const char* from) {
  if (record.is_object() && record.contains(from) && record[from].is_number_integer()) {
    record["clock_at"] = util::format_timestamp_ms(record[from].get<int64_t>());
    record.erase(from);
  }
}

// The stored provisioning report with each worker's slice next to its node, and its clocks as
// times.
Json provisioning_json(const provision::QueuedResource& qr) {
  nlohmann::json raw = qr.provisioning;
  raw.erase("lease");
  raw.erase(provision::k_waiting_for); // its own field
  Json report = Json::parse(raw.dump());
  Json* workers = report.contains("report") && report["report"].is_object() &&
                          report["report"].contains("workers")
                      ? &report["report"]["workers"]
                      : nullptr;
  if (workers != nullptr && workers->is_array()) {
    for (auto& w : *workers) {
      if (!w.is_object() || !w.contains("node")) {
        continue;
      }
      if (w.contains("facts")) {
        clock_as_time(w["facts"], "clock_unix_ms");
      }
      if (w.contains("preflight")) {
        clock_as_time(w["preflight"], "clock_ms");
      }
      Json ordered;
      for (auto it = w.begin(); it != w.end(); ++it) {
        ordered[it.key()] = it.value();
        if (it.key() == "node") {
          const auto& ids = qr.node_ids;
          const auto at = std::find(ids.begin(), ids.end(), it.value().get<std::string>());
          ordered["slice"] = at == ids.end() ? Json() : Json(at - ids.begin());
        }
      }
      w = std::move(ordered);
    }
  }
  return report;
}

} // namespace

Json worker_json(const std::string& node, int slice, const provision::QrWorker& w) {
  return Json{{"node", node},         {"slice", slice},
              {"worker", w.worker},   {"host", w.host},
              {"address", w.address}, {"coords", provision::format_position(w.position)}};
}

Json qr_json(const provision::QueuedResource& qr) {
  Json nodes = Json::array();
  for (size_t i = 0; i < qr.node_ids.size(); ++i) {
    nodes.push_back(Json{
        {"name", qr.node_ids[i]}, {"slice", static_cast<int>(i)}, {"workers", workers_of(qr, i)}});
  }
  Json history = Json::array();
  for (const auto& h : qr.history) {
    history.push_back(Json{{"time", time_json(h.time_ms)},
                           {"from", std::string(to_string(h.from))},
                           {"to", std::string(to_string(h.to))},
                           {"initiator", std::string(state::to_string(h.initiator))},
                           {"reason", h.reason}});
  }
  Json error; // null when none
  if (qr.error) {
    error = Json{{"code", qr.error->code},
                 {"message", qr.error->message},
                 {"worker", qr.error->worker >= 0 ? Json(qr.error->worker) : Json()},
                 {"node", qr.error->node.empty() ? Json() : Json(qr.error->node)},
                 {"host", qr.error->host.empty() ? Json() : Json(qr.error->host)}};
  }
  Json labels = Json::object();
  for (const auto& [k, v] : qr.labels) {
    labels[k] = v;
  }
  Json metadata = Json::object();
  for (const auto& [k, v] : qr.metadata) {
    metadata[k] = v;
  }
  return Json{{"id", qr.id},
              {"pool", qr.pool},
              {"uid", qr.uid},
              {"state", std::string(to_string(qr.state))},
              {"state_initiator", std::string(state::to_string(qr.state_initiator))},
              {"accelerator_type", qr.accelerator_type},
              {"runtime_version", qr.runtime_version},
              {"tier", std::string(to_string(qr.tier))},
              {"on_preemption", std::string(to_string(qr.on_preemption))},
              {"node_count", static_cast<int>(qr.node_ids.size())},
              {"nodes", nodes},
              {"created_at", time_json(qr.created_at_ms)},
              {"state_since", time_json(qr.state_since_ms)},
              {"active_since", time_json(qr.active_since_ms)},
              {"valid_until", time_json(qr.valid_until_ms)},
              {"valid_after", time_json(qr.valid_after_ms)},
              {"max_run_duration_ms", qr.max_run_duration_ms},
              {"labels", labels},
              {"metadata", metadata},
              {"secrets", provision::secret_names(qr.secrets)}, // the names, never a value
              {"request_id", qr.request_id},
              {"owner", qr.owner},
              {"project", qr.project},
              {"reason", reason_of(qr)},
              {"pending_reason", qr.pending_reason},
              {"waiting_for", provision::waiting_for(qr)},
              {"error", error},
              {"history", history},
              {"provisioning", provisioning_json(qr)}};
}

const std::vector<Column> k_qr_columns = {{"ID", "id"},
                                          {"STATE", "state"},
                                          {"ACCELERATOR_TYPE", "accelerator_type"},
                                          {"NODE_COUNT", "node_count"},
                                          {"TIER", "tier"},
                                          {"OWNER", "owner"},
                                          {"PROJECT", "project"},
                                          {"CREATED_AT", "created_at"},
                                          {"REASON", "reason"}};

void print_qr(std::ostream& os, const provision::QueuedResource& qr) {
  std::vector<std::vector<std::string>> rows = {
      {"id", qr.id},
      {"pool", qr.pool},
      {"state", std::string(to_string(qr.state)) + " (" +
                    std::string(state::to_string(qr.state_initiator)) + ", since " +
                    util::format_timestamp(qr.state_since_ms) + ")"},
      {"accelerator_type", qr.accelerator_type},
      {"nodes", util::join(qr.node_ids, ", ")},
      {"tier", std::string(to_string(qr.tier))},
      {"created_at", util::format_timestamp(qr.created_at_ms)},
  };
  if (!qr.owner.empty()) {
    rows.push_back({"owner", qr.owner});
  }
  rows.push_back({"project", qr.project});
  if (!qr.runtime_version.empty()) {
    rows.push_back({"runtime_version", qr.runtime_version});
  }
  if (qr.valid_until_ms) {
    rows.push_back({"valid_until", util::format_timestamp(qr.valid_until_ms)});
  }
  if (qr.valid_after_ms) {
    rows.push_back({"valid_after", util::format_timestamp(qr.valid_after_ms)});
  }
  if (qr.max_run_duration_ms) {
    rows.push_back({"max_run_duration", duration_text(qr.max_run_duration_ms)});
  }
  if (!qr.pending_reason.empty() && qr.state == QrState::waiting_for_resources) {
    rows.push_back({"pending_reason", qr.pending_reason});
  }
  if (auto waiting = provision::waiting_for(qr); !waiting.empty()) {
    rows.push_back({"waiting_for", waiting});
  }
  if (qr.error) {
    rows.push_back({"error", qr.error->code + ": " + qr.error->message});
  }
  for (const auto& r : rows) {
    os << r[0] << ":" << std::string(r[0].size() < 18 ? 18 - r[0].size() : 1, ' ') << r[1] << "\n";
  }
  for (const auto& n : qr.nodes) {
    os << "\nnode " << n.id << " (" << util::counted(n.workers.size(), "worker") << "):\n";
    std::vector<std::vector<std::string>> wrows;
    for (const auto& w : n.workers) {
      wrows.push_back({std::to_string(w.worker), w.host, w.address,
                       std::to_string(w.position[0]) + "," + std::to_string(w.position[1]) + "," +
                           std::to_string(w.position[2])});
    }
    os << render_table({"WORKER", "HOST", "ADDRESS", "COORDS"}, wrows);
  }
  os << "\nhistory:\n";
  std::vector<std::vector<std::string>> hrows;
  for (const auto& h : qr.history) {
    hrows.push_back({util::format_timestamp(h.time_ms), std::string(to_string(h.to)),
                     std::string(state::to_string(h.initiator)), h.reason});
  }
  os << render_table({"TIME", "STATE", "INITIATOR", "REASON"}, hrows);
}

std::string node_state(const provision::QueuedResource& qr) {
  switch (qr.state) {
  case QrState::active:
    return "READY";
  case QrState::provisioning:
    return "CREATING";
  case QrState::suspending:
    return "STOPPING";
  case QrState::suspended:
    return qr.state_initiator == state::Initiator::service ? "PREEMPTED" : "STOPPED";
  case QrState::deleting:
    return "DELETING";
  default:
    return "PENDING";
  }
}

bool nodes_listed(const provision::QueuedResource& qr) {
  return !qr.nodes.empty() || qr.state == QrState::suspending || qr.state == QrState::suspended;
}

Json node_json(const provision::QueuedResource& qr, size_t slice) {
  Json workers = workers_of(qr, slice);
  Json endpoints = Json::array(); // gcloud's networkEndpoints[].ipAddress, in worker order
  for (const auto& w : workers) {
    endpoints.push_back(Json{{"ip_address", w["address"]}});
  }
  return Json{{"name", qr.node_ids.at(slice)},
              {"queued_resource", qr.id},
              {"slice", static_cast<int>(slice)},
              {"state", node_state(qr)},
              {"accelerator_type", qr.accelerator_type},
              {"runtime_version", qr.runtime_version},
              {"project", qr.project},
              {"worker_count", static_cast<int>(workers.size())},
              {"workers", workers},
              {"network_endpoints", endpoints}};
}

const std::vector<Column> k_node_columns = {{"NAME", "name"},
                                            {"QUEUED_RESOURCE", "queued_resource"},
                                            {"STATE", "state"},
                                            {"ACCELERATOR_TYPE", "accelerator_type"},
                                            {"WORKER_COUNT", "worker_count"}};

} // namespace tpuctl::cli
