// The preflight's O(N) links through the real binary on a local pool of real sshd servers
// (block 127.143.x, owned by this file): one link blocked with a real packet filter (iptables
// on loopback, this test's addresses only; removed by the test) fails the request, and the
// failure names both workers and the link: an ICI neighbour link in one slice, and the DCN link
// between two slices of a multislice request.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/machine.hpp"
#include "tests/support/qr_env.hpp"
#include "util/process.hpp"

using nlohmann::json;
using tpuctl::test::QrEnv;

TEST_SUITE_BEGIN("integration");

namespace {

// REJECTs TCP connections from `from` to `to`:8476 (the preflight port) while it lives.
// Where this machine cannot filter packets (no iptables, not root, or a kernel without
// netfilter) the test fails saying so: a skip would be a pass that checked nothing.
struct BlockedLink {
  std::vector<std::string> rule;
  bool active = false;
  BlockedLink(const std::string& from, const std::string& to)
      : rule{"OUTPUT", "-p",     "tcp",           "-s",       from, "-d", to, "--dport", "8476",
             "-j",     "REJECT", "--reject-with", "tcp-reset"} {
    const std::string iptables = tpuctl::util::find_program("iptables");
    REQUIRE_MESSAGE(!iptables.empty(), "this test blocks a link with iptables: install it "
                                       "(scripts/deps.sh does)");
    std::vector<std::string> add{iptables, "-I"};
    add.insert(add.end(), rule.begin(), rule.end());
    auto r = tpuctl::util::run_process(add);
    active = r && r->exit_code == 0;
    // Never a silent pass: without the filter the test could not see what it checks.
    REQUIRE_MESSAGE(active, "iptables cannot add a rule here (this test needs root and "
                            "netfilter, as CI has): "
                                << (r ? r->err : r.error().message));
  }
  ~BlockedLink() {
    if (active) {
      std::vector<std::string> del{tpuctl::util::find_program("iptables"), "-D"};
      del.insert(del.end(), rule.begin(), rule.end());
      (void)tpuctl::util::run_process(del);
    }
  }
};

// worker -> address of node `node` in a dry run of the request (the placement a create makes).
std::vector<std::string> planned(const QrEnv& env, const std::vector<std::string>& create,
                                 size_t node) {
  std::vector<std::string> args = create;
  args.push_back("--dry-run");
  auto plan = env.run_json(args);
  std::vector<std::string> out;
  for (const auto& w : plan["nodes"].at(node)["workers"]) {
    out.push_back(w["address"]);
  }
  return out;
}

} // namespace

TEST_CASE("preflight: a blocked ICI link fails the slice, naming both workers and the link") {
  QrEnv env(8, tpuctl::test::free_address_base("127.143.", 0, 250, 8));
  const std::vector<std::string> create{"qr", "create", "qr-1", "--accelerator-type",
                                        "v5litepod-16"};
  auto hosts = planned(env, create, 0);
  REQUIRE(hosts.size() == 4);
  // Worker 1 at (1,0) and worker 3 at (1,1) are neighbours along y.
  BlockedLink block(hosts[1], hosts[3]);
  auto r = env.run_with(create, {{"TPUCTL_PREFLIGHT_TIMEOUT", "3s"}});
  CHECK(r.exit_code == 1);
  auto qr = env.describe("qr-1");
  CHECK(qr["state"] == "FAILED");
  const std::string message = qr["error"]["message"];
  INFO(message);
  CHECK(message.find("worker qr-1/1@") == 0);
  CHECK(message.find("cannot reach worker qr-1/3@") != std::string::npos);
  CHECK(message.find(hosts[3] + ":8476 over the ICI y link") != std::string::npos);
  CHECK(qr["error"]["code"] == "PREFLIGHT_FAILED");
}

TEST_CASE("preflight: a blocked DCN link fails a multislice request, naming both slices") {
  QrEnv env(8, tpuctl::test::free_address_base("127.143.", 0, 250, 8));
  const std::vector<std::string> create{"qr",           "create",       "ms", "--accelerator-type",
                                        "v5litepod-16", "--node-count", "2"};
  auto slice0 = planned(env, create, 0);
  auto slice1 = planned(env, create, 1);
  REQUIRE(slice0.size() == 4);
  REQUIRE(slice1.size() == 4);
  BlockedLink block(slice0[2], slice1[2]);
  auto r = env.run_with(create, {{"TPUCTL_PREFLIGHT_TIMEOUT", "3s"}});
  CHECK(r.exit_code == 1);
  auto qr = env.describe("ms");
  CHECK(qr["state"] == "FAILED");
  const std::string message = qr["error"]["message"];
  INFO(message);
  CHECK(message.find("worker ms-0/2@") == 0);
  CHECK(message.find("cannot reach worker ms-1/2@") != std::string::npos);
  CHECK(message.find(slice1[2] + ":8476 over the DCN link") != std::string::npos);
}
