// The preflight a worker runs before its slice becomes ACTIVE (cli-anchors.md e.6):
// `tpuctl agent preflight --worker N --hostnames a,b,c --port P --timeout D [--calls I,J
// --expects K,L] [--kernel-check]`. Every worker of a slice runs it at the same moment; each one
// proves that it can reach the peers it is given (by default every peer; provisioning gives the
// coordinator, the torus neighbours and one peer per other slice: O(N) links in all), by the
// very address the peers are given in TPU_WORKER_HOSTNAMES, and that those hostnames resolve.
// See preflight.cpp for the protocol.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::agent {

struct PreflightOptions {
  int worker = 0; // this worker's index into hostnames
  // Every worker (of the slice, or of every slice), in order; with links_given, only this
  // worker's and the called peers' entries are needed (the others may be empty).
  std::vector<std::string> hostnames;
  // The links this worker checks (provision/slice/preflight_peers.hpp: the coordinator, its torus
  // neighbours, one peer per other slice): the peers it calls, and those that will call it (it
  // keeps listening until they have). With neither given, every pair (the node's all-pairs).
  bool links_given = false;
  std::vector<int> calls;
  std::vector<int> expects;
  int port = 8476; // the coordinator port every worker listens on
  std::chrono::milliseconds timeout{20000};
  bool kernel_check = false;
  bool corrupt_kernel = false; // see run_kernel_check
};

// A peer this worker could not reach (or a hostname it could not resolve).
struct PeerProblem {
  int worker = 0;
  std::string address; // "host:port" (or the hostname when it did not resolve)
  std::string error;   // e.g. "connection refused", "name not resolved: ..."
};

struct KernelCheckResult {
  bool ran = false;
  bool ok = false;
  int m = 0, n = 0, k = 0;
  std::string isa;          // the int8 kernel family: "amx", "avx512-vnni", "avx2", ...
  long long mismatches = 0; // elements that differ from the reference
  std::string error;        // when the kernel itself refused to run
};

struct PreflightResult {
  int worker = 0;
  std::string bind_address; // "addr:port" this worker listened on
  std::string bind_error;   // non-empty when it could not listen
  std::vector<int> reached; // peers that answered with their own worker id, sorted
  std::vector<PeerProblem> unreachable;
  std::vector<int> heard_from; // peers that connected to this worker, sorted
  int64_t clock_ms = 0;        // this host's wall clock (unix ms) when the check ended
  int64_t duration_ms = 0;
  KernelCheckResult kernel;

  // Bound, every peer reached, and the kernel check (when it ran) passed.
  bool ok() const;
};

// Checks the options: worker in range, at least one hostname, no empty name, port 1..65535,
// timeout > 0. Errors: usage naming every bad value.
Status validate_preflight_options(const PreflightOptions& options);

// Runs the check (see the header essay). Network problems are in the result, never errors.
// Errors: usage (validate_preflight_options).
Expected<PreflightResult> run_preflight(const PreflightOptions& options);

// The one-line hello each side sends: "tpuctl-preflight <worker>\n".
std::string preflight_hello(int worker);
// The worker id in a hello line (without its newline); -1 when the line is not a hello.
int parse_preflight_hello(const std::string& line);

// A small int8 GEMM (m = n = k = 64) through kernels::gemm_s8, compared exactly with
// kernels::reference_gemm_s8. `corrupt` flips one result element first (to test the failure
// path; `TPUCTL_DEBUG_CORRUPT_RESULT=1` in cli/). Never fails: problems are in the result.
KernelCheckResult run_kernel_check(bool corrupt = false);

} // namespace tpuctl::agent
