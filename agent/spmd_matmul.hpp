// `tpuctl agent spmd-matmul`: tpuctl's own multi-controller program. The same command runs on
// every worker of every slice; each process finds its place from the worker environment
// (spmd_env.hpp), meets the others (rendezvous.hpp), computes its block of C = A B from seeded
// shards (seeded_matrix.hpp) with the fast GEMM, all-gathers C around the ring
// (ring_allgather.hpp) and checks the whole C with Freivalds' method. See spmd_matmul.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/rendezvous.hpp"
#include "agent/seeded_matrix.hpp"
#include "agent/spmd_env.hpp"
#include "agent/spmd_wire.hpp"
#include "kernels/gemm.hpp"
#include "util/expected.hpp"

namespace tpuctl::agent {

struct SpmdMatmulOptions {
  int m = 0, n = 0, k = 0;
  kernels::GemmDtype dtype = kernels::GemmDtype::int8;
  std::string mesh; // "data,model"; empty: all processes on the data axis ("P,1")
  std::chrono::milliseconds timeout{30000};
  uint64_t seed = 1;
  int threads = 1;      // GEMM threads per process, also for process 0's single-worker baseline
  bool corrupt = false; // adds 1 to one element of this process's block before the gather
};

// "int8", "bf16" or "fp32". Errors: usage naming `text` and the choices.
Expected<kernels::GemmDtype> parse_spmd_dtype(const std::string& text);

struct Mesh {
  int data = 1;
  int model = 1;
};

// Validates the sizes, threads and timeout, and resolves the mesh for `processes` processes.
// Errors: usage, every problem at once: a size out of 1..65536 or over the memory budget, a
// malformed --mesh, data * model != processes, M not divisible by data, N not divisible by model
// (each naming the values).
Expected<Mesh> validate_spmd_options(const SpmdMatmulOptions& options, int processes);

// The block of C process `process` computes: rows block `row` (of data) x columns block `col`.
struct BlockPlace {
  int row = 0, col = 0;   // block coordinates in the mesh
  int rows = 0, cols = 0; // block size
};
BlockPlace block_place(const Mesh& mesh, int m, int n, int process);

struct SpmdResult {
  SpmdIdentity identity;
  JobSpec job;
  BlockPlace block;
  std::string ring_address; // "host:port" this process listened on for ring traffic
  std::string isa;          // the kernel family of the GEMM (kernels::selected_isa)
  std::string peak_probe;   // the unit that family runs on (kernels::peak_kind_for)
  int threads = 1;
  double generate_ms = 0, compute_ms = 0, comm_ms = 0, check_ms = 0;
  double gops = 0;      // this process's block: 2 * rows * cols * k / compute time
  double peak_gops = 0; // that unit's measured peak at `threads` (kernels::host_peak_gops)
  double mfu = 0;       // gops / peak_gops: the model-FLOP utilization of this process
  ChecksumResult checksum;

  // Process 0 only (has_summary): every process's report and the job's figures.
  bool has_summary = false;
  std::vector<ProcessEntry> table;
  std::vector<WorkerReport> reports;
  double parallel_ms = 0;    // the slowest process's compute + comm
  double single_ms = 0;      // process 0 computing the whole product once
  double aggregate_gops = 0; // 2 m n k / parallel_ms
  double efficiency = 0;     // single_ms / (processes * parallel_ms)
  double aggregate_mfu = 0;  // aggregate_gops / the sum of every process's peak_gops

  // This process's checksum, and on process 0 every process's.
  bool ok() const;
};

// Runs this process's part. Errors: usage (environment, options, mesh); failure when a peer is
// missing or refuses this job (named), or the network breaks (rendezvous, ring, reports). A
// wrong product is not an error: it is checksum.ok == false (and ok() false).
Expected<SpmdResult> run_spmd_matmul(const SpmdMatmulOptions& options, const EnvMap& env);

} // namespace tpuctl::agent
