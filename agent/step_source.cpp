#include "agent/step_source.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/strings.hpp"

namespace tpuctl::agent {

using Json = nlohmann::json;

namespace {

constexpr size_t k_max_line = 64 * 1024;
constexpr size_t k_max_read = 1 << 20; // per call: a flood is read over several wakes

} // namespace

bool FileTail::read(std::vector<std::string>& lines) {
  int fd = ::open(m_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  bool shrank = false;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size < m_offset) {
    m_offset = 0;
    m_partial.clear();
    m_skipping = false;
    shrank = true;
  }
  std::string buf;
  if (::fstat(fd, &st) == 0 && st.st_size > m_offset) {
    buf.resize(std::min<size_t>(static_cast<size_t>(st.st_size - m_offset), k_max_read));
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), m_offset);
    buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  m_offset += static_cast<int64_t>(buf.size());
  size_t from = 0;
  for (size_t nl; (nl = buf.find('\n', from)) != std::string::npos; from = nl + 1) {
    if (m_skipping) {
      m_skipping = false; // the end of an over-long line
      m_partial.clear();
      continue;
    }
    if (m_partial.size() + (nl - from) <= k_max_line) {
      m_partial.append(buf, from, nl - from);
      lines.push_back(std::move(m_partial));
    }
    m_partial.clear();
  }
  if (!m_skipping) {
    m_partial.append(buf, from, std::string::npos);
    if (m_partial.size() > k_max_line) {
      m_partial.clear();
      m_skipping = true;
    }
  }
  return shrank;
}

StepSource::StepSource(const std::string& dir, std::optional<std::regex> pattern,
                       int64_t log_start)
    : m_events(dir + "/events"), m_log(dir + "/log", log_start), m_pattern(std::move(pattern)) {}

void StepSource::add(const StepMark& m) {
  m_new.push_back(m);
  m_last = m;
  ++m_steps;
}

bool StepSource::poll(int64_t now_ms) {
  bool changed = false;
  std::vector<std::string> lines;
  if (m_events.read(lines)) { // made anew: a new attempt
    m_latest = Json::object();
    changed = true;
  }
  for (const auto& line : lines) {
    Json j = Json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("event") || !j["event"].is_string()) {
      continue;
    }
    const std::string kind = j["event"].get<std::string>();
    if (kind == "step" && j.contains("step") && j["step"].is_number_integer()) {
      m_source = "protocol";
      add({j["step"].get<int64_t>(), j.value("time_ms", now_ms)});
    } else if (kind == "checkpoint") {
      const auto ms = static_cast<int64_t>(j.value("seconds", 0.0) * 1000.0);
      if (j.value("action", "") == "save") {
        m_save_ms += ms;
        ++m_saves;
      } else if (j.value("action", "") == "restore") {
        m_restore_ms += ms;
        ++m_restores;
      }
    }
    m_latest[kind] = std::move(j);
    changed = true;
  }
  lines.clear();
  m_log.read(lines);
  if (m_pattern && m_source != "protocol") {
    std::smatch match;
    for (const auto& line : lines) {
      if (std::regex_search(line, match, *m_pattern) && match.size() > 1) {
        int64_t step = 0;
        const std::string digits = match[1].str();
        if (!digits.empty() && digits.size() < 19 &&
            digits.find_first_not_of("0123456789") == std::string::npos) {
          step = std::stoll(digits);
          m_source = "pattern";
          add({step, now_ms});
          changed = true;
        }
      }
    }
  }
  return changed;
}

std::vector<StepMark> StepSource::take_steps() {
  std::vector<StepMark> out;
  out.swap(m_new);
  return out;
}

Json StepSource::progress() const {
  return Json{{"source", m_source},       {"steps", m_steps},
              {"last_step", m_last.step}, {"last_step_ms", m_last.time_ms},
              {"save_ms", m_save_ms},     {"restore_ms", m_restore_ms},
              {"saves", m_saves},         {"restores", m_restores}};
}

Expected<std::regex> compile_step_pattern(const std::string& pattern) {
  auto bad = [&](const std::string& why) {
    return usage_error("--step-pattern '" + util::printable(pattern) + "' " + why +
                       ": give an ECMAScript regular expression whose first group is the step "
                       "number, e.g. 'completed step: (\\d+)'");
  };
  if (pattern.empty()) {
    return bad("is empty");
  }
  try {
    std::regex re(pattern, std::regex::ECMAScript | std::regex::optimize);
    if (re.mark_count() < 1) {
      return bad("has no group");
    }
    return re;
  } catch (const std::regex_error& e) {
    return bad(std::string("does not compile (") + e.what() + ")");
  }
}

} // namespace tpuctl::agent
