// tpuctl usage: chip-hours held and workload goodput over a window (Slurm's sreport, Google
// Cloud's billing export): per project and owner, per project, per owner, or per request, from
// the store's events (provision/queue/usage.hpp, provision/workload/workload_usage.hpp), so the
// chip-hours equal the sum of the requests' own ACTIVE time. Table, json and csv alike.
#include <algorithm>
#include <map>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/state_access.hpp"
#include "cli/values.hpp"
#include "provision/queue/usage.hpp"
#include "provision/workload/workload_usage.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

namespace {

struct UsageFlags {
  std::string since = "7d";
  std::string by = "project,owner";
};

double rounded(double value) {
  return static_cast<double>(static_cast<int64_t>(value * 1000.0 + 0.5)) / 1000.0;
}

Expected<int> run_usage(Context& ctx, const UsageFlags& f) {
  std::optional<provision::UsageGroup> group;
  if (f.by != "request") {
    TPUCTL_TRY_ASSIGN(group, provision::parse_usage_group(f.by));
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
  if (!group) {
    for (const auto& u : usage) {
      rows.push_back(Json{{"pool", u.pool},
                          {"request", u.id},
                          {"project", u.project},
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
                          {"PROJECT", "project"},
                          {"OWNER", "owner"},
                          {"CHIPS", "chips"},
                          {"CHIP_HOURS", "chip_hours"}},
                         Json{{"pool", ""},
                              {"request", ""},
                              {"project", ""},
                              {"owner", ""},
                              {"chips", 0},
                              {"active_ms", 0},
                              {"chip_hours", 0.0},
                              {"since", ""},
                              {"until", ""}}));
    return 0;
  }
  const auto workloads = provision::workload_usage(events, from, until);
  for (const auto& s : provision::summarize_usage(usage, workloads, *group, ctx.globals.project)) {
    Json row{{"project", s.project},
             {"owner", s.owner},
             {"requests", s.requests},
             {"chip_hours", rounded(s.chip_hours())},
             {"workloads", s.workloads},
             {"workload_hours", rounded(static_cast<double>(s.wall_ms) / 3600000.0)},
             {"running_hours", rounded(static_cast<double>(s.running_ms) / 3600000.0)},
             {"lost_hours", rounded(static_cast<double>(s.lost_ms) / 3600000.0)},
             {"goodput", s.wall_ms > 0 ? Json(rounded(s.goodput())) : Json(nullptr)},
             {"since", time_json(from)},
             {"until", time_json(until)}};
    rows.push_back(std::move(row));
  }
  std::vector<Column> columns;
  if (*group != provision::UsageGroup::owner) {
    columns.push_back({"PROJECT", "project"});
  }
  if (*group != provision::UsageGroup::project) {
    columns.push_back({"OWNER", "owner"});
  }
  for (const Column& c : std::vector<Column>{{"REQUESTS", "requests"},
                                             {"CHIP_HOURS", "chip_hours"},
                                             {"WORKLOADS", "workloads"},
                                             {"GOODPUT", "goodput"}}) {
    columns.push_back(c);
  }
  TPUCTL_TRY(emit_list(ctx, rows, columns,
                       Json{{"project", ""},
                            {"owner", ""},
                            {"requests", 0},
                            {"chip_hours", 0.0},
                            {"workloads", 0},
                            {"workload_hours", 0.0},
                            {"running_hours", 0.0},
                            {"lost_hours", 0.0},
                            {"goodput", 0.0},
                            {"since", ""},
                            {"until", ""}}));
  return 0;
}

} // namespace

void setup_usage(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<UsageFlags>();
  group.add_option("--since", f->since, "the window: the last D (default 7d)")
      ->type_name("D")
      ->check(positive_duration());
  group
      .add_option("--by", f->by,
                  "one row per project and owner (default), per project, per owner, or per "
                  "request")
      ->type_name("project,owner|project|owner|request");
  group.footer(
      "Chip-hours a queued resource held while ACTIVE, from the event log (kept 90 days:\n"
      "TPUCTL_EVENT_RETENTION), so they add up to the requests' own ACTIVE time; goodput is\n"
      "the workloads' running time over their wall time in the window (an attempt that did\n"
      "not finish counts as lost). Every pool's unless --pool; one project's with --project.\n"
      "json rows: project, owner (\"\" for the dimension not grouped by), requests, chip_hours,\n"
      "workloads, workload_hours, running_hours, lost_hours, goodput (null: no workload),\n"
      "since, until;\n"
      "--by request: pool, request, project, owner, chips, active_ms, chip_hours, since, until.");
  registry.bind(group, [f](Context& ctx) { return run_usage(ctx, *f); });
}

} // namespace tpuctl::cli
