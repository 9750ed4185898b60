// tpuctl events: the audit trail. Every change that matters is an event in the store, written in
// the same transaction as the change (so there is no change without its event and no event
// without its change), with the store's actor (the etcd user, or USER@HOST): what happened, to
// what, by whom, when, and with what result. Filters by pool (--pool), object, actor, owner (the
// actor of the object's first event: its creator, known even once the object is deleted),
// project (--project: the latest project an object's events name, and quota changes), type and
// age; --watch prints the new ones as they are committed. The log keeps its retention
// (state/event_retention.hpp, README "The audit trail").
#include <map>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/state_access.hpp"
#include "cli/values.hpp"
#include "state/store.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

namespace {

struct EventFlags {
  std::string object; // ID, or KIND/ID
  std::string actor;
  std::string owner;
  std::string type;
  std::string since;
  bool watch = false;
  std::string timeout;
};

const std::vector<Column> k_event_columns = {{"TIME", "time"},     {"ACTOR", "actor"},
                                             {"ACTION", "action"}, {"OBJECT", "object"},
                                             {"RESULT", "result"}, {"DETAIL", "detail_text"}};

std::string object_of(const state::Event& e) {
  return std::string(state::to_string(e.subject_kind)) + "/" + e.subject;
}

// `project`: the project the event's object is charged to ("" for a pool's or a host's own).
Json event_row(const state::Event& e, const std::string& project = "") {
  std::string detail;
  if (e.detail.is_object()) {
    for (const auto& [k, v] : e.detail.items()) {
      detail +=
          (detail.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    }
  }
  return Json{{"time", time_json(e.time_ms)},
              {"revision", e.revision},
              {"pool", e.pool},
              {"actor", e.actor},
              {"action", e.type},
              {"object", object_of(e)},
              {"project", project},
              {"result", e.to_state.empty() ? std::string("ok") : e.to_state},
              {"from", e.from_state},
              {"to", e.to_state},
              {"initiator", std::string(state::to_string(e.initiator))},
              {"detail", e.detail},
              {"detail_text", detail}};
}

struct Filter {
  std::optional<state::Kind> kind;
  std::string subject;
  std::string actor;
  std::string owner;
  std::string type;
  std::string project;  // --project: the events of that project's objects and quota
  int64_t since_ms = 0; // events at or after (0: all)
};

Expected<Filter> make_filter(const EventFlags& f, const std::string& project) {
  Filter out;
  out.project = project;
  if (!f.object.empty()) {
    const auto slash = f.object.find('/');
    if (slash != std::string::npos) {
      out.kind = state::parse_kind(f.object.substr(0, slash));
      if (!out.kind) {
        return usage_error("--object '" + util::printable(f.object) +
                           "': the kind before '/' is one of pool, host, queued_resource, "
                           "cluster, workload");
      }
      out.subject = f.object.substr(slash + 1);
    } else {
      out.subject = f.object;
    }
  }
  out.actor = f.actor;
  out.owner = f.owner;
  out.type = f.type;
  if (!f.since.empty()) {
    TPUCTL_TRY_ASSIGN(auto d, util::parse_duration(f.since, "--since"));
    out.since_ms = state::to_unix_ms(state::system_clock()()) - d.count();
  }
  return out;
}

// What the log says of each object so far: who made it (the actor of its first event, its
// creation) and the project it is charged to (the latest event that names one).
struct Known {
  std::map<std::string, std::string> creators;
  std::map<std::string, std::string> projects;

  // Reads `e`; returns the project of its event ("" when it names none and its object has none:
  // a pool's own change, a host's). A quota change is its project's.
  std::string see(const state::Event& e) {
    const std::string object = object_of(e);
    creators.emplace(object, e.actor); // the first seen is the oldest
    if (e.detail.is_object()) {
      if (auto p = e.detail.find("project"); p != e.detail.end() && p->is_string()) {
        if (e.subject_kind == state::Kind::pool) {
          return p->get<std::string>();
        }
        projects[object] = p->get<std::string>();
      }
    }
    auto it = projects.find(object);
    return it == projects.end() ? std::string() : it->second;
  }
};

bool passes(const Filter& f, const state::Event& e, Known& known, const std::string& project) {
  const std::string object = object_of(e);
  if ((f.kind && e.subject_kind != *f.kind) || (!f.subject.empty() && e.subject != f.subject) ||
      (!f.actor.empty() && e.actor != f.actor) || (!f.type.empty() && e.type != f.type) ||
      (!f.project.empty() && project != f.project) || e.time_ms < f.since_ms) {
    return false;
  }
  return f.owner.empty() || known.creators[object] == f.owner;
}

void print_line(const Context& ctx, const Json& row) {
  std::ostream& out = *ctx.out;
  if (ctx.machine_format()) {
    out << row.dump() << "\n";
  } else {
    out << cell_text(row["time"]) << "  " << row["actor"].get<std::string>() << "  "
        << row["action"].get<std::string>() << "  " << row["object"].get<std::string>() << "  "
        << row["result"].get<std::string>();
    const auto detail = row["detail_text"].get<std::string>();
    out << (detail.empty() ? "" : "  " + detail) << "\n";
  }
  out.flush();
}

Expected<int> run_events(Context& ctx, const EventFlags& f) {
  TPUCTL_TRY_ASSIGN(Filter filter, make_filter(f, ctx.globals.project));
  TPUCTL_TRY_ASSIGN(auto timeout, util::parse_optional_duration(f.timeout, "--timeout"));
  TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Drivers::none));
  const std::string pool = ctx.globals.pool;
  TPUCTL_TRY_ASSIGN(auto events, store->events(state::EventQuery{pool, std::nullopt, "", 0, 0}));
  Known known;
  Json rows = Json::array();
  int64_t last = 0;
  for (const auto& e : events) {
    last = std::max(last, e.revision);
    const std::string project = known.see(e);
    if (passes(filter, e, known, project)) {
      rows.push_back(event_row(e, project));
    }
  }
  if (!f.watch) {
    TPUCTL_TRY(emit_list(ctx, rows, k_event_columns, event_row(state::Event{})));
    return 0;
  }
  // --watch: what is there, then each new event as it is committed, one per line.
  for (const auto& r : rows) {
    print_line(ctx, r);
  }
  const auto start = std::chrono::steady_clock::now();
  TPUCTL_TRY_ASSIGN(int64_t seen, store->wait_for_change(pool, 0, std::chrono::milliseconds(0)));
  for (;;) {
    auto wait = next_watch_wait(start, timeout);
    if (!wait) {
      return 0;
    }
    TPUCTL_TRY_ASSIGN(int64_t changed, store->wait_for_change(pool, seen, *wait));
    seen = std::max(seen, changed);
    TPUCTL_TRY_ASSIGN(auto fresh,
                      store->events(state::EventQuery{pool, std::nullopt, "", last, 0}));
    for (const auto& e : fresh) {
      last = std::max(last, e.revision);
      const std::string project = known.see(e);
      if (passes(filter, e, known, project)) {
        print_line(ctx, event_row(e, project));
      }
    }
  }
}

} // namespace

void setup_events(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<EventFlags>();
  group
      .add_option("--object", f->object,
                  "one object's events: ID, or KIND/ID (queued_resource/a1, workload/w, pool/p)")
      ->type_name("[KIND/]ID");
  group.add_option("--actor", f->actor, "events made by this user (etcd user, or USER@HOST)")
      ->type_name("NAME");
  group.add_option("--owner", f->owner, "events of the objects this user made (even deleted ones)")
      ->type_name("NAME");
  group.add_option("--type", f->type, "one action: STATE_CHANGED, DELETED, HOSTS_DRAINED, ...")
      ->type_name("ACTION");
  group.add_option("--since", f->since, "only the last D (1h, 7d)")
      ->type_name("D")
      ->check(positive_duration());
  group.add_flag("--watch", f->watch, "then print each new event as it is committed");
  group.add_option("--timeout", f->timeout, "with --watch: stop after D (default: never)")
      ->type_name("D")
      ->check(positive_duration());
  group.footer(
      "Every pool's events unless --pool; one project's (its objects' and its quota's) with\n"
      "--project. json rows: time, revision, pool, actor, action, object, project, result (the\n"
      "new state, or ok), from, to, initiator, detail. Kept 90 days and at most 20000 a pool\n"
      "(TPUCTL_EVENT_RETENTION, TPUCTL_EVENT_MAX).");
  registry.bind(group, [f](Context& ctx) { return run_events(ctx, *f); });
}

} // namespace tpuctl::cli
