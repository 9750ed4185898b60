#include "tests/support/qr_env.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <thread>

#include <doctest/doctest.h>

#include "tests/support/local_pool_fixture.hpp"

namespace tpuctl::test {

using nlohmann::json;

QrEnv::QrEnv(int hosts, const std::string& address_base, const std::string& shape,
             uint64_t state_disk_bytes, const std::string& state_url,
             const std::map<std::string, std::string>& extra_vars)
    : vars(extra_vars) {
  vars["HOME"] = dir.path().string();
  if (!state_url.empty()) {
    vars["TPUCTL_STATE"] = state_url;
  }
  vars["XDG_STATE_HOME"] = (dir.path() / "state").string();
  if (state_disk_bytes > 0) {
    disk = ScratchDisk::mount(dir.path() / "state", state_disk_bytes, disk_why);
  }
  vars["XDG_CONFIG_HOME"] = (dir.path() / "config").string();
  std::vector<std::string> args{"pool",         "local-up", "--hosts",        std::to_string(hosts),
                                "--generation", "v5e",      "--address-base", address_base,
                                "--port",       "2222"};
  if (!shape.empty()) {
    args.insert(args.end(), {"--shape", shape});
  }
  auto up = run(args);
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
}

QrEnv::~QrEnv() {
  if (disk) {
    disk->unfill(); // local-down records the pool's removal
  }
  // Every test of a scratch machine ends with this check: local-down stops what ran through the
  // pool's servers, and tpuctl's detached drivers and monitors end by themselves once their
  // pool is gone. Whatever still carries the scratch directory after that is a leak.
  run({"--pool", "local", "pool", "local-down", "--force"});
  const std::string what = kill_leftovers(dir.path().string());
  CHECK_MESSAGE(what.empty(), ("tpuctl left processes running after the test:" + what));
}

util::ProcessResult QrEnv::run(std::vector<std::string> args) const {
  return run_tpuctl(args, vars);
}

util::ProcessResult QrEnv::run_with(std::vector<std::string> args,
                                    const std::map<std::string, std::string>& extra) const {
  auto env = vars;
  for (const auto& [k, v] : extra) {
    env[k] = v;
  }
  return run_tpuctl(args, env);
}

std::unique_ptr<Background> QrEnv::start(std::vector<std::string> args, const std::string& tag,
                                         const std::map<std::string, std::string>& extra) const {
  auto env = vars;
  for (const auto& [k, v] : extra) {
    env[k] = v;
  }
  args.insert(args.begin(), tpuctl_binary());
  return std::make_unique<Background>(
      args, env, std::vector<std::string>{"TPUCTL_STATE", "TPUCTL_POOL"}, dir.path(), tag);
}

json QrEnv::run_json(std::vector<std::string> args) const {
  args.push_back("--format");
  args.push_back("json");
  auto r = run(args);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return json::parse(r.out);
}

json QrEnv::describe(const std::string& id) const {
  return run_json({"qr", "describe", id});
}

json QrEnv::claims() const {
  json out = json::object();
  for (const auto& h : run_json({"pool", "hosts"})) {
    if (!h["claimed_by"].get<std::string>().empty()) {
      out[h["name"].get<std::string>()] = h["claimed_by"];
    }
  }
  return out;
}

std::filesystem::path QrEnv::pool_dir() const {
  return dir.path() / "state" / "tpuctl" / "local-pools" / "local";
}

std::filesystem::path QrEnv::store_path() const {
  return dir.path() / "state" / "tpuctl" / "state.db";
}

std::vector<std::string> worker_hosts(const json& qr) {
  std::vector<std::string> hosts;
  for (const auto& n : qr["nodes"]) {
    for (const auto& w : n["workers"]) {
      hosts.push_back(w["host"]);
    }
  }
  return hosts;
}

} // namespace tpuctl::test
