#include "provision/workload/workload_queue.hpp"

#include <algorithm>
#include <set>

#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

const std::vector<std::pair<std::string, int>> k_priorities = {
    {"very-low", 100}, {"low", 250}, {"medium", 500}, {"high", 750}, {"very-high", 1000}};

std::string slices_text(int n) {
  return util::counted(static_cast<size_t>(n), "free slice");
}

// "slice 0 held by train-7 (priority high), slice 1 by eval-2 (priority medium, evicting)"
std::string holders(const std::vector<const QueueEntry*>& admitted) {
  std::vector<std::pair<int, const QueueEntry*>> by_slice;
  for (const auto* e : admitted) {
    for (int s : e->held) {
      by_slice.emplace_back(s, e);
    }
  }
  std::sort(by_slice.begin(), by_slice.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> parts;
  for (const auto& [s, e] : by_slice) {
    parts.push_back("slice " + std::to_string(s) + (parts.empty() ? " held by " : " by ") +
                    e->name + " (priority " + priority_name(e->priority) +
                    (e->evicting ? ", evicting" : "") + ")");
  }
  return util::join(parts, ", ");
}

} // namespace

Expected<int> parse_priority(const std::string& name) {
  for (const auto& [n, v] : k_priorities) {
    if (n == name) {
      return v;
    }
  }
  return usage_error("--priority " + util::printable(name) +
                     " is not a priority: give very-low, low, medium, high or very-high");
}

std::string priority_name(int value) {
  for (const auto& [n, v] : k_priorities) {
    if (v == value) {
      return n;
    }
  }
  return std::to_string(value);
}

QueuePlan plan_queue(const std::string& cluster, int slices, const std::vector<QueueEntry>& entries,
                     int64_t now_ms, const QueuePolicy& policy, const std::set<int>& broken) {
  QueuePlan plan;
  std::set<int> free;
  std::vector<std::string> waiting_repair;
  for (int s = 0; s < slices; ++s) {
    if (broken.count(s) == 0) {
      free.insert(s);
    } else {
      waiting_repair.push_back(std::to_string(s));
    }
  }
  const std::string repair_note =
      waiting_repair.empty()
          ? std::string()
          : "; slice" + std::string(waiting_repair.size() == 1 ? " " : "s ") +
                util::join(waiting_repair, ", ") + " waiting for a repair";
  // What an admitted workload's slices are worth to others: the broken ones free nothing.
  auto usable = [&](const QueueEntry* e) {
    return static_cast<int>(std::count_if(e->held.begin(), e->held.end(),
                                          [&](int s) { return broken.count(s) == 0; }));
  };
  std::vector<const QueueEntry*> admitted;
  std::vector<const QueueEntry*> waiting;
  for (const auto& e : entries) {
    if (e.held.empty()) {
      waiting.push_back(&e);
      continue;
    }
    admitted.push_back(&e);
    for (int s : e.held) {
      free.erase(s);
    }
  }
  std::stable_sort(waiting.begin(), waiting.end(), [](const QueueEntry* a, const QueueEntry* b) {
    if (a->priority != b->priority) {
      return a->priority > b->priority;
    }
    if (a->arrival_ms != b->arrival_ms) {
      return a->arrival_ms < b->arrival_ms;
    }
    return a->name < b->name;
  });
  std::set<std::string> evicted;
  // Slices that evicting workloads are about to free: the first waiting workload that does not
  // fit (the one they were evicted for, or one that outranks it) counts on them.
  std::vector<const QueueEntry*> stopping;
  int coming = 0;
  for (const auto* a : admitted) {
    if (a->evicting) {
      stopping.push_back(a);
      coming += usable(a);
    }
  }
  const QueueEntry* blocker = nullptr; // the starving head: nothing of its priority or lower
  const QueueEntry* head = nullptr;    // the first that did not fit
  int place = 0;
  for (const QueueEntry* w : waiting) {
    const int n = w->num_slices;
    if (n > slices) {
      plan.reason[w->name] = "asks for " + std::to_string(n) + " slices; cluster " + cluster +
                             " has " + std::to_string(slices);
      plan.position[w->name] = ++place;
      continue;
    }
    if (blocker != nullptr && w->priority <= blocker->priority) {
      plan.reason[w->name] = "waiting behind " + blocker->name + ", at the head of the queue of " +
                             "cluster " + cluster + " for " + slices_text(blocker->num_slices);
      plan.position[w->name] = ++place;
      continue;
    }
    if (static_cast<int>(free.size()) >= n) {
      std::vector<int> got(free.begin(), std::next(free.begin(), n));
      for (int s : got) {
        free.erase(s);
      }
      plan.admit[w->name] = got;
      continue;
    }
    // Does not fit: lower priorities may make room (not those being evicted already).
    std::vector<const QueueEntry*> candidates;
    for (const auto* a : admitted) {
      if (!a->evicting && a->priority < w->priority && evicted.count(a->name) == 0) {
        candidates.push_back(a);
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const QueueEntry* a, const QueueEntry* b) {
                       if (a->priority != b->priority) {
                         return a->priority < b->priority;
                       }
                       return a->admitted_ms > b->admitted_ms; // the most recent first
                     });
    std::vector<const QueueEntry*> victims;
    int room = static_cast<int>(free.size()) + coming;
    if (coming > 0 && room >= n) {
      std::vector<std::string> names;
      for (const auto* s : stopping) {
        names.push_back(s->name);
      }
      coming = 0;
      for (int k = 0; k < n && !free.empty(); ++k) {
        free.erase(free.begin()); // set aside with what the evicted free
      }
      plan.reason[w->name] = "waiting for " + util::join(names, ", ") +
                             " to stop (evicted to make room on cluster " + cluster + ")";
      plan.position[w->name] = ++place;
      continue;
    }
    coming = 0;
    for (const auto* c : candidates) {
      if (room >= n) {
        break;
      }
      victims.push_back(c);
      room += usable(c);
    }
    if (room >= n) {
      // Walk back: a victim whose slices are not needed stays.
      for (size_t i = victims.size(); i-- > 0;) {
        const int without = room - usable(victims[i]);
        if (without >= n) {
          room = without;
          victims.erase(victims.begin() + static_cast<std::ptrdiff_t>(i));
        }
      }
      std::vector<std::string> names;
      int from_victims = 0;
      for (const auto* v : victims) {
        evicted.insert(v->name);
        plan.evict.push_back(v->name);
        plan.evicted_for[v->name] = w->name;
        names.push_back(v->name + " (priority " + priority_name(v->priority) + ")");
        from_victims += usable(v);
      }
      // The free slices it needs are set aside for it until its victims have stopped.
      for (int k = 0; k < n - from_victims && !free.empty(); ++k) {
        free.erase(free.begin());
      }
      plan.reason[w->name] =
          "evicting " + util::join(names, ", ") + " to make room on cluster " + cluster;
      plan.position[w->name] = ++place;
      continue;
    }
    plan.reason[w->name] = "waiting for " + slices_text(n) + " of cluster " + cluster + " (" +
                           std::to_string(free.size()) + " free)" +
                           (admitted.empty() ? "" : ": " + holders(admitted)) + repair_note;
    plan.position[w->name] = ++place;
    if (head == nullptr) {
      head = w;
      const int64_t since = w->head_since_ms > 0 ? w->head_since_ms : now_ms;
      plan.head_since_ms[w->name] = since;
      if (now_ms - since >= policy.head_wait_bound.count()) {
        blocker = w; // waited long enough at the head: no more passing it
      }
    }
  }
  return plan;
}

} // namespace tpuctl::provision
