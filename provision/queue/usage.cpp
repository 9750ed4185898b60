#include "provision/queue/usage.hpp"

#include <algorithm>
#include <optional>

#include "provision/pool/projects.hpp"
#include "topology/accelerator_type.hpp"

namespace tpuctl::provision {

int request_chips(const QueuedResource& qr) {
  auto type = topology::parse_accelerator_type(qr.accelerator_type);
  return type ? type->chips * std::max<int>(static_cast<int>(qr.node_ids.size()), 1) : 0;
}

void add_usage_detail(nlohmann::json& detail, const QueuedResource& qr) {
  detail["chips"] = request_chips(qr);
  detail["owner"] = qr.owner;
  detail["project"] = qr.project;
}

namespace {

struct Open {
  RequestUsage usage;
  std::optional<int64_t> active_since; // ACTIVE from then, not closed yet
  int active_chips = 0;                // the chips it held then
  bool seen = false;                   // an earlier event of it was read
  bool gone = false;
};

void close(Open& o, int64_t at, int64_t from_ms, int64_t to_ms) {
  if (!o.active_since) {
    return;
  }
  const int64_t start = std::max(*o.active_since, from_ms);
  const int64_t end = std::min(at, to_ms);
  if (end > start) {
    o.usage.active_ms += end - start;
    o.usage.chip_ms += (end - start) * (o.active_chips > 0 ? o.active_chips : o.usage.chips);
  }
  o.active_since.reset();
}

} // namespace

std::vector<RequestUsage> request_usage(const std::vector<state::Event>& events,
                                        const std::map<std::string, QueuedResource>& live,
                                        int64_t from_ms, int64_t to_ms) {
  std::map<std::string, Open> open; // pool/id
  for (const auto& e : events) {
    if (e.subject_kind != state::Kind::queued_resource || e.time_ms >= to_ms) {
      continue;
    }
    Open& o = open[e.pool + "/" + e.subject];
    o.usage.pool = e.pool;
    o.usage.id = e.subject;
    if (e.detail.is_object()) {
      if (auto c = e.detail.find("chips"); c != e.detail.end() && c->is_number_integer()) {
        o.usage.chips = c->get<int>();
      }
      if (auto w = e.detail.find("owner"); w != e.detail.end() && w->is_string()) {
        o.usage.owner = w->get<std::string>();
      }
      if (auto p = e.detail.find("project"); p != e.detail.end() && p->is_string()) {
        o.usage.project = p->get<std::string>();
      }
    }
    if (o.usage.owner.empty() && e.type == "CREATED") {
      o.usage.owner = e.actor; // made before events carried it: its maker
    }
    if (e.from_state == "ACTIVE" && !o.seen) {
      o.active_since = from_ms; // ACTIVE before the oldest retained event
      o.active_chips = o.usage.chips;
    }
    o.seen = true;
    if (e.from_state == "ACTIVE" || e.type == "DELETED") {
      close(o, e.time_ms, from_ms, to_ms);
    }
    if (e.to_state == "ACTIVE" && e.type != "DELETED") {
      o.active_since = e.time_ms;
      o.active_chips = o.usage.chips;
    }
    o.gone = e.type == "DELETED";
  }
  std::vector<RequestUsage> out;
  for (auto& [key, o] : open) {
    auto it = live.find(key);
    if (it != live.end()) {
      if (o.usage.chips == 0) {
        o.usage.chips = request_chips(it->second);
        o.active_chips = o.active_chips > 0 ? o.active_chips : o.usage.chips;
      }
      if (o.usage.owner.empty()) {
        o.usage.owner = it->second.owner;
      }
      if (o.usage.project.empty()) {
        o.usage.project = it->second.project;
      }
    }
    if (!o.gone) {
      close(o, to_ms, from_ms, to_ms); // still ACTIVE: until the window's end
    }
    if (o.usage.project.empty()) {
      o.usage.project = k_default_project; // made before projects existed
    }
    if (o.usage.active_ms > 0) {
      out.push_back(o.usage);
    }
  }
  return out;
}

} // namespace tpuctl::provision
