#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <doctest/doctest.h>

#include "provision/slice/worker_env.hpp"
#include "tests/support/helpers.hpp"
#include "util/process.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;

namespace {

topology::AcceleratorType type_of(const char* name) {
  auto t = topology::parse_accelerator_type(name);
  REQUIRE(t);
  return *t;
}

std::map<std::string, std::string> as_map(const EnvVars& env) {
  return {env.begin(), env.end()};
}

std::vector<std::string> names_of(const EnvVars& env) {
  std::vector<std::string> out;
  for (const auto& kv : env) {
    out.push_back(kv.first);
  }
  return out;
}

// The worked example of topology.md b.5: queued resource `qr`, two v5p-32 slices.
SliceEnvInput qr_slice(int slice) {
  SliceEnvInput in;
  in.type = type_of("v5p-32");
  in.tpu_name = "qr-" + std::to_string(slice);
  for (int w = 0; w < 4; ++w) {
    in.hostnames.push_back("qr-" + std::to_string(slice) + "-" + std::to_string(w));
  }
  in.slice_id = slice;
  in.num_slices = 2;
  in.megascale_coordinator = "qr-0-0";
  in.agent_dir = "~/.tpuctl/bin";
  return in;
}

SliceEnvInput v5e_slice() {
  SliceEnvInput in;
  in.type = type_of("v5litepod-16");
  in.tpu_name = "node-a";
  in.hostnames = {"node01", "node02", "node03", "node04"};
  return in;
}

std::string message_of(const Expected<EnvVars>& r) {
  REQUIRE(!r);
  std::string all;
  for (const auto& m : r.error().all_messages()) {
    all += m + "\n";
  }
  return all;
}

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs `script` with /bin/sh and returns its stdout.
std::string sh(const std::string& script, const std::map<std::string, std::string>& env = {}) {
  util::ProcessOptions o;
  o.env_set = env;
  auto r = util::run_process({"sh", "-c", script}, o);
  REQUIRE(r);
  INFO("stderr: " << r->err);
  REQUIRE(r->exit_code == 0);
  return r->out;
}

// What the remote shell sees for each name after running `prefix`: one value per name.
std::vector<std::string> values_after(const std::string& prefix,
                                      const std::vector<std::string>& names) {
  std::string script = prefix;
  for (const auto& n : names) {
    script += " printf '%s\\036' \"$" + n + "\";";
  }
  std::string out = sh(script);
  std::vector<std::string> values;
  size_t start = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '\036') {
      values.push_back(out.substr(start, i - start));
      start = i + 1;
    }
  }
  return values;
}

} // namespace

TEST_SUITE_BEGIN("provision");

TEST_CASE("provision::worker_env reproduces the two-slice v5p-32 example of topology.md b.5") {
  auto env = worker_env(qr_slice(1), 2, EnvProfile::torchrun);
  REQUIRE(env);
  auto m = as_map(*env);
  CHECK(m["TPU_ACCELERATOR_TYPE"] == "v5p-32");
  CHECK(m["TPU_TOPOLOGY"] == "2x2x4");
  CHECK(m["TPU_TOPOLOGY_WRAP"] == "false,false,false");
  CHECK(m["TPU_CHIPS_PER_HOST_BOUNDS"] == "2,2,1");
  CHECK(m["TPU_HOST_BOUNDS"] == "1,1,4");
  CHECK(m["TPU_WORKER_ID"] == "2");
  CHECK(m["TPU_WORKER_HOSTNAMES"] == "qr-1-0,qr-1-1,qr-1-2,qr-1-3");
  CHECK(m["TPU_SKIP_MDS_QUERY"] == "1");
  CHECK(m["TPU_NAME"] == "qr-1");
  CHECK(m["MEGASCALE_COORDINATOR_ADDRESS"] == "qr-0-0");
  CHECK(m["MEGASCALE_NUM_SLICES"] == "2");
  CHECK(m["MEGASCALE_SLICE_ID"] == "1");
  CHECK(m["MEGASCALE_PORT"] == "8081");
  CHECK(m["JAX_COORDINATOR_ADDRESS"] == "qr-0-0:8476");
  // JAX's process id 1*4+2 = 6 of 8, restated by the torchrun profile.
  CHECK(m["RANK"] == "6");
  CHECK(m["WORLD_SIZE"] == "8");
  CHECK(m["LOCAL_RANK"] == "0");
  CHECK(m["MASTER_ADDR"] == "qr-0-0");
  CHECK(m["MASTER_PORT"] == "29500");
  CHECK(m["TPUCTL_PROCESS_ID"] == "6");
  CHECK(m["TPUCTL_NUM_PROCESSES"] == "8");
  CHECK(m["TPUCTL_SLICE_ID"] == "1");
  CHECK(m["TPUCTL_NUM_SLICES"] == "2");
  CHECK(m["TPUCTL_NUM_WORKERS"] == "4");
  // One JAX CPU device per chip of the worker (2x2x1), and the Python environment for PATH.
  CHECK(m["JAX_NUM_CPU_DEVICES"] == "4");
  CHECK(m["TPUCTL_PYTHON_ENV"] == "/opt/tpuctl/frameworks");
  CHECK(m.count("PATH") == 0);
  CHECK(m.count("PYTHONPATH") == 0);
  CHECK(m.size() == env->size()); // no name twice
}

TEST_CASE("provision::worker_env keeps the documented variable order") {
  auto env = worker_env(qr_slice(1), 2, EnvProfile::torchrun, {{"MY_FLAG", "x"}});
  REQUIRE(env);
  CHECK(names_of(*env) == std::vector<std::string>{"TPU_WORKER_ID",
                                                   "TPU_WORKER_HOSTNAMES",
                                                   "TPU_ACCELERATOR_TYPE",
                                                   "TPU_TOPOLOGY",
                                                   "TPU_TOPOLOGY_WRAP",
                                                   "TPU_HOST_BOUNDS",
                                                   "TPU_CHIPS_PER_HOST_BOUNDS",
                                                   "TPU_SKIP_MDS_QUERY",
                                                   "TPU_NAME",
                                                   "JAX_COORDINATOR_ADDRESS",
                                                   "JAX_NUM_CPU_DEVICES",
                                                   "MEGASCALE_COORDINATOR_ADDRESS",
                                                   "MEGASCALE_NUM_SLICES",
                                                   "MEGASCALE_SLICE_ID",
                                                   "MEGASCALE_PORT",
                                                   "TPUCTL_WORKER_ID",
                                                   "TPUCTL_NUM_WORKERS",
                                                   "TPUCTL_WORKER_HOSTNAMES",
                                                   "TPUCTL_SLICE_ID",
                                                   "TPUCTL_NUM_SLICES",
                                                   "TPUCTL_PROCESS_ID",
                                                   "TPUCTL_NUM_PROCESSES",
                                                   "TPUCTL_PYTHON_ENV",
                                                   "RANK",
                                                   "WORLD_SIZE",
                                                   "LOCAL_RANK",
                                                   "MASTER_ADDR",
                                                   "MASTER_PORT",
                                                   "MY_FLAG"});
}

TEST_CASE("provision::worker_env gives every worker of a v5litepod-16 its own id and one list") {
  auto in = v5e_slice();
  for (int w = 0; w < 4; ++w) {
    CAPTURE(w);
    auto env = worker_env(in, w, EnvProfile::none);
    REQUIRE(env);
    auto m = as_map(*env);
    CHECK(m["TPU_WORKER_ID"] == std::to_string(w));
    CHECK(m["TPUCTL_WORKER_ID"] == std::to_string(w));
    CHECK(m["TPU_WORKER_HOSTNAMES"] == "node01,node02,node03,node04");
    CHECK(m["TPUCTL_WORKER_HOSTNAMES"] == "node01,node02,node03,node04");
    CHECK(m["TPU_ACCELERATOR_TYPE"] == "v5litepod-16");
    CHECK(m["TPU_TOPOLOGY"] == "4x4");
    CHECK(m["TPU_HOST_BOUNDS"] == "2,2,1");
    CHECK(m["TPU_CHIPS_PER_HOST_BOUNDS"] == "2,2,1");
    CHECK(m["TPU_TOPOLOGY_WRAP"] == "false,false,false");
    CHECK(m["JAX_COORDINATOR_ADDRESS"] == "node01:8476");
    CHECK(m["TPUCTL_PROCESS_ID"] == std::to_string(w));
    CHECK(m["TPUCTL_NUM_PROCESSES"] == "4");
    SUBCASE("a single slice has no MEGASCALE_* and no profile variables") {
      for (const auto& [name, value] : *env) {
        CHECK_MESSAGE(name.rfind("MEGASCALE_", 0) != 0, name);
        CHECK(name != "RANK");
      }
      CHECK(m["TPUCTL_SLICE_ID"] == "0");
      CHECK(m["TPUCTL_NUM_SLICES"] == "1");
    }
  }
}

TEST_CASE("provision::worker_env writes the torus wrap of a full cube in lowercase") {
  SliceEnvInput in;
  in.type = type_of("v5p-128");
  in.tpu_name = "cube";
  for (int w = 0; w < 16; ++w) {
    in.hostnames.push_back("10.0.0." + std::to_string(w + 1));
  }
  auto env = worker_env(in, 15, EnvProfile::none);
  REQUIRE(env);
  auto m = as_map(*env);
  CHECK(m["TPU_TOPOLOGY_WRAP"] == "true,true,true");
  CHECK(m["TPU_TOPOLOGY"] == "4x4x4");
  CHECK(m["TPU_HOST_BOUNDS"] == "2,2,4");
  CHECK(m["JAX_COORDINATOR_ADDRESS"] == "10.0.0.1:8476");
}

TEST_CASE("provision::worker_env brackets an IPv6 coordinator") {
  SliceEnvInput in;
  in.type = type_of("v5litepod-8");
  in.tpu_name = "one";
  in.hostnames = {"::1"};
  auto env = worker_env(in, 0, EnvProfile::none);
  REQUIRE(env);
  CHECK(as_map(*env)["JAX_COORDINATOR_ADDRESS"] == "[::1]:8476");
}

TEST_CASE("provision::worker_env profiles restate the global layout") {
  SUBCASE("slurm on one slice folds the node list") {
    auto env = worker_env(v5e_slice(), 3, EnvProfile::slurm);
    REQUIRE(env);
    auto m = as_map(*env);
    CHECK(m["SLURM_PROCID"] == "3");
    CHECK(m["SLURM_NODEID"] == "3");
    CHECK(m["SLURM_LOCALID"] == "0");
    CHECK(m["SLURM_NTASKS"] == "4");
    CHECK(m["SLURM_NNODES"] == "4");
    CHECK(m["SLURM_JOB_NODELIST"] == "node[01-04]");
    // What JAX's Slurm detection reads (jax.distributed.initialize() with no arguments).
    CHECK(m["SLURM_STEP_NODELIST"] == "node[01-04]");
    CHECK(m["SLURM_STEP_NUM_NODES"] == "4");
    CHECK(m["SLURM_STEP_TASKS_PER_NODE"] == "1(x4)");
    CHECK_FALSE(m["SLURM_JOB_ID"].empty());
    CHECK(m["SLURM_JOB_ID"].find_first_not_of("0123456789") == std::string::npos);
  }
  SUBCASE("slurm gives every worker of every slice one job id, and another job another") {
    auto in = qr_slice(1);
    in.job_hostnames = {"qr-0-0", "qr-0-1", "qr-0-2", "qr-0-3",
                        "qr-1-0", "qr-1-1", "qr-1-2", "qr-1-3"};
    in.slice_uid = "uid-a";
    auto a1 = worker_env(in, 1, EnvProfile::slurm);
    auto a3 = worker_env(in, 3, EnvProfile::slurm);
    auto first = qr_slice(0);
    first.job_hostnames = in.job_hostnames;
    first.slice_uid = "uid-a";
    auto a0 = worker_env(first, 0, EnvProfile::slurm);
    in.slice_uid = "uid-b";
    auto b1 = worker_env(in, 1, EnvProfile::slurm);
    REQUIRE(a1);
    REQUIRE(a3);
    REQUIRE(a0);
    REQUIRE(b1);
    CHECK(as_map(*a1)["SLURM_JOB_ID"] == as_map(*a3)["SLURM_JOB_ID"]);
    CHECK(as_map(*a1)["SLURM_JOB_ID"] == as_map(*a0)["SLURM_JOB_ID"]);
    CHECK(as_map(*a1)["SLURM_JOB_ID"] != as_map(*b1)["SLURM_JOB_ID"]);
    CHECK(as_map(*a1)["SLURM_STEP_NODELIST"] == "qr-0-[0-3],qr-1-[0-3]");
  }
  SUBCASE("slurm and skypilot across slices list every worker, slice 0 first") {
    auto in = qr_slice(1);
    in.job_hostnames = {"qr-0-0", "qr-0-1", "qr-0-2", "qr-0-3",
                        "qr-1-0", "qr-1-1", "qr-1-2", "qr-1-3"};
    auto slurm = worker_env(in, 1, EnvProfile::slurm);
    REQUIRE(slurm);
    CHECK(as_map(*slurm)["SLURM_PROCID"] == "5");
    CHECK(as_map(*slurm)["SLURM_NNODES"] == "8");
    CHECK(as_map(*slurm)["SLURM_JOB_NODELIST"] == "qr-0-[0-3],qr-1-[0-3]");
    auto sky = worker_env(in, 1, EnvProfile::skypilot);
    REQUIRE(sky);
    auto m = as_map(*sky);
    CHECK(m["SKYPILOT_NODE_RANK"] == "5");
    CHECK(m["SKYPILOT_NUM_NODES"] == "8");
    CHECK(m["SKYPILOT_NUM_GPUS_PER_NODE"] == "0");
    CHECK(m["SKYPILOT_NODE_IPS"] ==
          "qr-0-0\nqr-0-1\nqr-0-2\nqr-0-3\nqr-1-0\nqr-1-1\nqr-1-2\nqr-1-3");
  }
  SUBCASE("the coordinator defaults to slice 0 worker 0 on slice 0") {
    auto in = qr_slice(0);
    in.megascale_coordinator.clear();
    auto env = worker_env(in, 0, EnvProfile::torchrun);
    REQUIRE(env);
    CHECK(as_map(*env)["MEGASCALE_COORDINATOR_ADDRESS"] == "qr-0-0");
    CHECK(as_map(*env)["MASTER_ADDR"] == "qr-0-0");
    CHECK(as_map(*env)["RANK"] == "0");
  }
}

TEST_CASE("provision::parse_env_profile accepts the four names and rejects others") {
  CHECK(*parse_env_profile("none") == EnvProfile::none);
  CHECK(*parse_env_profile("torchrun") == EnvProfile::torchrun);
  CHECK(*parse_env_profile("slurm") == EnvProfile::slurm);
  CHECK(*parse_env_profile("skypilot") == EnvProfile::skypilot);
  for (auto p : {EnvProfile::none, EnvProfile::torchrun, EnvProfile::slurm, EnvProfile::skypilot}) {
    CHECK(*parse_env_profile(to_string(p)) == p);
  }
  auto bad = parse_env_profile("mpi");
  REQUIRE(!bad);
  CHECK(bad.error().kind == ErrorKind::usage);
  CHECK(bad.error().message ==
        "env profile 'mpi' is not known: use one of none, torchrun, slurm, skypilot");
}

TEST_CASE("provision::worker_env reports every invalid input") {
  SUBCASE("worker out of range names the worker and the range") {
    auto r = worker_env(v5e_slice(), 4, EnvProfile::none);
    CHECK(r.error().kind == ErrorKind::usage);
    CHECK(message_of(r) == "worker '4' is out of range: a v5litepod-16 slice has workers 0-3\n");
    CHECK(mentions(message_of(worker_env(v5e_slice(), -1, EnvProfile::none)), "worker '-1'"));
  }
  SUBCASE("wrong number of hostnames") {
    auto in = v5e_slice();
    in.hostnames.pop_back();
    CHECK(mentions(message_of(worker_env(in, 0, EnvProfile::none)),
                   "lists 3 worker hostnames but a v5litepod-16 has 4 workers"));
  }
  SUBCASE("a hostname that could carry shell syntax") {
    auto in = v5e_slice();
    in.hostnames[2] = "node;rm";
    CHECK(mentions(message_of(worker_env(in, 0, EnvProfile::none)), "'node;rm'"));
  }
  SUBCASE("slice id and slice count") {
    auto in = qr_slice(1);
    in.slice_id = 2;
    CHECK(mentions(message_of(worker_env(in, 0, EnvProfile::none)),
                   "slice id '2' is out of range: a 2-slice job has slices 0-1"));
    in.num_slices = 0;
    CHECK(mentions(message_of(worker_env(in, 0, EnvProfile::none)), "number of slices '0'"));
  }
  SUBCASE("a later slice without a coordinator") {
    auto in = qr_slice(1);
    in.megascale_coordinator.clear();
    CHECK(
        mentions(message_of(worker_env(in, 0, EnvProfile::none)), "has no megascale coordinator"));
  }
  SUBCASE("a coordinator that is not slice 0 worker 0") {
    auto in = qr_slice(0);
    in.megascale_coordinator = "qr-0-1";
    CHECK(mentions(message_of(worker_env(in, 0, EnvProfile::none)),
                   "megascale coordinator 'qr-0-1' is not slice 0 worker 0 ('qr-0-0')"));
  }
  SUBCASE("job hostnames that do not match the slice") {
    auto in = qr_slice(1);
    in.job_hostnames = {"qr-0-0", "qr-0-1", "qr-0-2", "qr-0-3",
                        "qr-1-0", "qr-1-1", "qr-1-3", "qr-1-2"};
    CHECK(mentions(message_of(worker_env(in, 0, EnvProfile::slurm)),
                   "do not hold slice '1' workers at positions 4-7"));
    in.job_hostnames.pop_back();
    CHECK(mentions(message_of(worker_env(in, 0, EnvProfile::slurm)),
                   "job hostnames list 7 workers but 2 slices of v5p-32 have 8"));
  }
  SUBCASE("slurm and skypilot across slices need the job's hosts") {
    CHECK(mentions(message_of(worker_env(qr_slice(1), 0, EnvProfile::skypilot)),
                   "env profile 'skypilot' needs every worker of all 2 slices"));
  }
  SUBCASE("an empty tpu name") {
    auto in = v5e_slice();
    in.tpu_name.clear();
    CHECK(mentions(message_of(worker_env(in, 0, EnvProfile::none)), "tpu name ''"));
  }
  SUBCASE("an unparsed accelerator type") {
    SliceEnvInput in;
    in.tpu_name = "x";
    CHECK(mentions(message_of(worker_env(in, 0, EnvProfile::none)), "not a parsed slice shape"));
  }
  SUBCASE("several problems at once are all reported") {
    auto in = v5e_slice();
    in.hostnames.pop_back();
    in.tpu_name.clear();
    auto all = message_of(worker_env(in, 9, EnvProfile::none));
    CHECK(mentions(all, "worker '9'"));
    CHECK(mentions(all, "lists 3 worker hostnames"));
    CHECK(mentions(all, "tpu name ''"));
  }
}

TEST_CASE("provision::worker_env lets users tune ports but not change a worker's identity") {
  auto in = qr_slice(1);
  SUBCASE("tunables are replaced in place, new names appended in order") {
    auto env = worker_env(in, 2, EnvProfile::torchrun,
                          {{"MEGASCALE_PORT", "9000"},
                           {"ZED", "1"},
                           {"JAX_COORDINATOR_ADDRESS", "qr-0-0:1234"},
                           {"ALPHA", "2"},
                           {"MASTER_PORT", "1"},
                           {"TPU_SKIP_MDS_QUERY", "true"}});
    REQUIRE(env);
    auto m = as_map(*env);
    CHECK(m["MEGASCALE_PORT"] == "9000");
    CHECK(m["JAX_COORDINATOR_ADDRESS"] == "qr-0-0:1234");
    CHECK(m["MASTER_PORT"] == "1");
    CHECK(m["TPU_SKIP_MDS_QUERY"] == "true");
    auto names = names_of(*env);
    CHECK(names[names.size() - 2] == "ZED");
    CHECK(names.back() == "ALPHA");
    CHECK(names.size() == m.size());
  }
  SUBCASE("JAX's CPU device count is tunable, and TPUCTL_JAX_INIT is the one TPUCTL_ name") {
    auto env = worker_env(in, 2, EnvProfile::none,
                          {{"JAX_NUM_CPU_DEVICES", "2"}, {"TPUCTL_JAX_INIT", "0"}});
    REQUIRE(env);
    CHECK(as_map(*env)["JAX_NUM_CPU_DEVICES"] == "2");
    CHECK(as_map(*env)["TPUCTL_JAX_INIT"] == "0");
    CHECK(jax_init_off(*env));
  }
  SUBCASE("RANK is free to set when no profile sets it") {
    auto env = worker_env(in, 2, EnvProfile::none, {{"RANK", "99"}});
    REQUIRE(env);
    CHECK(as_map(*env)["RANK"] == "99");
  }
  SUBCASE("identity variables, TPUCTL_* and PATH are refused by name") {
    for (const char* name :
         {"TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES", "TPU_NAME", "MEGASCALE_SLICE_ID",
          "TPUCTL_WORKER_ID", "TPUCTL_ANYTHING", "TPUCTL_PYTHON_ENV", "PATH", "RANK",
          "MASTER_ADDR"}) {
      CAPTURE(name);
      auto all = message_of(worker_env(in, 2, EnvProfile::torchrun, {{name, "0"}}));
      CHECK(mentions(all, std::string("environment variable '") + name +
                              "' describes the worker and is set by tpuctl"));
    }
  }
  SUBCASE("bad names, duplicates and NUL bytes are each reported") {
    auto r = worker_env(in, 2, EnvProfile::none,
                        {{"1ABC", "x"},
                         {"A-B", "x"},
                         {"", "x"},
                         {"OK", "1"},
                         {"OK", "2"},
                         {"NUL", std::string("a\0b", 3)}});
    CHECK(r.error().kind == ErrorKind::usage);
    auto all = message_of(r);
    CHECK(mentions(all, "environment name '1ABC' is not valid"));
    CHECK(mentions(all, "environment name 'A-B' is not valid"));
    CHECK(mentions(all, "environment name '' is not valid"));
    CHECK(mentions(all, "environment variable 'OK' is given twice"));
    CHECK(mentions(all, "value of environment variable 'NUL' holds a NUL byte"));
  }
}

TEST_CASE("provision::is_env_name follows the POSIX name rule") {
  CHECK(is_env_name("A"));
  CHECK(is_env_name("_x9"));
  CHECK(is_env_name("TPU_WORKER_ID"));
  CHECK(!is_env_name(""));
  CHECK(!is_env_name("9A"));
  CHECK(!is_env_name("A B"));
  CHECK(!is_env_name("A=B"));
  CHECK(!is_env_name("Ä"));
}

TEST_CASE("provision::env_command_prefix delivers hostile values literally through sh") {
  test::TempDir dir;
  const std::string marker = (dir.path() / "pwned").string();
  const std::vector<std::string> hostile = {
      "'; touch " + marker + " #",
      "$(touch " + marker + ")",
      "`touch " + marker + "`",
      "line one\nline two; touch " + marker,
      "semi;colon && touch " + marker,
      "${HOME} $HOME \\ \"dq\" \\'",
      "-n",
      "--help",
      "ünïcødé ✓ 漢字",
      "",
      "trailing newline\n",
      "'",
      "''\\''",
  };
  EnvVars user;
  std::vector<std::string> names;
  for (size_t i = 0; i < hostile.size(); ++i) {
    user.emplace_back("HOSTILE_" + std::to_string(i), hostile[i]);
    names.push_back("HOSTILE_" + std::to_string(i));
  }
  auto in = qr_slice(1);
  in.tpu_name = "name with 'quote' and $(touch " + marker + ")";
  auto env = worker_env(in, 2, EnvProfile::torchrun, user);
  REQUIRE(env);
  std::string prefix = env_command_prefix(*env, in.agent_dir);
  std::vector<std::string> all_names = names_of(*env);
  auto seen = values_after(prefix, all_names);
  REQUIRE(seen.size() == env->size());
  for (size_t i = 0; i < env->size(); ++i) {
    CAPTURE((*env)[i].first);
    CHECK(seen[i] == (*env)[i].second); // byte for byte, every variable
  }
  CHECK(as_map(*env)["HOSTILE_0"] == hostile[0]); // the user's values really went through
  CHECK(!std::filesystem::exists(marker));

  SUBCASE("one variable at a time, printed with a trailing newline") {
    for (size_t i = 0; i < hostile.size(); ++i) {
      CAPTURE(hostile[i]);
      std::string out = sh(prefix + " printf '%s\\n' \"$HOSTILE_" + std::to_string(i) + "\"");
      CHECK(out == hostile[i] + "\n");
    }
    CHECK(!std::filesystem::exists(marker));
  }
}

TEST_CASE("provision::env_command_prefix gives sh back every byte of arbitrary values") {
  // The property fuzz/fuzz_shell_quote.cpp checks with its own quote reader, here with a real sh:
  // any bytes but NUL, quoted by env_command_prefix (or to_dotenv) and evaluated, come back
  // byte for byte. Values: every byte 1..255 in one, then random lengths and bytes (fixed seed).
  test::TempDir dir;
  std::mt19937 rng(20250609);
  std::vector<std::string> values(1);
  for (int b = 1; b < 256; ++b) {
    values[0] += static_cast<char>(b);
  }
  for (int i = 0; i < 64; ++i) {
    std::string v(std::uniform_int_distribution<size_t>(0, 96)(rng), '\0');
    for (auto& c : v) {
      c = static_cast<char>(std::uniform_int_distribution<int>(1, 255)(rng));
    }
    values.push_back(v);
  }
  EnvVars env;
  for (size_t i = 0; i < values.size(); ++i) {
    env.emplace_back("V" + std::to_string(i), values[i]);
  }
  // Each value goes to its own file, so no separator byte can be confused with a value's.
  auto print_all = [&](const std::string& subdir) {
    std::filesystem::create_directories(dir.path() / subdir);
    std::string script;
    for (const auto& [name, value] : env) {
      script += "printf '%s' \"$" + name + "\" > '" + (dir.path() / subdir / name).string() + "'; ";
    }
    return script;
  };
  auto read_back = [&](const std::string& subdir) {
    for (const auto& [name, value] : env) {
      std::ifstream in(dir.path() / subdir / name, std::ios::binary);
      std::stringstream got;
      got << in.rdbuf();
      CAPTURE(name);
      CHECK(got.str() == value);
    }
  };
  SUBCASE("export prefix") {
    sh(env_command_prefix(env, "") + print_all("prefix"));
    read_back("prefix");
  }
  SUBCASE("dotenv file read with set -a and the dot command") {
    const auto file = dir.path() / "worker.env";
    { std::ofstream(file, std::ios::binary) << to_dotenv(env); }
    sh("set -a; . '" + file.string() + "'; set +a; " + print_all("dotenv"));
    read_back("dotenv");
  }
}

TEST_CASE("provision::env_command_prefix puts the agent directory first in PATH") {
  test::TempDir home;
  EnvVars env = {{"A", "1"}};
  SUBCASE("a ~/ directory expands to the remote home") {
    auto prefix = env_command_prefix(env, "~/.tpuctl/bin");
    CHECK(sh(prefix + "printf '%s' \"$PATH\"",
             {{"HOME", home.path().string()}, {"PATH", "/usr/bin:/bin"}}) ==
          home.path().string() + "/.tpuctl/bin:/usr/bin:/bin");
  }
  SUBCASE("an odd absolute directory stays one literal entry and its program runs") {
    auto bin = home.path() / "it's $(odd) dir";
    std::filesystem::create_directories(bin);
    {
      std::ofstream tool(bin / "tpuctl-probe");
      tool << "#!/bin/sh\necho probe-ran\n";
    }
    std::filesystem::permissions(bin / "tpuctl-probe", std::filesystem::perms::owner_all);
    auto prefix = env_command_prefix(env, bin.string());
    CHECK(sh(prefix + "tpuctl-probe") == "probe-ran\n");
    CHECK(sh(prefix + "printf '%s' \"$PATH\"", {{"PATH", "/usr/bin:/bin"}}) ==
          bin.string() + ":/usr/bin:/bin");
  }
  SUBCASE("no agent directory leaves PATH alone; no variables gives no export") {
    CHECK(env_command_prefix(env, "") == "export A='1'; ");
    CHECK(env_command_prefix({}, "") == "");
    CHECK(sh(env_command_prefix({}, "/x") + "printf '%s' \"$PATH\"", {{"PATH", "/bin"}}) ==
          "/x:/bin");
  }
}

TEST_CASE("provision::env_command_prefix puts the Python environment after the agent in PATH "
          "and the agent's Python start-up first in PYTHONPATH") {
  test::TempDir home;
  const std::string agent = (home.path() / "agent").string();
  EnvVars env = {{"TPUCTL_PYTHON_ENV", (home.path() / "venv").string()}};
  const std::map<std::string, std::string> base = {{"PATH", "/usr/bin:/bin"}};
  SUBCASE("PATH: agent, environment's bin, then the login's") {
    CHECK(sh(env_command_prefix(env, agent) + "printf '%s' \"$PATH\"", base) ==
          agent + ":" + (home.path() / "venv" / "bin").string() + ":/usr/bin:/bin");
  }
  SUBCASE("PYTHONPATH: the start-up first, a value already there kept after it") {
    CHECK(sh(env_command_prefix(env, agent) + "printf '%s' \"$PYTHONPATH\"", base) ==
          agent + "/python");
    EnvVars with_user = env;
    with_user.emplace_back("PYTHONPATH", "/my lib");
    CHECK(sh(env_command_prefix(with_user, agent) + "printf '%s' \"$PYTHONPATH\"", base) ==
          agent + "/python:/my lib");
  }
  SUBCASE("TPUCTL_JAX_INIT=0 (or off, false, no) leaves PYTHONPATH alone") {
    for (const char* off : {"0", "off", "FALSE", "no"}) {
      CAPTURE(off);
      EnvVars e = env;
      e.emplace_back("TPUCTL_JAX_INIT", off);
      CHECK(sh(env_command_prefix(e, agent) + "printf '%s' \"${PYTHONPATH-unset}\"", base) ==
            "unset");
    }
    EnvVars on = env;
    on.emplace_back("TPUCTL_JAX_INIT", "1");
    CHECK(!jax_init_off(on));
  }
  SUBCASE("no Python environment: PATH gets the agent alone") {
    CHECK(sh(env_command_prefix({}, agent) + "printf '%s' \"$PATH\"", base) ==
          agent + ":/usr/bin:/bin");
  }
}

TEST_CASE("provision::validate_python_env takes absolute and ~/ paths only") {
  CHECK(validate_python_env("/opt/tpuctl/frameworks", "--python-env"));
  CHECK(validate_python_env("~/venvs/jax", "--python-env"));
  for (const char* bad : {"", "venv", "./venv", "~user/venv", "/a\nb"}) {
    CAPTURE(bad);
    auto v = validate_python_env(bad, "--python-env");
    REQUIRE(!v);
    CHECK(v.error().kind == ErrorKind::usage);
    CHECK(mentions(v.error().message, "--python-env"));
  }
}

TEST_CASE("provision::to_dotenv is read back exactly by set -a and the dot command") {
  test::TempDir dir;
  auto in = v5e_slice();
  auto env = worker_env(in, 1, EnvProfile::skypilot,
                        {{"QUOTE", "it's"}, {"MULTI", "a\nb\n"}, {"SUBST", "$(id) `id` ${X}"}});
  REQUIRE(env);
  auto text = to_dotenv(*env);
  CHECK(text.rfind("TPU_WORKER_ID='1'\nTPU_WORKER_HOSTNAMES='node01,node02,node03,node04'\n", 0) ==
        0);
  auto file = dir.path() / "worker.env";
  { std::ofstream(file) << text; }
  // Exported (set -a) so a child process sees them, not only the shell.
  std::string script = "set -a; . '" + file.string() + "'; set +a; exec sh -c '";
  for (const auto& [name, value] : *env) {
    script += "printf \"%s\\036\" \"$" + name + "\"; ";
  }
  script += "'";
  std::string out = sh(script);
  std::string expected;
  for (const auto& [name, value] : *env) {
    expected += value + "\036";
  }
  CHECK(out == expected);
}

TEST_SUITE_END();
