// Who this process is in a multi-controller job, read from the worker environment that
// `tpuctl ssh` and workloads export (provision/slice/worker_env.hpp) with JAX's own arithmetic
// (topology.md b.4): process_id = MEGASCALE_SLICE_ID * workers_per_slice + TPU_WORKER_ID and
// process_count = workers_per_slice * MEGASCALE_NUM_SLICES; the coordinator is
// JAX_COORDINATOR_ADDRESS. Processes form one ring in process order, slice-major, so the hop
// from the last worker of a slice to the first of the next is the cross-slice (DCN) link.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/tcp.hpp"
#include "util/expected.hpp"

namespace tpuctl::agent {

using EnvMap = std::map<std::string, std::string>;

struct SpmdIdentity {
  int worker = 0;  // TPU_WORKER_ID
  int workers = 1; // workers per slice (entries of TPU_WORKER_HOSTNAMES)
  int slice = 0;   // MEGASCALE_SLICE_ID (0 for one slice)
  int slices = 1;  // MEGASCALE_NUM_SLICES (1 when unset)
  int process = 0;
  int processes = 1;
  std::vector<std::string> slice_hostnames; // TPU_WORKER_HOSTNAMES, worker order
  std::string own_host;                     // slice_hostnames[worker]: where this process listens
  HostPort coordinator;                     // JAX_COORDINATOR_ADDRESS

  bool is_coordinator() const { return process == 0; }
};

// The variables parse_spmd_identity reads.
const std::vector<std::string>& spmd_env_names();

// Those variables from this process's environment (unset ones are absent).
EnvMap read_spmd_env();

// Parses and cross-checks the environment. Errors: usage, every problem at once, naming the
// variable and its value: a required variable missing (TPU_WORKER_ID, TPU_WORKER_HOSTNAMES,
// JAX_COORDINATOR_ADDRESS; MEGASCALE_SLICE_ID when MEGASCALE_NUM_SLICES > 1), a number that is
// not one, a worker or slice id out of range, an empty hostname, a malformed coordinator
// address, or TPUCTL_PROCESS_ID / TPUCTL_NUM_PROCESSES disagreeing with JAX's arithmetic.
Expected<SpmdIdentity> parse_spmd_identity(const EnvMap& env);

} // namespace tpuctl::agent
