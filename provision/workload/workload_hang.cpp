#include "provision/workload/workload_hang.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::provision {

namespace {

// "  File \"/x/train.py\", line 42 in step" -> "train.py:42 in step" (the file's base name: the
// same program sits at other paths on other hosts).
std::optional<std::string> frame_of(const std::string& line) {
  const auto file = line.find("File \"");
  if (file == std::string::npos) {
    return std::nullopt;
  }
  const auto close = line.find('"', file + 6);
  const auto at = line.find(", line ", close == std::string::npos ? 0 : close);
  if (close == std::string::npos || at == std::string::npos) {
    return std::nullopt;
  }
  std::string path = line.substr(file + 6, close - file - 6);
  const auto slash = path.rfind('/');
  if (slash != std::string::npos) {
    path = path.substr(slash + 1);
  }
  std::string rest = line.substr(at + 7); // "42 in step"
  const auto space = rest.find(' ');
  const std::string number = rest.substr(0, space);
  const std::string in = space == std::string::npos ? "" : rest.substr(space + 1);
  return path + ":" + number + (in.empty() ? "" : " " + in);
}

} // namespace

int64_t hang_timeout_ms(const Workload& w) {
  if (w.hang_timeout_ms > 0) {
    return w.hang_timeout_ms;
  }
  return std::max(k_hang_floor_ms, k_hang_ideal_multiple * ideal_step_ms(w.steps.samples));
}

std::optional<std::string> hang_check(const Workload& w, int64_t now_ms) {
  const StepSegment& s = w.steps.segment;
  if (w.steps.source.empty() || s.attempt != w.attempt || s.first_step < 0 || w.workers.empty()) {
    return std::nullopt;
  }
  for (const auto& x : w.workers) {
    if (x.state != WorkerState::running || x.attempt != w.attempt) {
      return std::nullopt;
    }
  }
  const int64_t timeout = hang_timeout_ms(w);
  const int64_t quiet = now_ms - s.last_ms;
  if (quiet <= timeout) {
    return std::nullopt;
  }
  auto d = [](int64_t ms) { return util::format_duration(std::chrono::milliseconds(ms)); };
  return "no step for " + d(quiet) + " after step " + std::to_string(s.last_step) +
         " (ideal step " + d(ideal_step_ms(w.steps.samples)) + ", hang timeout " + d(timeout) +
         ")";
}

std::vector<std::string> main_stack(const std::string& dump) {
  // faulthandler: a header per thread ("Thread 0x... (most recent call first):" or "Current
  // thread ..."), then its frames, most recent first; the main thread's last frame is the
  // program's <module>.
  std::vector<std::string> thread, found;
  auto close = [&]() {
    if (!thread.empty() && thread.back().ends_with(" <module>") && found.empty()) {
      found = thread;
    }
    thread.clear();
  };
  std::istringstream in(dump);
  for (std::string line; std::getline(in, line);) {
    if (line.find("(most recent call first)") != std::string::npos) {
      close();
    } else if (auto f = frame_of(line)) {
      thread.push_back(*f);
    } else if (util::trim(line).empty()) {
      close();
    }
  }
  close();
  return found;
}

std::optional<OddStack> odd_stack(const std::vector<std::optional<std::string>>& dumps) {
  std::map<std::vector<std::string>, std::vector<size_t>> by_stack;
  for (size_t i = 0; i < dumps.size(); ++i) {
    if (dumps[i]) {
      auto stack = main_stack(*dumps[i]);
      if (!stack.empty()) {
        by_stack[stack].push_back(i);
      }
    }
  }
  if (by_stack.size() != 2) {
    return std::nullopt;
  }
  auto a = by_stack.begin();
  auto b = std::next(a);
  if (a->second.size() > b->second.size()) {
    std::swap(a, b);
  }
  if (a->second.size() != 1 || b->second.size() < 2) {
    return std::nullopt;
  }
  // Where they part: the outermost frame that differs (the program's line, usually).
  const auto& odd = a->first;
  const auto& common = b->first;
  size_t i = 0;
  while (i < odd.size() && i < common.size() &&
         odd[odd.size() - 1 - i] == common[common.size() - 1 - i]) {
    ++i;
  }
  const std::string where = i < odd.size() ? odd[odd.size() - 1 - i] : odd.front();
  const std::string others = i < common.size() ? common[common.size() - 1 - i] : common.front();
  return OddStack{a->second.front(), where, others};
}

} // namespace tpuctl::provision
