// `tpuctl pool local-up` / `local-down`: a pool of real OpenSSH servers on loopback addresses,
// one sshd per host (remote/local_sshd), registered in the store like any other pool. Running
// local-up again is safe: it restarts any stopped sshd and changes nothing else.
#pragma once

#include <optional>
#include <string>

#include "provision/pool/pools.hpp"

namespace tpuctl::provision {

struct LocalUpOptions {
  std::string pool = "local";
  int hosts = 8;
  std::string generation = "v5e";
  std::optional<int> chips_per_host;
  std::string shape;                      // chips; default: compact_layout() for `hosts`
  std::string address_base = "127.0.0.2"; // host i listens on base + i
  int port = 2222;
  std::string state_dir; // local pools live under <state_dir>/local-pools/<pool>
};

struct LocalUpResult {
  PoolView view;
  int started = 0; // sshd processes started by this call (0 when all were running)
  bool created = false;
};

// Creates (or re-checks) the local pool. Errors: usage for bad options (the address range must
// stay inside 127.0.0.0/8), failure when sshd is missing (naming openssh-server) or will not
// start (naming its log), and when `pool` exists but is not a local pool of `hosts` hosts;
// partial when the pool was recorded but neither its hosts nor its removal could be (a full
// disk under the store), naming it.
Expected<LocalUpResult> local_up(state::StateStore& store, const LocalUpOptions& options);

// In the environment of every session of a local pool's servers: the pool's directory.
inline constexpr const char* k_local_pool_var = "TPUCTL_LOCAL_POOL";

struct LocalDownResult {
  int stopped = 0;
  int processes = 0;      // started through its servers and still running: stopped too
  int hosts = 0;          // in the store's pool record (0 when found from the disk)
  bool from_disk = false; // the store had no such pool: its servers were found from the disk
  std::string root;       // the pool directory
  std::string removed;    // the pool's directory, once removed with its keys, configs and agents
};

// Stops every sshd of the local pool by PID, then everything started through them (one pass
// over this machine's processes for k_local_pool_var, whichever host started it: nothing a
// local pool ran outlives it), deletes the pool's records and removes its
// directory (local-pools/NAME/ under the state directory: host and client keys, known_hosts,
// sshd configs, each host's workdir with the agents). Refused while hosts are claimed unless
// `force`. When the store has no such pool (it was reset or replaced, or its file deleted with
// the pool directory) and `state_dir` is given, the pool's servers are found from the disk
// instead (local_down_from_disk). Errors: not_found (neither the store nor the disk knows the
// pool), or usage when the pool is not a local pool.
Expected<LocalDownResult> local_down(state::StateStore& store, const std::string& pool, bool force,
                                     const std::string& state_dir = "");

// Stops the sshd servers of local pool `pool` under <state_dir>/local-pools/<pool> without the
// store: every listener whose command line names a configuration in that directory (found in
// /proc, so even a directory deleted since is found). Returns how many were stopped (0: none).
Expected<LocalDownResult> local_down_from_disk(const std::string& pool,
                                               const std::string& state_dir);

// "127.0.0.2" + 3 -> "127.0.0.5". Error (usage) when the result leaves 127.0.0.0/8.
Expected<std::string> loopback_address(const std::string& base, int offset);

} // namespace tpuctl::provision
