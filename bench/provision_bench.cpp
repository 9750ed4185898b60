// provision_bench: how long provisioning takes on a 64-host slice of real sshd servers.
//
//   provision_bench TPUCTL_BINARY [--runs 3] [--address-base 127.0.72.2]
//
// Starts a local v5e pool of 64 hosts (8x8 hosts, 16x16 chips) in a scratch state directory,
// places one v5litepod-256 on all of it, and per run: removes the agents from every host, times
// a store claim of the 64 hosts (then releases them), runs provision_slice (the first push sends
// the binary to every host), and runs it again (the second push finds every agent in place).
// Prints each run and the medians as JSON lines; stops every sshd before exiting.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provision/local_pool.hpp"
#include "provision/provisioning.hpp"
#include "state/location.hpp"

namespace fs = std::filesystem;
using namespace tpuctl;

namespace {

int64_t median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: provision_bench TPUCTL_BINARY [--runs N] [--address-base A]\n";
    return 2;
  }
  fs::path binary = fs::absolute(argv[1]);
  int runs = 3;
  std::string base = "127.0.72.2";
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--runs") {
      runs = std::atoi(argv[i + 1]);
    } else if (a == "--address-base") {
      base = argv[i + 1];
    }
  }
  char tmpl[] = "/tmp/tpuctl-provision-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  fs::path dir = tmpl;
  auto store = state::open_store("sqlite:" + (dir / "state.db").string());
  if (!store) {
    std::cerr << store.error().message << "\n";
    return 1;
  }
  provision::LocalUpOptions up;
  up.pool = "bench";
  up.hosts = 64;
  up.generation = "v5e";
  up.address_base = base;
  up.state_dir = dir.string();
  auto pool = provision::local_up(**store, up);
  if (!pool) {
    std::cerr << pool.error().message << "\n";
    return 1;
  }
  const auto& view = pool->view;
  provision::QueuedResource qr;
  qr.id = "bench";
  qr.pool = "bench";
  qr.uid = "00000000bench000";
  qr.accelerator_type = "v5litepod-256";
  provision::QrNode node;
  node.id = "bench";
  std::vector<std::string> hosts;
  for (size_t i = 0; i < view.hosts.size(); ++i) {
    const auto& h = view.hosts[i];
    node.workers.push_back(provision::QrWorker{static_cast<int>(i), h.name, h.address, h.coords});
    hosts.push_back(h.name);
  }
  qr.nodes.push_back(node);

  provision::ProvisionOptions opts;
  opts.binary = binary;
  opts.ssh.process_config = false;
  opts.ssh.use_agent = false;
  opts.ssh.connect_timeout = std::chrono::milliseconds(20000);

  std::vector<int64_t> claim, push1, push2, probe, preflight, total1;
  int status = 0;
  for (int r = 0; r < runs && status == 0; ++r) {
    for (const auto& h : view.hosts) {
      std::error_code ec;
      fs::remove_all(fs::path(h.workdir) / "agent", ec);
    }
    int64_t t = steady_ms();
    auto claimed = (*store)->claim_hosts("bench", hosts, "bench-qr");
    claim.push_back(steady_ms() - t);
    if (!claimed || !(*store)->release_hosts("bench", hosts, "bench-qr")) {
      std::cerr << "claim failed\n";
      status = 1;
      break;
    }
    auto first = provision::provision_slice(qr, view, opts);
    auto second = provision::provision_slice(qr, view, opts);
    if (!first || !second || !first->ok || !second->ok) {
      std::cerr << "provisioning failed: "
                << (first ? provision::to_json(*first).dump() : first.error().message) << "\n";
      status = 1;
      break;
    }
    push1.push_back(first->timings.push_ms);
    push2.push_back(second->timings.push_ms);
    probe.push_back(first->timings.probe_ms);
    preflight.push_back(first->timings.preflight_ms);
    total1.push_back(first->timings.total_ms);
    std::cout << nlohmann::json{{"run", r},
                                {"claim_ms", claim.back()},
                                {"first", provision::to_json(*first)["timings"]},
                                {"second", provision::to_json(*second)["timings"]}}
                     .dump()
              << "\n";
  }
  if (status == 0) {
    std::cout << nlohmann::json{{"hosts", view.hosts.size()},
                                {"binary_bytes", fs::file_size(binary)},
                                {"runs", runs},
                                {"median_claim_ms", median(claim)},
                                {"median_push_first_ms", median(push1)},
                                {"median_push_second_ms", median(push2)},
                                {"median_probe_ms", median(probe)},
                                {"median_preflight_ms", median(preflight)},
                                {"median_total_first_ms", median(total1)}}
                     .dump()
              << "\n";
  }
  (void)provision::local_down(**store, "bench", true);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return status;
}
