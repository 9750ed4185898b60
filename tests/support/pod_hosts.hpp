// Host records of a tpu7x pod as `pool add-hosts` writes them (~330 bytes each), for tests and
// benchmarks of the state store at pod scale. Header-only, no test framework: bench/ uses it too.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpuctl::test {

inline constexpr int k_pod_hosts = 2304; // a tpu7x-18432 pod: 9,216 chips, 4 a host

// The record of host `i` (0 .. k_pod_hosts-1): name and address 10.2.<i/256>.<i%256>.
inline nlohmann::json pod_host_doc(int i) {
  std::string name = "10.2." + std::to_string(i / 256) + "." + std::to_string(i % 256);
  return nlohmann::json{
      {"name", name},
      {"address", name},
      {"port", 22},
      {"user", "tpu"},
      {"identity_file", "/home/tpu/.local/state/tpuctl/local-pools/pod/client_ed25519"},
      {"known_hosts", ""},
      {"workdir", "/home/tpu/.tpuctl/work/" + name},
      {"coords", nlohmann::json::array({i % 8, (i / 8) % 12, i / 96})},
      {"labels", nlohmann::json::object()},
      {"drain_reason", ""},
      {"added_at_ms", 1795593625852},
      {"local", nullptr}};
}

// The names of hosts [from, to) of the pod.
inline std::vector<std::string> pod_hosts(int from, int to) {
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) {
    out.push_back(pod_host_doc(i)["name"]);
  }
  return out;
}

} // namespace tpuctl::test
