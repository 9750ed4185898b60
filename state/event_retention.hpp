// How long the event log keeps what happened: a busy shared pool appends events for every
// change (a request's life is five or six), and a store must not grow forever. Each backend
// compacts a pool's log as it appends to it, one commit in k_compact_every (the commit whose
// revision is a multiple of it): the events older than the retention's age go, and beyond its
// count, the oldest. SQLite does it inside the committing transaction (one indexed DELETE);
// etcd right after the commit (a count, the oldest batch read, deletes in transactions of 100),
// counting commit batches (one key per commit and pool) rather than events. etcd's own history
// of the deleted keys is etcd's to compact (--auto-compaction-retention; README).
//
//   TPUCTL_EVENT_RETENTION   how old an event may get (a duration: 90d by default; 0: no limit)
//   TPUCTL_EVENT_MAX         events (etcd: commit batches) kept per pool (20000; 0: no limit)
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpuctl::state {

inline constexpr int64_t k_compact_every = 64;

struct EventRetention {
  int64_t max_age_ms = 90LL * 24 * 3600 * 1000; // 0: no limit
  int64_t max_events = 20000;                   // per pool; 0: no limit
  bool any() const { return max_age_ms > 0 || max_events > 0; }
};

// The retention from the environment (defaults above; a bad value keeps the default, warned
// once per process).
EventRetention event_retention();

// Whether the commit at `revision` compacts the logs it appended to.
inline bool compaction_due(int64_t revision) {
  return revision > 0 && revision % k_compact_every == 0;
}

} // namespace tpuctl::state
