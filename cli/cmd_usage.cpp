// tpuctl usage: chip-hours held over a window (Slurm's sreport, Google Cloud's billing export):
// per owner, or per request, from the store's events (provision/queue/usage.hpp), so it equals
// the sum of the requests' own ACTIVE time. Table, json and csv (--format csv(...)) alike.
#include <algorithm>
#include <map>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/state_access.hpp"
#include "cli/values.hpp"
#include "provision/queue/usage.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

namespace {

struct UsageFlags {
  std::string since = "7d";
  std::string by = "owner";
};

double rounded(double hours) {
  return static_cast<double>(static_cast<int64_t>(hours * 1000.0 + 0.5)) / 1000.0;
}

Expected<int> run_usage(Context& ctx, const UsageFlags& f) {
  if (f.by != "owner" && f.by != "request") {
    return usage_error("--by '" + util::printable(f.by) + "' is not owner or request");
  }
  TPUCTL_TRY_ASSIGN(auto window, util::parse_duration(f.since, "--since"));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Drivers::none));
  const std::string pool = ctx.globals.pool;
  // The records first, then the events: a transition between the two reads is in the events.
  TPUCTL_TRY_ASSIGN(auto listing, store->list(state::Kind::queued_resource, pool));
  std::map<std::string, provision::QueuedResource> live;
  for (const auto& r : listing.records) {
    if (auto q = provision::qr_from_record(r)) {
      live.emplace(q->pool + "/" + q->id, std::move(*q));
    }
  }
  TPUCTL_TRY_ASSIGN(auto events, store->events(state::EventQuery{pool, std::nullopt, "", 0, 0}));
  const int64_t until = state::to_unix_ms(state::system_clock()());
  const int64_t from = until - window.count();
  const auto usage = provision::request_usage(events, live, from, until);
  Json rows = Json::array();
  if (f.by == "request") {
    for (const auto& u : usage) {
      rows.push_back(Json{{"pool", u.pool},
                          {"request", u.id},
                          {"owner", u.owner},
                          {"chips", u.chips},
                          {"active_ms", u.active_ms},
                          {"chip_hours", rounded(u.chip_hours())},
                          {"since", time_json(from)},
                          {"until", time_json(until)}});
    }
    TPUCTL_TRY(emit_list(ctx, rows,
                         {{"POOL", "pool"},
                          {"REQUEST", "request"},
                          {"OWNER", "owner"},
                          {"CHIPS", "chips"},
                          {"CHIP_HOURS", "chip_hours"}},
                         Json{{"pool", ""},
                              {"request", ""},
                              {"owner", ""},
                              {"chips", 0},
                              {"active_ms", 0},
                              {"chip_hours", 0.0},
                              {"since", ""},
                              {"until", ""}}));
    return 0;
  }
  std::map<std::string, std::pair<int, int64_t>> by_owner; // owner -> requests, chip ms
  for (const auto& u : usage) {
    auto& [requests, chip_ms] = by_owner[u.owner];
    requests += 1;
    chip_ms += u.chip_ms;
  }
  for (const auto& [owner, sums] : by_owner) {
    rows.push_back(Json{{"owner", owner},
                        {"requests", sums.first},
                        {"chip_hours", rounded(static_cast<double>(sums.second) / 3600000.0)},
                        {"since", time_json(from)},
                        {"until", time_json(until)}});
  }
  TPUCTL_TRY(emit_list(
      ctx, rows, {{"OWNER", "owner"}, {"REQUESTS", "requests"}, {"CHIP_HOURS", "chip_hours"}},
      Json{{"owner", ""}, {"requests", 0}, {"chip_hours", 0.0}, {"since", ""}, {"until", ""}}));
  return 0;
}

} // namespace

void setup_usage(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<UsageFlags>();
  group.add_option("--since", f->since, "the window: the last D (default 7d)")
      ->type_name("D")
      ->check(positive_duration());
  group.add_option("--by", f->by, "one row per owner (default) or per request")
      ->type_name("owner|request");
  group.footer("Chip-hours a queued resource held while ACTIVE, from the event log (kept 90\n"
               "days: TPUCTL_EVENT_RETENTION), so they add up to the requests' own ACTIVE time.\n"
               "Every pool's unless --pool. json rows: owner, requests, chip_hours, since, until;\n"
               "--by request: pool, request, owner, chips, active_ms, chip_hours, since, until.");
  registry.bind(group, [f](Context& ctx) { return run_usage(ctx, *f); });
}

} // namespace tpuctl::cli
