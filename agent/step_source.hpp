// What a worker's job says of its progress, read by `agent supervise-watch` from the two files
// the supervisor keeps for the attempt: the event file (TPUCTL_EVENTS, JSON lines the program
// appends: the documented protocol) and the log, whose lines a pattern may mark as steps.
//
// The protocol (README "The worker's event file"): one JSON object per line, `{"event": KIND,
// ...}`; "step" with "step": N (and "time_ms", else the time it is read) marks a step boundary;
// "checkpoint" with "action": "save" | "restore", "step" and "seconds" (the blocking part) a
// checkpoint. A program that reports steps this way is the steps' source; otherwise its log
// lines matching the workload's --step-pattern are (the pattern's first group is the step
// number, e.g. MaxText's `completed step: (\d+)`), each timed when it is read.
//
// Both files are read from where the last read stopped (a file that shrank is read again from
// its start: a new attempt), in whole lines, so a long run costs what it writes, not what it
// wrote. Partial lines wait for their end; a line longer than 64 KiB is skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace tpuctl::agent {

// A file read on from where the last read stopped, in whole lines.
class FileTail {
public:
  FileTail(std::string path, int64_t offset = 0) : m_path(std::move(path)), m_offset(offset) {}
  // Appends the complete lines written since the last call to `lines`. True when the file
  // shrank (it was made anew: read from its start again).
  bool read(std::vector<std::string>& lines);
  int64_t offset() const { return m_offset; }

private:
  std::string m_path;
  int64_t m_offset;
  std::string m_partial;
  bool m_skipping = false; // inside an over-long line
};

struct StepMark {
  int64_t step = 0;
  int64_t time_ms = 0;
};

class StepSource {
public:
  // `dir`: the worker's directory (events, log); `pattern`: the log's step lines (none: the
  // protocol only); `log_start`: where the attempt's part of the log begins.
  StepSource(const std::string& dir, std::optional<std::regex> pattern, int64_t log_start);

  // Reads what is new. True when anything changed (a step, an event).
  bool poll(int64_t now_ms);
  // The steps read since the last call.
  std::vector<StepMark> take_steps();
  // The latest event of each kind: {KIND: line}.
  const nlohmann::json& latest() const { return m_latest; }
  // {"source": "protocol"|"pattern"|"", "steps": seen, "last_step", "last_step_ms",
  //  "save_ms", "restore_ms", "saves", "restores"}: the attempt's progress so far.
  nlohmann::json progress() const;

private:
  FileTail m_events;
  FileTail m_log;
  std::optional<std::regex> m_pattern;
  nlohmann::json m_latest = nlohmann::json::object();
  std::vector<StepMark> m_new;
  std::string m_source;
  int64_t m_steps = 0;
  StepMark m_last{-1, 0};
  int64_t m_save_ms = 0, m_restore_ms = 0, m_saves = 0, m_restores = 0;
  void add(const StepMark& m);
};

// The default --step-pattern: MaxText's `completed step: N` lines.
inline constexpr const char* k_default_step_pattern = R"(completed step: (\d+))";

// Compiles a --step-pattern: an ECMAScript regular expression with at least one group (the
// step number). Errors: usage naming the pattern, what is wrong and an example.
Expected<std::regex> compile_step_pattern(const std::string& pattern);

} // namespace tpuctl::agent
