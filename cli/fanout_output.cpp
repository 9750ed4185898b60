#include "cli/fanout_output.hpp"

#include <algorithm>
#include <map>
#include <ostream>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cli/exit_codes.hpp"
#include "cli/output.hpp"
#include "remote/grouping.hpp"
#include "remote/spool.hpp"
#include "util/json_string.hpp"

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

void write_jsonl_record(std::ostream& os, const remote::HostResult& r, const JobIdentity* id,
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
  // The fields so far, then stdout and stderr streamed (a spooled output may be gigabytes),
  // then the extra fields: the same text one dump() of the whole object would give.
  std::string head = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  head.pop_back(); // '}'
  os << head;
  for (auto [name, text, spool] :
       {std::tuple{"stdout", &r.out, r.out_spool.get()}, {"stderr", &r.err, r.err_spool.get()}}) {
    os << ",\"" << name << "\":";
    util::JsonStringWriter value(os);
    value.feed(*text);
    if (spool != nullptr) {
      (void)spool->for_each([&](std::string_view piece) { value.feed(piece); });
    }
    value.finish();
  }
  if (extra != nullptr && extra->is_object() && !extra->empty()) {
    std::string more = extra->dump(-1, ' ', false, Json::error_handler_t::replace);
    more.front() = ',';
    os << more;
  } else {
    os << '}';
  }
}

std::string jsonl_record(const remote::HostResult& r, const JobIdentity* id,
                         const nlohmann::ordered_json* extra) {
  std::ostringstream os;
  write_jsonl_record(os, r, id, extra);
  return os.str();
}

void write_grouped(std::ostream& os, const std::vector<remote::HostResult>& results,
                   remote::Stream stream) {
  for (const auto& g : remote::group_outputs(results, stream)) {
    std::string header = remote::fold_hosts(g.hosts) + " (" + std::to_string(g.hosts.size()) + ")" +
                         (stream == remote::Stream::err ? " stderr" : "");
    os << "---------------\n" << header << "\n---------------\n" << g.text;
    char last = g.text.empty() ? '\n' : g.text.back();
    if (g.spool != nullptr) {
      auto read = g.spool->for_each([&](std::string_view piece) { os << piece; });
      last = g.spool->last_byte();
      if (!read || !g.spool->error().empty()) {
        os << (last == '\n' ? "" : "\n")
           << "tpuctl: " << (read ? g.spool->error() : read.error().message) << "\n";
        last = '\n';
      }
    }
    if (last != '\n') {
      os << '\n';
    }
  }
}

std::string grouped_text(const std::vector<remote::HostResult>& results, remote::Stream stream) {
  std::ostringstream os;
  write_grouped(os, results, stream);
  return os.str();
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
    };
    // Every line is out as soon as the piece of output that brought it has been split, even
    // into a pipe; one write per piece, not per line (a worker printing short lines fast would
    // otherwise cost a system call each: 25 MB/s at 20-byte lines).
    cb.on_lines_flush = [this] {
      m_out.flush();
      m_err.flush();
    };
  } else if (m_mode == FanoutOutput::jsonl) {
    cb.on_host_done = [this](const remote::HostResult& r) {
      write_jsonl_record(m_out, r, identity(r.index), m_extra.is_null() ? nullptr : &m_extra);
      m_out << '\n';
      for (auto* spool : {r.out_spool.get(), r.err_spool.get()}) {
        if (spool != nullptr) {
          spool->drop_content(); // printed: its temporary file goes now, not at the end
        }
      }
      m_out.flush();
    };
  } else {
    // Grouped: one copy of each distinct output is kept until the end; a host whose output
    // equals one already kept frees its own as it ends (its digest and size stay).
    cb.on_host_done = [this](const remote::HostResult& r) {
      for (auto [stream, spool] : {std::pair{0, r.out_spool.get()}, {1, r.err_spool.get()}}) {
        if (spool != nullptr && !spool->empty() &&
            !m_kept.emplace(stream, spool->digest(), spool->size()).second) {
          spool->drop_content();
        }
      }
    };
  }
  return cb;
}

void FanoutPrinter::finish(const std::vector<remote::HostResult>& results) {
  if (m_mode == FanoutOutput::grouped) {
    write_grouped(m_out, results, remote::Stream::out);
    m_out.flush();
    write_grouped(m_err, results, remote::Stream::err);
  }
  m_err << failure_report(results, m_ids.empty() ? "hosts" : "workers");
  m_err.flush();
}

} // namespace tpuctl::cli
