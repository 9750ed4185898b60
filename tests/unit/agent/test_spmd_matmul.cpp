// spmd-matmul end to end in one test process: every SPMD process is a thread with its own
// worker environment and loopback address (127.0.122.x: this file's block).
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "agent/spmd_matmul.hpp"
#include "util/strings.hpp"

using namespace tpuctl::agent;
using namespace std::chrono_literals;
using tpuctl::kernels::GemmDtype;

TEST_SUITE_BEGIN("agent");

namespace {

bool has(const tpuctl::Error& e, const std::string& text) {
  for (const auto& m : e.all_messages()) {
    if (m.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

SpmdMatmulOptions opts(int m, int n, int k, GemmDtype dtype, const std::string& mesh = "") {
  SpmdMatmulOptions o;
  o.m = m;
  o.n = n;
  o.k = k;
  o.dtype = dtype;
  o.mesh = mesh;
  o.timeout = 20s;
  o.seed = 2024;
  return o;
}

// The worker environment of every process of `slices` slices of `workers` workers, as
// provision/worker_env exports it. Slice s worker w lives on 127.0.122.(s * 16 + w + 1).
std::vector<EnvMap> job_env(int workers, int slices) {
  std::vector<EnvMap> envs;
  for (int s = 0; s < slices; ++s) {
    std::vector<std::string> hosts;
    for (int w = 0; w < workers; ++w) {
      hosts.push_back("127.0.122." + std::to_string(s * 16 + w + 1));
    }
    for (int w = 0; w < workers; ++w) {
      EnvMap env{{"TPU_WORKER_ID", std::to_string(w)},
                 {"TPU_WORKER_HOSTNAMES", tpuctl::util::join(hosts, ",")},
                 {"JAX_COORDINATOR_ADDRESS", "127.0.122.1:8476"},
                 {"TPUCTL_PROCESS_ID", std::to_string(s * workers + w)},
                 {"TPUCTL_NUM_PROCESSES", std::to_string(workers * slices)}};
      if (slices > 1) {
        env["MEGASCALE_NUM_SLICES"] = std::to_string(slices);
        env["MEGASCALE_SLICE_ID"] = std::to_string(s);
        env["MEGASCALE_COORDINATOR_ADDRESS"] = "127.0.122.1";
      }
      envs.push_back(env);
    }
  }
  return envs;
}

struct Run {
  std::vector<std::optional<SpmdResult>> results;
  std::vector<std::string> errors;
};

// Runs every process of the job at once; `corrupt_process` damages that process's block.
Run run_job(const SpmdMatmulOptions& o, const std::vector<EnvMap>& envs, int corrupt_process = -1) {
  Run run;
  run.results.resize(envs.size());
  run.errors.resize(envs.size());
  std::vector<std::thread> threads;
  for (size_t p = 0; p < envs.size(); ++p) {
    threads.emplace_back([&, p] {
      SpmdMatmulOptions mine = o;
      mine.corrupt = static_cast<int>(p) == corrupt_process;
      auto r = run_spmd_matmul(mine, envs[p]);
      if (r) {
        run.results[p] = std::move(*r);
      } else {
        run.errors[p] = r.error().message;
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return run;
}

} // namespace

TEST_CASE("agent::validate_spmd_options: the mesh must cover the processes and divide M and N") {
  auto good = validate_spmd_options(opts(256, 256, 64, GemmDtype::int8), 4);
  REQUIRE(good);
  CHECK(good->data == 4); // default: every process on the data axis
  CHECK(good->model == 1);
  auto mesh = validate_spmd_options(opts(256, 256, 64, GemmDtype::int8, "2,2"), 4);
  REQUIRE(mesh);
  CHECK(mesh->data == 2);
  CHECK(mesh->model == 2);

  auto product = validate_spmd_options(opts(256, 256, 64, GemmDtype::int8, "2,3"), 4);
  REQUIRE(!product);
  CHECK(product.error().kind == tpuctl::ErrorKind::usage);
  CHECK(has(product.error(), "--mesh: '2,3' has 6 positions but the job has 4 processes"));

  auto divide = validate_spmd_options(opts(250, 90, 64, GemmDtype::int8, "4,2"), 8);
  REQUIRE(!divide);
  CHECK(has(divide.error(), "--m: 250 is not divisible by the mesh's data axis 4"));
  CHECK(!has(divide.error(), "--n:")); // 90 = 2 x 45
  auto divide_n = validate_spmd_options(opts(256, 90, 64, GemmDtype::int8, "2,4"), 8);
  REQUIRE(!divide_n);
  CHECK(has(divide_n.error(), "--n: 90 is not divisible by the mesh's model axis 4"));

  auto malformed = validate_spmd_options(opts(0, 256, 64, GemmDtype::int8, "4x1"), 4);
  REQUIRE(!malformed);
  CHECK(has(malformed.error(), "--m: '0' is out of range"));
  CHECK(has(malformed.error(), "--mesh: '4x1' is not data,model"));

  auto huge = validate_spmd_options(opts(65536, 65536, 65536, GemmDtype::fp32), 1);
  REQUIRE(!huge);
  CHECK(has(huge.error(), "needs more than 8 GiB"));
}

TEST_CASE("agent::block_place: process p = (p / model, p % model)") {
  Mesh mesh{2, 4};
  auto b = block_place(mesh, 256, 512, 6);
  CHECK(b.row == 1);
  CHECK(b.col == 2);
  CHECK(b.rows == 128);
  CHECK(b.cols == 128);
}

TEST_CASE("agent::run_spmd_matmul: 4 processes compute, gather and verify C in every dtype") {
  for (auto [dtype, mesh] :
       {std::pair{GemmDtype::int8, std::string("")}, std::pair{GemmDtype::bf16, std::string("2,2")},
        std::pair{GemmDtype::fp32, std::string("1,4")}}) {
    CAPTURE(tpuctl::kernels::to_string(dtype));
    auto run = run_job(opts(96, 128, 80, dtype, mesh), job_env(4, 1));
    for (size_t p = 0; p < 4; ++p) {
      CHECK_MESSAGE(run.errors[p] == "", run.errors[p]);
      REQUIRE(run.results[p]);
      CHECK(run.results[p]->checksum.ok);
      CHECK(run.results[p]->ok());
      CHECK(run.results[p]->identity.process == static_cast<int>(p));
    }
    const auto& zero = *run.results[0];
    REQUIRE(zero.has_summary);
    REQUIRE(zero.reports.size() == 4);
    for (const auto& r : zero.reports) {
      CHECK(r.checksum_ok);
      CHECK(r.compute_ms > 0);
    }
    CHECK(zero.single_ms > 0);
    CHECK(zero.efficiency > 0);
    CHECK(zero.aggregate_gops > 0);
    CHECK(!run.results[1]->has_summary);
  }
}

TEST_CASE("agent::run_spmd_matmul: two slices form one ring across the slice boundary") {
  auto run = run_job(opts(64, 64, 32, GemmDtype::int8, "2,2"), job_env(2, 2));
  for (size_t p = 0; p < 4; ++p) {
    CHECK_MESSAGE(run.errors[p] == "", run.errors[p]);
    REQUIRE(run.results[p]);
    CHECK(run.results[p]->checksum.ok);
  }
  const auto& zero = *run.results[0];
  REQUIRE(zero.table.size() == 4);
  CHECK(zero.table[2].slice == 1);
  CHECK(zero.table[2].worker == 0);
  CHECK(zero.table[2].host == "127.0.122.17"); // learned from the check-in, not the env
  CHECK(run.results[3]->identity.slice == 1);
  CHECK(run.results[3]->identity.process == 3);
}

TEST_CASE("agent::run_spmd_matmul: one damaged block fails the check on every process") {
  auto run = run_job(opts(64, 64, 64, GemmDtype::int8), job_env(4, 1), 2);
  for (size_t p = 0; p < 4; ++p) {
    CHECK_MESSAGE(run.errors[p] == "", run.errors[p]);
    REQUIRE(run.results[p]);
    CHECK(!run.results[p]->checksum.ok);
    CHECK(run.results[p]->checksum.bad_rows == 1); // one element of process 2's rows
    CHECK(!run.results[p]->ok());
  }
}

TEST_CASE("agent::run_spmd_matmul refuses a bad environment or mesh before touching the network") {
  auto no_env = run_spmd_matmul(opts(64, 64, 64, GemmDtype::int8), {});
  REQUIRE(!no_env);
  CHECK(no_env.error().kind == tpuctl::ErrorKind::usage);
  auto envs = job_env(4, 1);
  auto bad_mesh = run_spmd_matmul(opts(64, 64, 64, GemmDtype::int8, "3,1"), envs[1]);
  REQUIRE(!bad_mesh);
  CHECK(bad_mesh.error().kind == tpuctl::ErrorKind::usage);
  CHECK(has(bad_mesh.error(), "use data * model = 4"));
}
