// spmd-matmul: one SPMD step, C = A B on a mesh of processes, the way a TPU pod runs a sharded
// matmul, with TCP in place of ICI/DCN.
//
// Dataflow, for P processes on a (data, model) mesh (process p at (p / model, p % model), model
// fastest, as jax's device mesh reshapes devices):
//   1. Place: process p = (i, j) owns C's rows block i (M / data rows) x columns block j
//      (N / model columns). It needs A's rows block i (M/data x K) and B's columns block j
//      (K x N/model), and nothing else: with K unsharded, the blocks are independent.
//   2. Rendezvous: every process checks in with global process 0 and learns every process's
//      ring address (rendezvous.cpp); then each connects to its ring neighbours.
//   3. Generate: each process draws its shards of A and B from the seed (seeded_matrix.cpp);
//      no operand crosses the network.
//   4. Compute: one GEMM of (M/data) x (N/model) x K with the fast kernel (kernels/gemm.hpp).
//   5. Gather: a ring all-gather of the P blocks of C, P-1 steps, each process sending and
//      receiving one block per step (ring_allgather.cpp). Every process then holds all of C.
//   6. Check: each process verifies the whole gathered C with Freivalds' method against the
//      seed's A and B, without the full GEMM: a block computed wrong, sent to the wrong place or
//      damaged on the way fails the check everywhere.
//   7. Report: each process sends its timings and verdict to process 0, which then (alone, so
//      nothing competes with it) times the whole product once with the same kernel and threads.
//      parallel time = the slowest process's compute + comm; aggregate GOP/s = 2MNK / parallel
//      time; efficiency = single time / (P x parallel time), 1.0 being perfect scaling.
#include "agent/spmd_matmul.hpp"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "agent/ring_allgather.hpp"
#include "kernels/peak_probe.hpp"
#include "util/strings.hpp"

namespace tpuctl::agent {

namespace {

using kernels::GemmDtype;
using std::chrono::milliseconds;

constexpr int k_max_dim = 65536;
constexpr double k_max_bytes = 8.0 * (1ull << 30);
constexpr milliseconds k_failure_report{1000};

double ms_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

// The kernel and checker of one dtype (In: operand type, Out: C's type).
template <typename In, typename Out>
struct Kernel {
  void (*fill)(uint64_t, MatrixId, int, int, int, int, In*);
  Status (*gemm)(int, int, int, const In*, int, const In*, int, Out*, int,
                 const kernels::GemmOptions&);
  ChecksumResult (*check)(uint64_t, int, int, int, const Out*, int);
};

// An untimed 64 x 64 x 64 product first, so that neither timed run pays for first-call costs
// (code paged in, CPU dispatch, thread start-up) that the other does not.
template <typename In, typename Out>
Status warm_up(const Kernel<In, Out>& kn, const kernels::GemmOptions& options) {
  constexpr int s = 64;
  std::vector<In> a(s * s), b(s * s);
  std::vector<Out> c(s * s);
  kn.fill(0, MatrixId::a, 0, 0, s, s, a.data());
  kn.fill(0, MatrixId::b, 0, 0, s, s, b.data());
  return kn.gemm(s, s, s, a.data(), s, b.data(), s, c.data(), s, options);
}

// Steps 3-6 for this process; fills the timings and the checksum of `res`.
template <typename In, typename Out>
Status compute_gather_check(const Kernel<In, Out>& kn, const SpmdMatmulOptions& o, RingLinks& ring,
                            SpmdResult& res) {
  const JobSpec& job = res.job;
  const BlockPlace& b = res.block;
  const size_t mb = static_cast<size_t>(b.rows), nb = static_cast<size_t>(b.cols);
  const size_t k = static_cast<size_t>(job.k), block = mb * nb;
  kernels::GemmOptions gemm_options;
  gemm_options.threads = o.threads;

  auto t0 = SteadyClock::now();
  std::vector<In> a(mb * k), bm(k * nb);
  kn.fill(job.seed, MatrixId::a, b.row * b.rows, 0, b.rows, job.k, a.data());
  kn.fill(job.seed, MatrixId::b, 0, b.col * b.cols, job.k, b.cols, bm.data());
  std::vector<Out> blocks(block * static_cast<size_t>(job.processes));
  Out* mine = blocks.data() + block * static_cast<size_t>(res.identity.process);
  res.generate_ms = ms_since(t0);

  TPUCTL_TRY(warm_up(kn, gemm_options));
  auto t1 = SteadyClock::now();
  TPUCTL_TRY(kn.gemm(b.rows, b.cols, job.k, a.data(), job.k, bm.data(), b.cols, mine, b.cols,
                     gemm_options));
  res.compute_ms = ms_since(t1);
  res.gops = 2.0 * static_cast<double>(block) * static_cast<double>(k) /
             std::max(res.compute_ms, 1e-6) / 1e6;
  if (o.corrupt) {
    mine[block / 2] += 1;
  }

  auto t2 = SteadyClock::now();
  TPUCTL_TRY(ring_allgather(ring, job, reinterpret_cast<uint8_t*>(blocks.data()),
                            block * sizeof(Out), o.timeout));
  res.comm_ms = ms_since(t2);

  auto t3 = SteadyClock::now();
  std::vector<Out> c(static_cast<size_t>(job.m) * static_cast<size_t>(job.n));
  const Mesh mesh{job.data, job.model};
  for (int q = 0; q < job.processes; ++q) {
    BlockPlace place = block_place(mesh, job.m, job.n, q);
    const Out* src = blocks.data() + block * static_cast<size_t>(q);
    for (size_t r = 0; r < mb; ++r) {
      size_t row = static_cast<size_t>(place.row) * mb + r;
      std::memcpy(c.data() + row * static_cast<size_t>(job.n) + static_cast<size_t>(place.col) * nb,
                  src + r * nb, nb * sizeof(Out));
    }
  }
  res.checksum = kn.check(job.seed, job.m, job.n, job.k, c.data(), job.n);
  res.check_ms = ms_since(t3);
  return ok();
}

// Process 0's baseline: the whole product once, same kernel and threads. Returns milliseconds.
template <typename In, typename Out>
Expected<double> time_single(const Kernel<In, Out>& kn, const SpmdMatmulOptions& o,
                             const JobSpec& job) {
  const size_t m = static_cast<size_t>(job.m), n = static_cast<size_t>(job.n),
               k = static_cast<size_t>(job.k);
  std::vector<In> a(m * k), b(k * n);
  kn.fill(job.seed, MatrixId::a, 0, 0, job.m, job.k, a.data());
  kn.fill(job.seed, MatrixId::b, 0, 0, job.k, job.n, b.data());
  std::vector<Out> c(m * n);
  kernels::GemmOptions gemm_options;
  gemm_options.threads = o.threads;
  TPUCTL_TRY(warm_up(kn, gemm_options));
  auto t0 = SteadyClock::now();
  TPUCTL_TRY(kn.gemm(job.m, job.n, job.k, a.data(), job.k, b.data(), job.n, c.data(), job.n,
                     gemm_options));
  return ms_since(t0);
}

const Kernel<int8_t, int32_t> k_s8{&fill_block_s8, &kernels::gemm_s8, &freivalds_check_s8};
const Kernel<kernels::bf16_t, float> k_bf16{&fill_block_bf16, &kernels::gemm_bf16,
                                            &freivalds_check_bf16};
const Kernel<float, float> k_f32{&fill_block_f32, &kernels::gemm_f32, &freivalds_check_f32};

Status compute_step(const SpmdMatmulOptions& o, RingLinks& ring, SpmdResult& res) {
  switch (res.job.dtype) {
  case GemmDtype::int8:
    return compute_gather_check(k_s8, o, ring, res);
  case GemmDtype::bf16:
    return compute_gather_check(k_bf16, o, ring, res);
  case GemmDtype::fp32:
    return compute_gather_check(k_f32, o, ring, res);
  }
  return make_error(ErrorKind::failure, "unknown dtype");
}

Expected<double> single_step(const SpmdMatmulOptions& o, const JobSpec& job) {
  switch (job.dtype) {
  case GemmDtype::int8:
    return time_single(k_s8, o, job);
  case GemmDtype::bf16:
    return time_single(k_bf16, o, job);
  case GemmDtype::fp32:
    return time_single(k_f32, o, job);
  }
  return make_error(ErrorKind::failure, "unknown dtype");
}

Expected<Mesh> parse_mesh(const std::string& text, int processes) {
  if (text.empty()) {
    return Mesh{processes, 1};
  }
  auto parts = util::split(text, ',');
  auto bad = usage_error("--mesh: '" + text +
                         "' is not data,model (two positive integers whose product is the "
                         "number of processes, e.g. " +
                         std::to_string(processes) + ",1)");
  if (parts.size() != 2) {
    return bad;
  }
  auto d = util::parse_int(parts[0], "--mesh", 1, k_max_dim);
  auto m = util::parse_int(parts[1], "--mesh", 1, k_max_dim);
  if (!d || !m) {
    return bad;
  }
  return Mesh{static_cast<int>(*d), static_cast<int>(*m)};
}

} // namespace

Expected<GemmDtype> parse_spmd_dtype(const std::string& text) {
  if (text == "int8") {
    return GemmDtype::int8;
  }
  if (text == "bf16") {
    return GemmDtype::bf16;
  }
  if (text == "fp32") {
    return GemmDtype::fp32;
  }
  return usage_error("--dtype: '" + text + "' is not a GEMM dtype (use int8, bf16 or fp32)");
}

Expected<Mesh> validate_spmd_options(const SpmdMatmulOptions& o, int processes) {
  ErrorList errors;
  auto range = [&](const char* flag, long long v, long long lo, long long hi) {
    if (v < lo || v > hi) {
      errors.add(usage_error(std::string(flag) + ": '" + std::to_string(v) +
                             "' is out of range (use " + std::to_string(lo) + " to " +
                             std::to_string(hi) + ")"));
    }
  };
  range("--m", o.m, 1, k_max_dim);
  range("--n", o.n, 1, k_max_dim);
  range("--k", o.k, 1, k_max_dim);
  range("--threads", o.threads, 0, 256);
  if (o.timeout.count() <= 0) {
    errors.add(usage_error("--timeout: must be longer than 0 (e.g. 30s)"));
  }
  double in = o.dtype == GemmDtype::int8 ? 1 : (o.dtype == GemmDtype::bf16 ? 2 : 4);
  double bytes =
      (static_cast<double>(o.m) * o.k + static_cast<double>(o.k) * o.n) * in + 3.0 * o.m * o.n * 4;
  if (errors.empty() && bytes > k_max_bytes) {
    errors.add(usage_error("--m/--n/--k: " + std::to_string(o.m) + " x " + std::to_string(o.n) +
                           " x " + std::to_string(o.k) +
                           " needs more than 8 GiB per process (operands, the gathered C and "
                           "its blocks): use smaller sizes"));
  }
  auto mesh = parse_mesh(o.mesh, processes);
  if (!mesh) {
    errors.add(mesh.error());
  } else {
    const std::string mesh_text = std::to_string(mesh->data) + "," + std::to_string(mesh->model);
    if (static_cast<long long>(mesh->data) * mesh->model != processes) {
      errors.add(usage_error("--mesh: '" + mesh_text + "' has " +
                             std::to_string(mesh->data * mesh->model) +
                             " positions but the job "
                             "has " +
                             std::to_string(processes) +
                             " processes (workers per slice x slices): use data * model = " +
                             std::to_string(processes)));
    }
    if (o.m >= 1 && o.m % mesh->data != 0) {
      errors.add(usage_error("--m: " + std::to_string(o.m) +
                             " is not divisible by the mesh's data axis " +
                             std::to_string(mesh->data) + " (--mesh " + mesh_text +
                             "): use a multiple of " + std::to_string(mesh->data)));
    }
    if (o.n >= 1 && o.n % mesh->model != 0) {
      errors.add(usage_error("--n: " + std::to_string(o.n) +
                             " is not divisible by the mesh's model axis " +
                             std::to_string(mesh->model) + " (--mesh " + mesh_text +
                             "): use a multiple of " + std::to_string(mesh->model)));
    }
  }
  if (!errors.empty()) {
    return errors.combined();
  }
  return *mesh;
}

BlockPlace block_place(const Mesh& mesh, int m, int n, int process) {
  BlockPlace b;
  b.row = process / mesh.model;
  b.col = process % mesh.model;
  b.rows = m / mesh.data;
  b.cols = n / mesh.model;
  return b;
}

bool SpmdResult::ok() const {
  if (!checksum.ok) {
    return false;
  }
  return std::all_of(reports.begin(), reports.end(),
                     [](const WorkerReport& r) { return r.checksum_ok && r.error.empty(); });
}

Expected<SpmdResult> run_spmd_matmul(const SpmdMatmulOptions& o, const EnvMap& env) {
  TPUCTL_TRY_ASSIGN(SpmdIdentity id, parse_spmd_identity(env));
  TPUCTL_TRY_ASSIGN(Mesh mesh, validate_spmd_options(o, id.processes));
  SpmdResult res;
  res.identity = id;
  res.job = JobSpec{o.seed, o.m, o.n, o.k, o.dtype, mesh.data, mesh.model, id.processes};
  res.block = block_place(mesh, o.m, o.n, id.process);
  res.threads = o.threads;
  const kernels::GemmIsa isa = kernels::selected_isa(o.dtype).value_or(kernels::GemmIsa::portable);
  const kernels::PeakKind unit = kernels::peak_kind_for(o.dtype, isa);
  res.isa = kernels::to_string(isa);
  res.peak_probe = kernels::to_string(unit);
  const JobSpec& job = res.job;

  TPUCTL_TRY_ASSIGN(Socket listener, listen_on(id.own_host, 0));
  const int ring_port = local_port(listener);
  res.ring_address = join_host_port(id.own_host, ring_port);
  if (id.is_coordinator() && id.processes > 1 && id.coordinator.host != id.own_host) {
    spdlog::warn("spmd-matmul: JAX_COORDINATOR_ADDRESS names '{}' but process 0 listens on its "
                 "own address '{}' (TPU_WORKER_HOSTNAMES[{}])",
                 id.coordinator.host, id.own_host, id.worker);
  }
  spdlog::debug("spmd-matmul: process {} of {} (slice {}, worker {}), {}, ring at {}", id.process,
                id.processes, id.slice, id.worker, describe_job(job), res.ring_address);
  RendezvousOptions ro{job, ProcessEntry{id.process, id.slice, id.worker, id.own_host, ring_port},
                       id.slice_hostnames, id.coordinator, o.timeout};
  TPUCTL_TRY_ASSIGN(Rendezvous rv, rendezvous(ro));
  // After the rendezvous a failing worker tells process 0 why before it gives up.
  auto fail = [&](Error e) -> Error {
    if (!id.is_coordinator()) {
      WorkerReport r;
      r.process = id.process;
      r.error = e.message;
      (void)send_report(rv, job, r, k_failure_report);
    }
    return e;
  };
  auto ring = connect_ring(job, id.process, rv.table, listener, o.timeout);
  if (!ring) {
    return fail(ring.error());
  }
  listener.close();
  if (auto st = compute_step(o, *ring, res); !st) {
    return fail(st.error());
  }
  spdlog::debug("spmd-matmul: process {}: compute {:.3f} ms, comm {:.3f} ms, checksum {}",
                id.process, res.compute_ms, res.comm_ms, res.checksum.ok ? "ok" : "FAILED");

  // The unit's peak, probed after the work (about 60 ms, once per process) so it delays no peer.
  res.peak_gops = kernels::host_peak_gops(unit, o.threads);
  res.mfu = res.peak_gops > 0 ? res.gops / res.peak_gops : 0;
  WorkerReport own{id.process, res.compute_ms, res.comm_ms, res.gops, res.checksum.ok,
                   "",         res.peak_gops};
  if (!id.is_coordinator()) {
    if (auto st = send_report(rv, job, own, o.timeout); !st) {
      spdlog::warn("spmd-matmul: could not report to the coordinator: {}", st.error().message);
    }
    return res;
  }
  TPUCTL_TRY_ASSIGN(res.reports, collect_reports(rv, job, own, o.timeout));
  res.table = rv.table;
  res.has_summary = true;
  for (const auto& r : res.reports) {
    res.parallel_ms = std::max(res.parallel_ms, r.compute_ms + r.comm_ms);
  }
  TPUCTL_TRY_ASSIGN(res.single_ms, single_step(o, job));
  double ops = 2.0 * job.m * static_cast<double>(job.n) * job.k;
  res.aggregate_gops = ops / std::max(res.parallel_ms, 1e-6) / 1e6;
  res.efficiency = res.single_ms / (job.processes * std::max(res.parallel_ms, 1e-6));
  double peaks = 0;
  for (const auto& r : res.reports) {
    peaks += r.peak_gops;
  }
  res.aggregate_mfu = peaks > 0 ? res.aggregate_gops / peaks : 0;
  return res;
}

} // namespace tpuctl::agent
