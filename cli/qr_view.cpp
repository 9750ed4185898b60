#include "cli/qr_view.hpp"

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

Json qr_json(const provision::QueuedResource& qr) {
  nlohmann::json raw = provision::to_json(qr);
  raw["provisioning"].erase("lease");
  Json j = Json::parse(raw.dump());
  j["created_at"] = util::format_timestamp(qr.created_at_ms);
  j["state_since"] = util::format_timestamp(qr.state_since_ms);
  j["valid_until"] = util::format_timestamp(qr.valid_until_ms);
  j["valid_after"] = util::format_timestamp(qr.valid_after_ms);
  for (auto& h : j["history"]) {
    h["time"] = util::format_timestamp(h["time_ms"].get<int64_t>());
  }
  return j;
}

Json qr_row(const provision::QueuedResource& qr) {
  return Json{{"id", qr.id},
              {"state", std::string(to_string(qr.state))},
              {"accelerator_type", qr.accelerator_type},
              {"nodes", static_cast<int>(qr.node_ids.size())},
              {"tier", std::string(to_string(qr.tier))},
              {"created_at", util::format_timestamp(qr.created_at_ms)},
              {"reason", reason_of(qr)}};
}

const std::vector<Column> k_qr_columns = {
    {"ID", "id"},        {"STATE", "state"}, {"ACCELERATOR_TYPE", "accelerator_type"},
    {"NODES", "nodes"},  {"TIER", "tier"},   {"CREATED", "created_at"},
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
  if (qr.error) {
    rows.push_back({"error", qr.error->code + ": " + qr.error->message});
  }
  for (const auto& r : rows) {
    os << r[0] << ":" << std::string(r[0].size() < 18 ? 18 - r[0].size() : 1, ' ') << r[1] << "\n";
  }
  for (const auto& n : qr.nodes) {
    os << "\nnode " << n.id << " (" << n.workers.size() << " workers):\n";
    std::vector<std::vector<std::string>> wrows;
    for (const auto& w : n.workers) {
      wrows.push_back({std::to_string(w.worker), w.host, w.address,
                       std::to_string(w.position[0]) + "," + std::to_string(w.position[1]) + "," +
                           std::to_string(w.position[2])});
    }
    os << render_table({"WORKER", "HOST", "ADDRESS", "POSITION"}, wrows);
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

Json node_json(const provision::QueuedResource& qr, const provision::QrNode& node) {
  Json workers = Json::array();
  Json endpoints = Json::array(); // gcloud's networkEndpoints[].ipAddress, in worker order
  for (const auto& w : node.workers) {
    workers.push_back(Json{{"worker", w.worker}, {"host", w.host}, {"address", w.address}});
    endpoints.push_back(Json{{"ip_address", w.address}});
  }
  return Json{{"name", node.id},
              {"queued_resource", qr.id},
              {"state", node_state(qr)},
              {"accelerator_type", qr.accelerator_type},
              {"workers", static_cast<int>(node.workers.size())},
              {"worker_list", workers},
              {"network_endpoints", endpoints},
              {"runtime_version", qr.runtime_version}};
}

const std::vector<Column> k_node_columns = {{"NAME", "name"},
                                            {"QUEUED_RESOURCE", "queued_resource"},
                                            {"STATE", "state"},
                                            {"ACCELERATOR_TYPE", "accelerator_type"},
                                            {"WORKERS", "workers"}};

} // namespace tpuctl::cli
