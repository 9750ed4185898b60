// The preflight's JSON (the interface between `tpuctl agent preflight` on a worker and the
// provisioning controller) and the checks the controller makes on what comes back: peers, the
// kernel check, and the clock skew bounded by the SSH round trip.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/preflight.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

// {"ok", "worker", "bind_address", "bind_error"?, "reached": [..], "unreachable": [{worker,
//  address, error}], "heard_from": [..], "clock_ms", "duration_ms", "kernel_check"?: {ok, m, n,
//  k, isa, mismatches, error?}}. Never fails.
nlohmann::json preflight_to_json(const agent::PreflightResult& result);

// Parses the agent's output (one JSON object). Errors: failure naming the missing or mistyped
// field, or saying the text is not JSON (with its first 200 characters).
Expected<agent::PreflightResult> preflight_from_text(const std::string& text);

// Why a worker's preflight failed, lowercase, e.g. "cannot reach worker 0 at 127.0.70.2:8476
// (connection refused)"; several problems joined by "; ". Empty when result.ok().
std::string preflight_problem(const agent::PreflightResult& result);

// A remote clock reading taken at an unknown local instant in [local_before_ms, local_after_ms]
// (the SSH call's start and the arrival of its output).
struct ClockCheck {
  bool ok = true;
  int64_t skew_ms = 0;        // remote - midpoint of the interval
  int64_t uncertainty_ms = 0; // half the interval: the true skew is skew_ms +- this
};
// ok unless the remote clock is more than max_skew outside the interval: only a skew that is
// certain fails, however slow the SSH call was. Never fails.
ClockCheck check_clock(int64_t remote_ms, int64_t local_before_ms, int64_t local_after_ms,
                       std::chrono::milliseconds max_skew);

} // namespace tpuctl::provision
