// tpuctl qr list --watch: the pool's queued-resource events as they happen, one per line (a JSON
// object per line with --format jsonl or json, else a text line), until --timeout passes or the
// user interrupts. Blocks in StateStore::wait_for_change between reads (an etcd watch, or a
// poll of SQLite's revision), so an idle watch costs nothing.
#include <spdlog/spdlog.h>

#include "cli/output.hpp"
#include "state/store.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

namespace {

Json event_json(const state::Event& e) {
  std::string reason =
      e.detail.is_object() && e.detail.contains("reason") && e.detail["reason"].is_string()
          ? e.detail["reason"].get<std::string>()
          : "";
  return Json{{"revision", e.revision},
              {"time", time_json(e.time_ms)},
              {"pool", e.pool},
              {"queued_resource", e.subject},
              {"type", e.type},
              {"from", e.from_state},
              {"to", e.to_state},
              {"initiator", std::string(state::to_string(e.initiator))},
              {"actor", e.actor},
              {"reason", reason},
              {"error", e.to_state == "FAILED" ? error_json("FAILED", reason) : Json()}};
}

void print_event(const Context& ctx, const state::Event& e) {
  Json j = event_json(e);
  std::ostream& out = *ctx.out;
  if (ctx.machine_format()) {
    out << j.dump() << "\n";
  } else {
    out << cell_text(j["time"]) << "  " << e.subject << "  "
        << (e.from_state.empty() ? "" : e.from_state + " -> ") << e.to_state << "  "
        << j["initiator"].get<std::string>()
        << (j["reason"].get<std::string>().empty() ? "" : "  " + j["reason"].get<std::string>())
        << "\n";
  }
  out.flush();
}

} // namespace

// Prints the queued-resource events of `pool` committed after this call started, as they come,
// for `timeout` (forever when zero). Errors: the store's.
Expected<int> watch_queued_resources(Context& ctx, state::StateStore& store,
                                     const std::string& pool, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  TPUCTL_TRY_ASSIGN(auto listing, store.list(state::Kind::queued_resource, pool));
  int64_t printed = listing.revision; // events up to here are printed (or predate the watch)
  int64_t seen = listing.revision;    // changes up to here are read
  // From here on nothing is missed: said (with --verbosity info) for whoever waits to act.
  spdlog::info("watching the queued resources of pool '{}' from revision {}", pool,
               listing.revision);
  for (;;) {
    TPUCTL_TRY_ASSIGN(auto events, store.events(state::EventQuery{
                                       pool, state::Kind::queued_resource, "", printed, 0}));
    for (const auto& e : events) {
      print_event(ctx, e);
      printed = std::max(printed, e.revision);
    }
    seen = std::max(seen, printed);
    auto wait = next_watch_wait(start, timeout);
    if (!wait) {
      return 0;
    }
    TPUCTL_TRY_ASSIGN(int64_t changed, store.wait_for_change(pool, seen, *wait));
    seen = std::max(seen, changed);
  }
}

} // namespace tpuctl::cli
