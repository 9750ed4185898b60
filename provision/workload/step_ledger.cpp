#include "provision/workload/step_ledger.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace tpuctl::provision {

using Json = nlohmann::json;
using Window = std::vector<std::pair<int64_t, int64_t>>;

namespace {

int64_t mean_step(const StepSegment& s) {
  return s.steps > 2 ? s.sum_ms / (s.steps - 2) : std::max<int64_t>(s.first_duration_ms, 0);
}

// When step `n` of segment `s` started: from its recent window, else placed by its mean step.
int64_t start_of(const StepSegment& s, const Window& recent, int64_t n) {
  for (const auto& [step, ms] : recent) {
    if (step >= n) {
      return step == n ? ms : ms - (step - n) * mean_step(s);
    }
  }
  return s.first_ms + (n - s.first_step) * mean_step(s);
}

// What segment `s`'s closed steps add to productive time: its steps after the first, the ideal
// part of the first, less its blocking saves.
int64_t productive_of(const StepSegment& s, int64_t ideal) {
  if (s.first_step < 0) {
    return 0;
  }
  int64_t first = 0;
  if (s.first_duration_ms >= 0) {
    first = ideal > 0 ? std::min(s.first_duration_ms, ideal) : s.first_duration_ms;
  }
  return std::max<int64_t>(0, s.sum_ms + first - s.save_ms);
}

// Its start-up: from the attempt's start to its first step (less restores), and what its first
// step took beyond the ideal. With no step by `end_ms`, all of its time so far.
int64_t startup_of(const StepSegment& s, int64_t ideal, int64_t end_ms) {
  if (s.first_step < 0) {
    return std::max<int64_t>(0, end_ms - s.start_ms - s.restore_ms);
  }
  int64_t before = std::max<int64_t>(0, s.first_ms - s.start_ms - s.restore_ms);
  if (s.first_duration_ms > 0 && ideal > 0) {
    before += std::max<int64_t>(0, s.first_duration_ms - ideal);
  }
  return before;
}

void push_window(Window& v, int64_t n, int64_t ms) {
  v.emplace_back(n, ms);
  if (v.size() > k_step_window) {
    v.erase(v.begin(), v.begin() + static_cast<long>(v.size() - k_step_window));
  }
}

void push_sample(std::vector<int32_t>& samples, int64_t ms) {
  samples.push_back(static_cast<int32_t>(std::clamp<int64_t>(ms, 0, INT32_MAX)));
  if (samples.size() > k_step_samples) {
    samples.erase(samples.begin(),
                  samples.begin() + static_cast<long>(samples.size() - k_step_samples));
  }
}

// Closes the pending previous segment now that the current one's first step is `n`, into the
// totals: what it did (productive), its start-up and restores and saves, and the disruption:
// the steps from `n` on done again (wasted), and its last step's start to the new attempt's
// start (recovery).
void close_previous(StepLedger& l, int64_t n) {
  StepSegment& p = l.previous;
  if (p.attempt < 0) {
    return;
  }
  const int64_t ideal = ideal_step_ms(l.samples);
  const int64_t next_start = l.segment.start_ms;
  l.restore_ms += p.restore_ms;
  l.save_ms += p.save_ms;
  if (p.first_step < 0) { // it never stepped: all of it was start-up
    l.startup_ms += std::max<int64_t>(0, next_start - p.start_ms - p.restore_ms);
  } else {
    // Its steps after the first; the first one's time is split at report time (first_durations).
    int64_t productive = std::max<int64_t>(0, p.sum_ms - p.save_ms);
    l.startup_ms += std::max<int64_t>(0, p.first_ms - p.start_ms - p.restore_ms);
    if (n <= p.first_step) { // all of it done again, its first step too
      const int64_t first = std::max<int64_t>(0, p.first_duration_ms);
      const int64_t first_done = ideal > 0 ? std::min(first, ideal) : first;
      l.wasted_ms += productive + first_done;
      l.startup_ms += first - first_done;
      productive = 0;
    } else {
      if (n <= p.last_step) {
        // The redone steps' time. It was counted productive, less the segment's blocking saves;
        // but a save made after the last step heard (the one a disruption cuts short) lies
        // outside the steps' durations, so `productive` can be short of it: what the redone
        // steps took beyond `productive` comes off the saves' share, which holds it.
        const int64_t span = std::max<int64_t>(0, p.last_ms - start_of(p, l.previous_recent, n));
        const int64_t wasted = std::min(span, productive + p.save_ms);
        const int64_t from_productive = std::min(wasted, productive);
        l.save_ms -= wasted - from_productive;
        l.wasted_ms += wasted;
        productive -= from_productive;
      }
      if (p.first_duration_ms >= 0) {
        l.first_durations.push_back(p.first_duration_ms);
        if (l.first_durations.size() > k_step_samples) {
          const int64_t old = l.first_durations.front();
          l.first_durations.erase(l.first_durations.begin());
          l.productive_ms += ideal > 0 ? std::min(old, ideal) : old;
          l.startup_ms += ideal > 0 ? std::max<int64_t>(0, old - ideal) : 0;
        }
      }
    }
    l.productive_ms += productive;
    l.recovery_ms += std::max<int64_t>(0, next_start - p.last_ms);
    l.last_productive_step = std::max(l.last_productive_step, std::min(p.last_step - 1, n - 1));
  }
  l.disruptions += 1;
  l.previous = StepSegment{};
  l.previous_recent.clear();
}

Json segment_json(const StepSegment& s) {
  return Json{{"attempt", s.attempt},
              {"start_ms", s.start_ms},
              {"first_step", s.first_step},
              {"first_ms", s.first_ms},
              {"first_duration_ms", s.first_duration_ms},
              {"last_step", s.last_step},
              {"last_ms", s.last_ms},
              {"steps", s.steps},
              {"sum_ms", s.sum_ms},
              {"restore_ms", s.restore_ms},
              {"save_ms", s.save_ms}};
}

StepSegment segment_from(const Json& j) {
  StepSegment s;
  if (!j.is_object()) {
    return s;
  }
  s.attempt = j.value("attempt", -1);
  s.start_ms = j.value("start_ms", int64_t{0});
  s.first_step = j.value("first_step", int64_t{-1});
  s.first_ms = j.value("first_ms", int64_t{0});
  s.first_duration_ms = j.value("first_duration_ms", int64_t{-1});
  s.last_step = j.value("last_step", int64_t{-1});
  s.last_ms = j.value("last_ms", int64_t{0});
  s.steps = j.value("steps", int64_t{0});
  s.sum_ms = j.value("sum_ms", int64_t{0});
  s.restore_ms = j.value("restore_ms", int64_t{0});
  s.save_ms = j.value("save_ms", int64_t{0});
  return s;
}

// (step, ms) pairs as two delta-coded arrays: small numbers, a small record.
Json window_json(const Window& w) {
  Json steps = Json::array(), ms = Json::array();
  int64_t ps = 0, pm = 0;
  for (const auto& [s, m] : w) {
    steps.push_back(s - ps);
    ms.push_back(m - pm);
    ps = s;
    pm = m;
  }
  return Json{{"steps", steps}, {"ms", ms}};
}

Window window_from(const Json& j) {
  Window out;
  if (!j.is_object() || !j.contains("steps") || !j.contains("ms") || !j["steps"].is_array() ||
      !j["ms"].is_array() || j["steps"].size() != j["ms"].size()) {
    return out;
  }
  int64_t s = 0, m = 0;
  for (size_t i = 0; i < j["steps"].size() && i < k_step_window; ++i) {
    if (!j["steps"][i].is_number_integer() || !j["ms"][i].is_number_integer()) {
      return {};
    }
    s += j["steps"][i].get<int64_t>();
    m += j["ms"][i].get<int64_t>();
    out.emplace_back(s, m);
  }
  return out;
}

} // namespace

namespace {

// A new segment for `attempt` from `start_ms`; the current one (if it has begun) becomes the
// pending previous one.
void new_segment(StepLedger& l, int attempt, int64_t start_ms) {
  if (l.job_start_ms < 0) {
    l.job_start_ms = start_ms;
  }
  if (l.segment.attempt >= 0) {
    if (l.segment.first_step >= 0) {
      l.previous = l.segment; // pending until the new one's first step places its disruption
      l.previous_recent = std::move(l.recent);
    } else if (l.previous.attempt >= 0) {
      // An attempt that never stepped between two that did (a repair that started again, say):
      // the pending one stays pending, and the time is the recovery's, from its last step to
      // the attempt that steps. Its checkpoint time counts all the same.
      l.save_ms += l.segment.save_ms;
      l.restore_ms += l.segment.restore_ms;
    } else {
      // A first attempt that never stepped: all of it was start-up.
      l.startup_ms += std::max<int64_t>(0, start_ms - l.segment.start_ms - l.segment.restore_ms);
      l.restore_ms += l.segment.restore_ms;
      l.save_ms += l.segment.save_ms;
    }
  }
  l.segment = StepSegment{};
  l.segment.attempt = attempt;
  l.segment.start_ms = start_ms;
  l.recent.clear();
}

} // namespace

void begin_attempt(StepLedger& l, int attempt, int64_t start_ms) {
  if (l.segment.attempt != attempt) {
    new_segment(l, attempt, start_ms);
  }
}

void add_step(StepLedger& l, int attempt, int64_t step, int64_t start_ms) {
  StepSegment& s = l.segment;
  if (attempt != s.attempt || step < 0) {
    return;
  }
  if (s.first_step >= 0 && step <= s.last_step) {
    // A step number again within one attempt: the program restarted itself (a segment of its
    // own, from its last step's start: no time of tpuctl's in between).
    new_segment(l, attempt, s.last_ms);
  }
  if (s.first_step < 0) {
    close_previous(l, step);
    s.first_step = step;
    s.first_ms = start_ms;
    s.last_step = step;
    s.last_ms = start_ms;
    s.steps = 1;
    push_window(l.recent, step, start_ms);
    return;
  }
  // Consecutive steps (gap 1); a program that reports every k steps: k equal steps.
  const int64_t gap = step - s.last_step;
  const int64_t took = std::max<int64_t>(0, start_ms - s.last_ms);
  const int64_t each = took / gap;
  int64_t sampled = gap;
  if (s.steps == 1) {
    s.first_duration_ms = each;
    s.sum_ms += took - each;
    sampled -= 1; // the first step is start-up's, not a sample
  } else {
    s.sum_ms += took;
  }
  for (int64_t i = 0; i < sampled; ++i) {
    push_sample(l.samples, each);
  }
  s.last_step = step;
  s.last_ms = start_ms;
  s.steps += gap;
  push_window(l.recent, step, start_ms);
}

void add_checkpoint(StepLedger& l, int attempt, bool save, int64_t duration_ms) {
  if (attempt != l.segment.attempt || duration_ms <= 0) {
    return;
  }
  (save ? l.segment.save_ms : l.segment.restore_ms) += duration_ms;
}

int64_t ideal_step_ms(const std::vector<int32_t>& samples) {
  if (samples.empty()) {
    return 0;
  }
  std::vector<int64_t> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  const int64_t median = v[v.size() / 2];
  std::vector<int64_t> dev;
  dev.reserve(v.size());
  for (int64_t x : v) {
    dev.push_back(std::llabs(x - median));
  }
  std::sort(dev.begin(), dev.end());
  const int64_t mad = dev[dev.size() / 2];
  int64_t sum = 0, n = 0;
  for (int64_t x : v) {
    if (x <= median + 3 * mad) {
      sum += x;
      ++n;
    }
  }
  return n > 0 ? sum / n : median;
}

StepGoodput step_goodput(const StepLedger& ledger, int64_t end_ms, bool ended) {
  StepLedger l = ledger;
  StepGoodput g;
  g.has_steps = !l.source.empty();
  const int64_t ideal = ideal_step_ms(l.samples);
  // A previous segment still pending (the new attempt has not stepped yet): what it did counts
  // as done; whether some of it is wasted is known at the new attempt's first step.
  if (l.previous.attempt >= 0) {
    l.productive_ms += productive_of(l.previous, ideal);
    l.startup_ms += startup_of(l.previous, ideal, l.segment.start_ms);
    l.restore_ms += l.previous.restore_ms;
    l.save_ms += l.previous.save_ms;
    l.last_productive_step = std::max(l.last_productive_step, l.previous.last_step - 1);
    if (l.previous.first_step >= 0) {
      l.recovery_ms += std::max<int64_t>(0, l.segment.start_ms - l.previous.last_ms);
      l.disruptions += 1;
    }
  }
  const StepSegment& s = l.segment;
  int64_t productive = l.productive_ms;
  int64_t startup = l.startup_ms;
  for (const int64_t first : l.first_durations) { // split with this report's ideal step time
    productive += ideal > 0 ? std::min(first, ideal) : first;
    startup += ideal > 0 ? std::max<int64_t>(0, first - ideal) : 0;
  }
  if (s.attempt >= 0) {
    productive += productive_of(s, ideal);
    startup += startup_of(s, ideal, end_ms);
    if (s.first_step >= 0) {
      g.last_productive_step = s.last_step - 1;
      if (ended) {
        productive += std::max<int64_t>(0, end_ms - s.last_ms); // the last step, closed by the end
        g.last_productive_step = s.last_step;
      }
    }
  }
  g.last_productive_step = std::max(g.last_productive_step, l.last_productive_step);
  g.total_ms = l.job_start_ms >= 0 ? std::max<int64_t>(0, end_ms - l.job_start_ms) : 0;
  g.productive_ms = productive;
  g.program_startup_ms = startup;
  g.wasted_progress_ms = l.wasted_ms;
  g.infrastructure_recovery_ms = l.recovery_ms;
  g.checkpoint_save_ms = l.save_ms + s.save_ms;
  g.checkpoint_restore_ms = l.restore_ms + s.restore_ms;
  const int64_t explained = g.productive_ms + g.program_startup_ms + g.wasted_progress_ms +
                            g.infrastructure_recovery_ms + g.checkpoint_save_ms +
                            g.checkpoint_restore_ms;
  g.other_ms = std::max<int64_t>(0, g.total_ms - explained);
  g.total_ms = std::max(g.total_ms, explained);
  g.goodput = g.total_ms > 0 ? static_cast<double>(g.productive_ms) / g.total_ms : 0.0;
  g.disruptions = l.disruptions;
  g.ideal_step_ms = ideal;
  g.steps = s.steps;
  return g;
}

Json to_json(const StepLedger& l) {
  Json samples = Json::array();
  for (int32_t x : l.samples) {
    samples.push_back(x);
  }
  return Json{{"source", l.source},
              {"job_start_ms", l.job_start_ms},
              {"segment", segment_json(l.segment)},
              {"recent", window_json(l.recent)},
              {"previous", segment_json(l.previous)},
              {"previous_recent", window_json(l.previous_recent)},
              {"samples", samples},
              {"first_durations", l.first_durations},
              {"productive_ms", l.productive_ms},
              {"startup_ms", l.startup_ms},
              {"wasted_ms", l.wasted_ms},
              {"recovery_ms", l.recovery_ms},
              {"save_ms", l.save_ms},
              {"restore_ms", l.restore_ms},
              {"disruptions", l.disruptions},
              {"last_productive_step", l.last_productive_step}};
}

StepLedger step_ledger_from_json(const Json& j) {
  StepLedger l;
  if (!j.is_object()) {
    return l;
  }
  try {
    l.source = j.value("source", "");
    l.job_start_ms = j.value("job_start_ms", int64_t{-1});
    l.segment = segment_from(j.value("segment", Json()));
    l.recent = window_from(j.value("recent", Json()));
    l.previous = segment_from(j.value("previous", Json()));
    l.previous_recent = window_from(j.value("previous_recent", Json()));
    for (const auto& x : j.value("samples", Json::array())) {
      if (x.is_number_integer() && l.samples.size() < k_step_samples) {
        l.samples.push_back(x.get<int32_t>());
      }
    }
    for (const auto& x : j.value("first_durations", Json::array())) {
      if (x.is_number_integer() && l.first_durations.size() < k_step_samples) {
        l.first_durations.push_back(x.get<int64_t>());
      }
    }
    l.productive_ms = j.value("productive_ms", int64_t{0});
    l.startup_ms = j.value("startup_ms", int64_t{0});
    l.wasted_ms = j.value("wasted_ms", int64_t{0});
    l.recovery_ms = j.value("recovery_ms", int64_t{0});
    l.save_ms = j.value("save_ms", int64_t{0});
    l.restore_ms = j.value("restore_ms", int64_t{0});
    l.disruptions = j.value("disruptions", 0);
    l.last_productive_step = j.value("last_productive_step", int64_t{-1});
  } catch (const std::exception&) {
    return StepLedger{};
  }
  return l;
}

Json to_json(const StepGoodput& g) {
  return Json{{"kind", g.has_steps ? "steps" : "phases"},
              {"total_ms", g.total_ms},
              {"productive_ms", g.productive_ms},
              {"goodput", std::round(g.goodput * 10000.0) / 10000.0},
              {"badput",
               {{"program_startup_ms", g.program_startup_ms},
                {"wasted_progress_from_disruption_ms", g.wasted_progress_ms},
                {"infrastructure_recovery_from_disruption_ms", g.infrastructure_recovery_ms},
                {"unproductive_checkpoint_save_ms", g.checkpoint_save_ms},
                {"unproductive_checkpoint_restore_ms", g.checkpoint_restore_ms},
                {"other_ms", g.other_ms}}},
              {"disruptions", g.disruptions},
              {"ideal_step_ms", g.ideal_step_ms},
              {"last_productive_step", g.last_productive_step}};
}

} // namespace tpuctl::provision
