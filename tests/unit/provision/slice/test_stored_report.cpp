// What a queued-resource record keeps of a provisioning report: everything for small slices, a
// bounded summary for large ones (a pod's whole report would not fit in one etcd value).
#include <doctest/doctest.h>

#include "provision/slice/provisioning.hpp"
#include "state/store.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;
using nlohmann::json;

namespace {

// A report of `n` workers as provision_slice writes it, each listing every peer it reached.
ProvisionReport report_of(int n, int failed_worker = -1) {
  ProvisionReport r;
  r.ok = failed_worker < 0;
  r.agent_sha256 = std::string(64, 'a');
  json all_peers = json::array();
  for (int i = 0; i < n; ++i) {
    all_peers.push_back(i);
  }
  for (int i = 0; i < n; ++i) {
    json facts{{"os", "Debian GNU/Linux 12 (bookworm)"},
               {"cores", 224},
               {"simd", json::array({"avx2", "avx512f", "amx_int8"})},
               {"memory_available_mib", 900000 + i},
               {"hostname", "w" + std::to_string(i)}};
    json preflight{{"ok", i != failed_worker},
                   {"worker", i},
                   {"reached", all_peers},
                   {"heard_from", all_peers},
                   {"clock", {{"skew_ms", i % 7 == 0 ? -40 : 3}}}};
    r.workers.push_back(
        json{{"node", "pod"},
             {"worker", i},
             {"host", "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256)},
             {"agent_path", "/home/tpu/.tpuctl/agent/" + r.agent_sha256 + "/tpuctl"},
             {"unchanged", false},
             {"facts", facts},
             {"preflight", preflight}});
  }
  return r;
}

} // namespace

TEST_CASE("stored report: a small slice keeps every worker's report as it is") {
  auto r = report_of(16);
  CHECK(to_stored_json(r) == to_json(r));
}

TEST_CASE("stored report: a 2,304-worker report is summarized into a few KB") {
  auto r = report_of(2304, 1234);
  size_t whole = state::to_text(to_json(r)).size();
  json stored = to_stored_json(r);
  size_t kept = state::to_text(stored).size();
  MESSAGE("2,304 workers: whole report " << whole << " bytes, stored " << kept << " bytes");
  CHECK(whole > 10'000'000); // every worker lists every peer: quadratic
  CHECK(kept < 64 * 1024);
  CHECK(stored["workers_total"] == 2304);
  REQUIRE(stored["workers"].size() == 1); // only the failed worker is listed
  CHECK(stored["workers"][0]["worker"] == 1234);
  CHECK(stored["preflight_summary"]["passed"] == 2303);
  CHECK(stored["preflight_summary"]["failed"] == 1);
  CHECK(stored["preflight_summary"]["max_skew_ms"] == 40);
  CHECK(stored["facts_common"]["cores"] == 224);
  CHECK(stored["facts_common"]["simd"].size() == 3);
  CHECK(!stored["facts_common"].contains("hostname")); // differs per worker
  CHECK(stored["agent_sha256"] == r.agent_sha256);
}

TEST_CASE("stored report: at most 64 failed workers are listed") {
  auto r = report_of(300);
  for (auto& w : r.workers) {
    w["preflight"]["ok"] = false;
  }
  json stored = to_stored_json(r);
  CHECK(stored["workers"].size() == k_report_workers_kept);
  CHECK(stored["preflight_summary"]["failed"] == 300);
}
