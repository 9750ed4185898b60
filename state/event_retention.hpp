// How long the event log keeps what happened: a busy shared pool appends events for every
// change (a request's life is five or six), and a store must not grow forever. Each backend
// compacts a pool's log as it appends to it, at the commits whose revision is a multiple of
// compaction_interval(): the events older than the retention's age go, and beyond its count,
// the oldest. SQLite does it inside the committing transaction (one indexed DELETE);
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

struct EventRetention {
  int64_t max_age_ms = 90LL * 24 * 3600 * 1000; // 0: no limit
  int64_t max_events = 20000;                   // per pool; 0: no limit
  bool any() const { return max_age_ms > 0 || max_events > 0; }
};

// The retention from the environment (defaults above; a bad value keeps the default, warned
// once per process).
EventRetention event_retention();

// Every how many revisions a store compacts: a sixteenth of max_events, between 64 and 1024
// (so a log overshoots its count by 6 % at most, and etcd, which must sort a pool's whole log to
// find its oldest, does it 20 times in 20,000 commits with the default).
inline int64_t compaction_interval(const EventRetention& r) {
  const int64_t by_count = r.max_events > 0 ? r.max_events / 16 : 1024;
  return by_count < 64 ? 64 : (by_count > 1024 ? 1024 : by_count);
}

// Whether the commit at `revision` compacts the logs it appended to.
inline bool compaction_due(int64_t revision, const EventRetention& r) {
  return r.any() && revision > 0 && revision % compaction_interval(r) == 0;
}

} // namespace tpuctl::state
