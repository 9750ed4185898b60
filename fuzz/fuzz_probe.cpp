// What `tpuctl pool check` and the preflight read back from remote hosts: /proc/meminfo,
// os-release, `df -Pk` and /proc/cpuinfo text (agent::parse_*), and the preflight agent's JSON
// (provision::preflight_from_text). Input: the remote text. Properties: the text parsers never
// crash and only report SIMD flags tpuctl asks for; an accepted preflight result written back as
// JSON (preflight_to_json) parses to the same result.
#include <set>
#include <string>

#include "agent/probe.hpp"
#include "fuzz/fuzz_check.hpp"
#include "provision/slice/preflight_report.hpp"

using namespace tpuctl;

namespace {

bool same(const agent::PreflightResult& a, const agent::PreflightResult& b) {
  if (a.unreachable.size() != b.unreachable.size()) {
    return false;
  }
  for (size_t i = 0; i < a.unreachable.size(); ++i) {
    const auto &x = a.unreachable[i], &y = b.unreachable[i];
    if (x.worker != y.worker || x.address != y.address || x.error != y.error) {
      return false;
    }
  }
  return a.worker == b.worker && a.bind_address == b.bind_address && a.bind_error == b.bind_error &&
         a.reached == b.reached && a.heard_from == b.heard_from && a.clock_ms == b.clock_ms &&
         a.duration_ms == b.duration_ms && a.kernel.ran == b.kernel.ran &&
         a.kernel.ok == b.kernel.ok && a.kernel.m == b.kernel.m && a.kernel.n == b.kernel.n &&
         a.kernel.k == b.kernel.k && a.kernel.isa == b.kernel.isa &&
         a.kernel.mismatches == b.kernel.mismatches && a.kernel.error == b.kernel.error;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) {
    return 0;
  }
  const std::string text = fuzz::text_of(data, size);
  (void)agent::parse_meminfo(text);
  (void)agent::parse_os_release(text);
  (void)agent::parse_df_free_mib(text);
  static const std::set<std::string> k_known = {
      "sse4_2",   "avx",      "avx2",        "fma",      "f16c",
      "avx512f",  "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16",
      "amx_tile", "amx_int8", "amx_bf16",    "asimd",    "sve"};
  for (const auto& flag : agent::parse_cpu_flags(text)) {
    FUZZ_CHECK(k_known.count(flag) == 1, flag);
  }
  if (auto r = provision::preflight_from_text(text)) {
    const std::string written = provision::preflight_to_json(*r).dump();
    auto again = provision::preflight_from_text(written);
    FUZZ_CHECK(again.has_value(), text + "\n  written back as " + written + " is rejected");
    FUZZ_CHECK(same(*r, *again), text + "\n  written back as " + written + " reads differently");
  } else {
    FUZZ_CHECK(!r.error().message.empty(), text);
  }
  return 0;
}
