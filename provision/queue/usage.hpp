// Chip-hours held: what each queued resource used over a window, from the store's events (the
// same transitions `qr describe`'s history shows), so it equals the sum of the requests' own
// ACTIVE time. A request holds its chips from the event that made it ACTIVE until the next event
// that moves it out of ACTIVE (SUSPENDING, DELETING, FAILED, ...) or removes it; one still ACTIVE
// holds them until the window's end. Each interval is clipped to the window. Its chips, owner and
// project come from the events (tpuctl writes them into each request's events), else from the
// record when it still exists. Events older than the log's retention (state/event_retention.hpp)
// are gone: a request made ACTIVE before them is counted from its first retained event that leaves
// ACTIVE, or from the window's start when that is later.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "provision/queue/queued_resource.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

struct RequestUsage {
  std::string pool;
  std::string id;
  std::string owner;
  std::string project;
  int chips = 0;         // its chips (the latest known: a node deleted from it lowers them)
  int64_t active_ms = 0; // ACTIVE within the window
  int64_t chip_ms = 0;   // each ACTIVE interval times the chips it held then
  double chip_hours() const { return static_cast<double>(chip_ms) / 3600000.0; }
};

// The usage of every queued resource with ACTIVE time in [from_ms, to_ms), from `events` (oldest
// first, every kind: others are skipped) and `live` (the records that exist now, by pool/id,
// for the chips and owner an old event lacks). Ordered by pool, then id.
std::vector<RequestUsage> request_usage(const std::vector<state::Event>& events,
                                        const std::map<std::string, QueuedResource>& live,
                                        int64_t from_ms, int64_t to_ms);

// The detail tpuctl writes into a request's events for request_usage: {"chips", "owner",
// "project"}.
void add_usage_detail(nlohmann::json& detail, const QueuedResource& qr);

// The chips of a request: its accelerator type's chips times its slices; 0 when unknown.
int request_chips(const QueuedResource& qr);

} // namespace tpuctl::provision
