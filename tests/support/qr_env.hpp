// A scratch tpuctl "machine" for integration tests of queued resources, slices and workloads: its
// own HOME and XDG directories, a SQLite store in it and a local pool of real sshd servers on a
// loopback block the test file owns. The destructor stops the pool and kills every background
// tpuctl (drivers, controllers) that carries the scratch directory in its environment.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/background.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/scratch_mounts.hpp"
#include "util/process.hpp"

namespace tpuctl::test {

struct QrEnv {
  TempDir dir;
  std::map<std::string, std::string> vars;
  // With state_disk_bytes: the state directory (store and local pool) on a tmpfs of that size,
  // when the host allows mounting one (else null, and disk_why says why).
  std::unique_ptr<ScratchDisk> disk;
  std::string disk_why;

  // `shape`: the pool's extent in chips; empty for local-up's compact default (8 v5e hosts:
  // 8x4 chips). Placement never rotates a slice, so a v5litepod-32 (4x8) needs "4x8".
  // `state_url`: the store (TPUCTL_STATE, e.g. an etcd:// URL); empty: SQLite in the scratch dir.
  // `extra_vars`: more of every command's environment (say, TPUCTL_ETCD_USER and its password).
  QrEnv(int hosts, const std::string& address_base, const std::string& shape = "",
        uint64_t state_disk_bytes = 0, const std::string& state_url = "",
        const std::map<std::string, std::string>& extra_vars = {});
  ~QrEnv();
  QrEnv(const QrEnv&) = delete;
  QrEnv& operator=(const QrEnv&) = delete;

  util::ProcessResult run(std::vector<std::string> args) const;
  // Runs with `extra` added to the environment (TPUCTL_FAILPOINT, ...).
  util::ProcessResult run_with(std::vector<std::string> args,
                               const std::map<std::string, std::string>& extra) const;
  // Starts tpuctl in the background (output in the scratch directory, files named by `tag`).
  std::unique_ptr<Background> start(std::vector<std::string> args, const std::string& tag,
                                    const std::map<std::string, std::string>& extra = {}) const;
  // Runs with `--format json`, requires exit 0 and parses stdout.
  nlohmann::json run_json(std::vector<std::string> args) const;
  nlohmann::json describe(const std::string& id) const;
  // host -> owner of every claimed host of the pool.
  nlohmann::json claims() const;
  std::filesystem::path pool_dir() const;
  // The SQLite store's file.
  std::filesystem::path store_path() const;
};

// Every worker's host of a described queued resource, node by node.
std::vector<std::string> worker_hosts(const nlohmann::json& qr);

} // namespace tpuctl::test
