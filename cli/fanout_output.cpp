#include "cli/fanout_output.hpp"

#include <algorithm>
#include <map>
#include <ostream>

#include <nlohmann/json.hpp>

#include "cli/exit_codes.hpp"
#include "cli/output.hpp"
#include "remote/grouping.hpp"

namespace tpuctl::cli {

namespace {

constexpr size_t k_max_detail_lines = 20;

std::vector<const remote::HostResult*> in_job_order(const std::vector<remote::HostResult>& rs) {
  std::vector<const remote::HostResult*> out;
  for (const auto& r : rs) {
    out.push_back(&r);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto* a, const auto* b) { return a->index < b->index; });
  return out;
}

} // namespace

Expected<FanoutOutput> parse_fanout_output(std::string_view text) {
  if (text == "prefixed") {
    return FanoutOutput::prefixed;
  }
  if (text == "grouped") {
    return FanoutOutput::grouped;
  }
  if (text == "jsonl") {
    return FanoutOutput::jsonl;
  }
  return usage_error("--output: '" + std::string(text) +
                     "' is not an output mode (use prefixed, grouped or jsonl)");
}

std::string prefixed_line(std::string_view host, std::string_view text) {
  std::string line;
  line.reserve(host.size() + text.size() + 4);
  line += '[';
  line += host;
  line += "] ";
  line += text;
  line += '\n';
  return line;
}

Json identity_json(const JobIdentity* id, const std::string& host) {
  const bool on_slice = id != nullptr && !id->node.empty();
  return Json{{"node", on_slice ? Json(id->node) : Json()},
              {"slice", on_slice ? Json(id->slice) : Json()},
              {"worker", on_slice ? Json(id->worker) : Json()},
              {"host", id != nullptr && !id->host.empty() ? id->host : host}};
}

std::string jsonl_record(const remote::HostResult& r, const JobIdentity* id,
                         const nlohmann::ordered_json* extra) {
  Json j = identity_json(id, r.host);
  j["index"] = r.index;
  const std::string outcome(remote::to_string(r.outcome));
  j["outcome"] = outcome;
  bool exited = r.outcome == remote::Outcome::ok || r.outcome == remote::Outcome::exit_code;
  j["exit_code"] = exited ? Json(r.exit_code) : Json();
  j["signal"] = r.signal_name.empty() ? Json() : Json(r.signal_name);
  j["error"] = error_json(outcome, r.error);
  j["duration_ms"] = r.duration_ms;
  j["stdout"] = r.out;
  j["stderr"] = r.err;
  if (extra != nullptr && extra->is_object()) {
    j.update(*extra);
  }
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string grouped_text(const std::vector<remote::HostResult>& results, remote::Stream stream) {
  std::string out;
  for (const auto& g : remote::group_outputs(results, stream)) {
    std::string header = remote::fold_hosts(g.hosts) + " (" + std::to_string(g.hosts.size()) + ")" +
                         (stream == remote::Stream::err ? " stderr" : "");
    out += "---------------\n" + header + "\n---------------\n" + g.text;
    if (g.text.back() != '\n') {
      out += '\n';
    }
  }
  return out;
}

int host_exit_status(const remote::HostResult& r) {
  using remote::Outcome;
  switch (r.outcome) {
  case Outcome::ok:
    return k_exit_ok;
  case Outcome::exit_code:
    return r.exit_code > 0 && r.exit_code < 256 ? r.exit_code : 1;
  case Outcome::signal:
    return r.signal_number > 0 ? 128 + r.signal_number : k_exit_transport;
  case Outcome::timeout:
    return k_exit_timeout;
  case Outcome::interrupted:
    return k_exit_interrupted;
  case Outcome::auth:
  case Outcome::host_key_unknown:
  case Outcome::host_key_changed:
    return k_exit_auth;
  case Outcome::refused:
  case Outcome::unreachable:
  case Outcome::error:
    return k_exit_transport;
  }
  return k_exit_transport;
}

int broadcast_exit_status(const std::vector<remote::HostResult>& results) {
  for (const auto* r : in_job_order(results)) {
    if (!r->succeeded()) {
      return host_exit_status(*r);
    }
  }
  return k_exit_ok;
}

std::string failure_report(const std::vector<remote::HostResult>& results,
                           const std::string& noun) {
  std::string details;
  size_t detail_lines = 0, failed = 0;
  // Reasons in order of first appearance, each with its hosts.
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
  for (const auto* r : in_job_order(results)) {
    if (r->succeeded()) {
      continue;
    }
    ++failed;
    if (!r->error.empty()) {
      if (detail_lines < k_max_detail_lines) {
        details += "tpuctl: " + r->host + ": " + r->error + "\n";
      }
      ++detail_lines;
    }
    std::string reason = remote::short_reason(*r);
    auto it = std::find_if(by_reason.begin(), by_reason.end(),
                           [&](const auto& p) { return p.first == reason; });
    if (it == by_reason.end()) {
      by_reason.push_back({reason, {}});
      it = std::prev(by_reason.end());
    }
    it->second.push_back(r->host);
  }
  if (failed == 0) {
    return "";
  }
  if (detail_lines > k_max_detail_lines) {
    details += "tpuctl: ... and " + std::to_string(detail_lines - k_max_detail_lines) +
               " more (--output=jsonl shows every host)\n";
  }
  std::string summary = "tpuctl: " + std::to_string(failed) + " of " +
                        std::to_string(results.size()) + " " + noun + " failed: ";
  for (size_t i = 0; i < by_reason.size(); ++i) {
    summary +=
        (i ? ", " : "") + remote::fold_hosts(by_reason[i].second) + " (" + by_reason[i].first + ")";
  }
  return details + summary + "\n";
}

remote::FanoutCallbacks FanoutPrinter::callbacks() {
  remote::FanoutCallbacks cb;
  if (m_mode == FanoutOutput::prefixed) {
    cb.on_line = [this](const remote::HostLine& line) {
      std::ostream& os = line.stream == remote::Stream::out ? m_out : m_err;
      os << prefixed_line(line.host, line.text);
      os.flush(); // line-buffered even into a pipe
    };
  } else if (m_mode == FanoutOutput::jsonl) {
    cb.on_host_done = [this](const remote::HostResult& r) {
      m_out << jsonl_record(r, identity(r.index), m_extra.is_null() ? nullptr : &m_extra) << '\n';
      m_out.flush();
    };
  }
  return cb;
}

void FanoutPrinter::finish(const std::vector<remote::HostResult>& results) {
  if (m_mode == FanoutOutput::grouped) {
    m_out << grouped_text(results, remote::Stream::out);
    m_out.flush();
    m_err << grouped_text(results, remote::Stream::err);
  }
  m_err << failure_report(results, m_ids.empty() ? "hosts" : "workers");
  m_err.flush();
}

} // namespace tpuctl::cli
