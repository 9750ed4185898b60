#include "provision/slice/preflight_report.hpp"

#include <limits>

#include "provision/pool/json_fields.hpp"

namespace tpuctl::provision {

using nlohmann::json;

json preflight_to_json(const agent::PreflightResult& r) {
  json unreachable = json::array();
  for (const auto& p : r.unreachable) {
    unreachable.push_back(json{{"worker", p.worker}, {"address", p.address}, {"error", p.error}});
  }
  json doc{
      {"ok", r.ok()},           {"worker", r.worker},          {"bind_address", r.bind_address},
      {"reached", r.reached},   {"unreachable", unreachable},  {"heard_from", r.heard_from},
      {"clock_ms", r.clock_ms}, {"duration_ms", r.duration_ms}};
  if (!r.bind_error.empty()) {
    doc["bind_error"] = r.bind_error;
  }
  if (r.kernel.ran) {
    json k{{"ok", r.kernel.ok}, {"m", r.kernel.m},     {"n", r.kernel.n},
           {"k", r.kernel.k},   {"isa", r.kernel.isa}, {"mismatches", r.kernel.mismatches}};
    if (!r.kernel.error.empty()) {
      k["error"] = r.kernel.error;
    }
    doc["kernel_check"] = k;
  }
  return doc;
}

namespace {

Error bad_field(const std::string& field) {
  return Error{ErrorKind::failure,
               "preflight output: field '" + field + "' is missing or has the wrong type"};
}

// Thrown by whole() for a number that is no whole number of the field's type.
struct NotWhole {
  std::string field;
};

// `v` as a T, when it is a JSON integer that fits (json_integer); throws NotWhole otherwise.
template <typename T>
T whole(const json& v, const std::string& field) {
  auto i = json_integer(v, std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  if (!i) {
    throw NotWhole{field};
  }
  return static_cast<T>(*i);
}

// A JSON array of worker ids.
std::vector<int> workers(const json& v, const std::string& field) {
  if (!v.is_array()) {
    throw NotWhole{field};
  }
  std::vector<int> out;
  for (const auto& e : v) {
    out.push_back(whole<int>(e, field));
  }
  return out;
}

} // namespace

Expected<agent::PreflightResult> preflight_from_text(const std::string& text) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Error{ErrorKind::failure,
                 "preflight output is not a json object: '" + text.substr(0, 200) + "'"};
  }
  agent::PreflightResult r;
  try {
    r.worker = whole<int>(doc.at("worker"), "worker");
    r.bind_address = doc.at("bind_address").get<std::string>();
    r.bind_error = doc.value("bind_error", std::string());
    r.reached = workers(doc.at("reached"), "reached");
    for (const auto& p : doc.at("unreachable")) {
      r.unreachable.push_back(agent::PeerProblem{whole<int>(p.at("worker"), "unreachable.worker"),
                                                 p.at("address").get<std::string>(),
                                                 p.at("error").get<std::string>()});
    }
    if (doc.contains("heard_from")) {
      r.heard_from = workers(doc["heard_from"], "heard_from");
    }
    r.clock_ms = whole<int64_t>(doc.at("clock_ms"), "clock_ms");
    if (doc.contains("duration_ms")) {
      r.duration_ms = whole<int64_t>(doc["duration_ms"], "duration_ms");
    }
    if (doc.contains("kernel_check")) {
      const auto& k = doc["kernel_check"];
      r.kernel.ran = true;
      r.kernel.ok = k.at("ok").get<bool>();
      for (auto [name, field] : {std::pair{"m", &r.kernel.m}, std::pair{"n", &r.kernel.n},
                                 std::pair{"k", &r.kernel.k}}) {
        if (k.contains(name)) {
          *field = whole<int>(k[name], std::string("kernel_check.") + name);
        }
      }
      r.kernel.isa = k.value("isa", std::string());
      if (k.contains("mismatches")) {
        r.kernel.mismatches = whole<int64_t>(k["mismatches"], "kernel_check.mismatches");
      }
      r.kernel.error = k.value("error", std::string());
    }
  } catch (const NotWhole& e) {
    return Error{ErrorKind::failure, "preflight output: field '" + e.field +
                                         "' is not a whole number in range: '" +
                                         text.substr(0, 200) + "'"};
  } catch (const json::out_of_range& e) {
    std::string what = e.what();
    auto q1 = what.find('\'');
    auto q2 = q1 == std::string::npos ? q1 : what.find('\'', q1 + 1);
    return bad_field(q2 == std::string::npos ? "?" : what.substr(q1 + 1, q2 - q1 - 1));
  } catch (const json::exception&) {
    return Error{ErrorKind::failure,
                 "preflight output: a field has the wrong type: '" + text.substr(0, 200) + "'"};
  }
  return r;
}

std::string preflight_problem(const agent::PreflightResult& r) {
  std::string out;
  auto add = [&out](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  if (!r.bind_error.empty()) {
    add("cannot listen on its own address (" + r.bind_error + ")");
  }
  for (const auto& p : r.unreachable) {
    add("cannot reach worker " + std::to_string(p.worker) + " at " + p.address + " (" + p.error +
        ")");
  }
  if (r.kernel.ran && !r.kernel.ok) {
    add(r.kernel.error.empty()
            ? "kernel check failed: int8 gemm " + std::to_string(r.kernel.m) + "x" +
                  std::to_string(r.kernel.n) + "x" + std::to_string(r.kernel.k) + " (" +
                  r.kernel.isa + ") differs from the reference in " +
                  std::to_string(r.kernel.mismatches) + " elements"
            : "kernel check failed: " + r.kernel.error);
  }
  return out;
}

ClockCheck check_clock(int64_t remote_ms, int64_t local_before_ms, int64_t local_after_ms,
                       std::chrono::milliseconds max_skew) {
  if (local_after_ms < local_before_ms) {
    std::swap(local_after_ms, local_before_ms);
  }
  ClockCheck c;
  int64_t mid = local_before_ms + (local_after_ms - local_before_ms) / 2;
  c.skew_ms = remote_ms - mid;
  c.uncertainty_ms = (local_after_ms - local_before_ms + 1) / 2;
  c.ok = remote_ms >= local_before_ms - max_skew.count() &&
         remote_ms <= local_after_ms + max_skew.count();
  return c;
}

} // namespace tpuctl::provision
