// Worker environment: the variables are computed from the slice shape and the worker's place in
// the job, following the same arithmetic JAX uses to find its own place (topology.md b.4):
// process_id = slice_id * workers_per_slice + worker, process_count = workers * slices, and the
// coordinator is the Megascale coordinator host when there are several slices, otherwise worker
// 0 of the slice, always on port 8476. The profiles restate that same global layout in the
// vocabulary of torchrun, Slurm and SkyPilot (one process per host), so a launch script written
// for one of them runs unchanged.
#include "provision/slice/worker_env.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

#include "util/hostlist.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

// Variables a user may set to another value (ports, the coordinator, the metadata switch): they
// tune the rendezvous but do not change who a worker is.
constexpr std::array<std::string_view, 6> k_tunables = {
    "TPU_SKIP_MDS_QUERY", "JAX_COORDINATOR_ADDRESS", "JAX_NUM_CPU_DEVICES",
    "MEGASCALE_PORT",     "MASTER_PORT",             "SKYPILOT_NUM_GPUS_PER_NODE"};

bool is_tunable(std::string_view name) {
  return std::find(k_tunables.begin(), k_tunables.end(), name) != k_tunables.end();
}

std::string bool_text(bool b) {
  return b ? "true" : "false";
}

// "host:port", with brackets around an IPv6 literal.
std::string host_port(const std::string& host, int port) {
  bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string worker_range_text(const topology::AcceleratorType& type) {
  return type.hosts == 1 ? "worker 0" : "workers 0-" + std::to_string(type.hosts - 1);
}

// Checks everything about the slice and the worker; returns every problem.
void validate_input(const SliceEnvInput& in, int worker, EnvProfile profile, ErrorList& errors) {
  const auto& type = in.type;
  if (type.generation == nullptr || type.hosts <= 0) {
    errors.add(usage_error("accelerator type '" + type.name +
                           "' is not a parsed slice shape: build it with "
                           "topology::parse_accelerator_type"));
    return;
  }
  if (worker < 0 || worker >= type.hosts) {
    errors.add(usage_error("worker '" + std::to_string(worker) + "' is out of range: a " +
                           type.name + " slice has " + worker_range_text(type)));
  }
  if (static_cast<int>(in.hostnames.size()) != type.hosts) {
    errors.add(usage_error("slice '" + in.tpu_name + "' lists " +
                           std::to_string(in.hostnames.size()) + " worker hostnames but a " +
                           type.name + " has " + std::to_string(type.hosts) +
                           " workers: give one address per worker"));
  }
  for (const auto& host : in.hostnames) {
    if (auto st = util::validate_hostname(host); !st) {
      errors.add(st.error());
    }
  }
  if (in.tpu_name.empty() || in.tpu_name.find('\0') != std::string::npos) {
    errors.add(usage_error("tpu name '" + in.tpu_name +
                           "' is not valid: give the node id, non-empty and without NUL bytes"));
  }
  if (in.num_slices < 1) {
    errors.add(usage_error("number of slices '" + std::to_string(in.num_slices) +
                           "' is not valid: a job has at least 1 slice"));
  } else if (in.slice_id < 0 || in.slice_id >= in.num_slices) {
    errors.add(usage_error("slice id '" + std::to_string(in.slice_id) + "' is out of range: a " +
                           std::to_string(in.num_slices) + "-slice job has slices 0-" +
                           std::to_string(in.num_slices - 1)));
  }
  if (!in.megascale_coordinator.empty()) {
    if (auto st = util::validate_hostname(in.megascale_coordinator); !st) {
      errors.add(st.error());
    }
  } else if (in.num_slices > 1 && in.slice_id > 0 && in.job_hostnames.empty()) {
    errors.add(usage_error("slice '" + std::to_string(in.slice_id) + "' of " +
                           std::to_string(in.num_slices) +
                           " has no megascale coordinator: give the address of slice 0 worker 0"));
  }
  if (!in.job_hostnames.empty() && type.hosts > 0 && in.num_slices >= 1) {
    size_t want = static_cast<size_t>(type.hosts) * static_cast<size_t>(in.num_slices);
    if (in.job_hostnames.size() != want) {
      errors.add(usage_error("job hostnames list " + std::to_string(in.job_hostnames.size()) +
                             " workers but " + std::to_string(in.num_slices) + " slices of " +
                             type.name + " have " + std::to_string(want) +
                             ": list every worker of every slice, slice 0 first"));
    } else if (in.slice_id >= 0 && in.slice_id < in.num_slices &&
               static_cast<int>(in.hostnames.size()) == type.hosts) {
      auto first = in.job_hostnames.begin() + static_cast<long>(in.slice_id) * type.hosts;
      if (!std::equal(in.hostnames.begin(), in.hostnames.end(), first)) {
        errors.add(usage_error("job hostnames do not hold slice '" + std::to_string(in.slice_id) +
                               "' workers at positions " +
                               std::to_string(in.slice_id * type.hosts) + "-" +
                               std::to_string((in.slice_id + 1) * type.hosts - 1) +
                               ": list slices in order, workers in worker order"));
      }
    }
    if (!in.megascale_coordinator.empty() && in.megascale_coordinator != in.job_hostnames[0]) {
      errors.add(usage_error("megascale coordinator '" + in.megascale_coordinator +
                             "' is not slice 0 worker 0 ('" + in.job_hostnames[0] +
                             "'): use the same address for both"));
    }
  }
  if (in.slice_id == 0 && !in.megascale_coordinator.empty() && !in.hostnames.empty() &&
      in.megascale_coordinator != in.hostnames[0]) {
    errors.add(usage_error("megascale coordinator '" + in.megascale_coordinator +
                           "' is not slice 0 worker 0 ('" + in.hostnames[0] +
                           "'): use the same address for both"));
  }
  bool needs_job_list = profile == EnvProfile::slurm || profile == EnvProfile::skypilot;
  if (needs_job_list && in.num_slices > 1 && in.job_hostnames.empty()) {
    errors.add(usage_error("env profile '" + std::string(to_string(profile)) +
                           "' needs every worker of all " + std::to_string(in.num_slices) +
                           " slices for its node list: pass the job hostnames"));
  }
}

// Applies the user's additions to `env`; records every refused entry.
void apply_user_env(EnvVars& env, const EnvVars& user_env, ErrorList& errors) {
  std::vector<std::string> seen;
  for (const auto& [name, value] : user_env) {
    if (auto valid = validate_env_name(name); !valid) {
      errors.add(valid.error());
      continue;
    }
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      errors.add(
          usage_error("environment variable '" + name + "' is given twice: give each name once"));
      continue;
    }
    seen.push_back(name);
    if (value.find('\0') != std::string::npos) {
      errors.add(usage_error("value of environment variable '" + name +
                             "' holds a NUL byte: environment values cannot carry NUL"));
      continue;
    }
    auto it = std::find_if(env.begin(), env.end(),
                           [&wanted = name](const auto& kv) { return kv.first == wanted; });
    bool reserved =
        name == "PATH" || (util::starts_with(name, "TPUCTL_") && name != k_jax_init_var);
    if (reserved || (it != env.end() && !is_tunable(name))) {
      errors.add(usage_error("environment variable '" + name +
                             "' describes the worker and is set by tpuctl: it cannot be "
                             "overridden (tunable ones: TPU_SKIP_MDS_QUERY, "
                             "JAX_COORDINATOR_ADDRESS, JAX_NUM_CPU_DEVICES, MEGASCALE_PORT, "
                             "MASTER_PORT, SKYPILOT_NUM_GPUS_PER_NODE, TPUCTL_JAX_INIT)"));
      continue;
    }
    if (it != env.end()) {
      it->second = value;
    } else {
      env.emplace_back(name, value);
    }
  }
}

} // namespace

Expected<EnvProfile> parse_env_profile(std::string_view text) {
  for (auto p : {EnvProfile::none, EnvProfile::torchrun, EnvProfile::slurm, EnvProfile::skypilot}) {
    if (text == to_string(p)) {
      return p;
    }
  }
  return usage_error("env profile '" + std::string(text) +
                     "' is not known: use one of none, torchrun, slurm, skypilot");
}

std::string_view to_string(EnvProfile profile) {
  switch (profile) {
  case EnvProfile::none:
    return "none";
  case EnvProfile::torchrun:
    return "torchrun";
  case EnvProfile::slurm:
    return "slurm";
  case EnvProfile::skypilot:
    return "skypilot";
  }
  return "none";
}

bool is_env_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

Status validate_env_name(std::string_view name) {
  if (!is_env_name(name)) {
    return usage_error("environment name '" + util::printable(name) +
                       "' is not valid: use letters, digits and '_', not starting with a digit");
  }
  return tpuctl::ok();
}

namespace {

// A Slurm job id for the job: the same on every worker of every slice (one hash of the request's
// uid, or of the job's host list when there is none), never 0, below 2^31 as Slurm's are.
unsigned slurm_job_id(const SliceEnvInput& in, const std::vector<std::string>& job_hosts) {
  const std::string key = in.slice_uid.empty() ? util::join(job_hosts, ",") : in.slice_uid;
  std::uint32_t h = 2166136261u; // FNV-1a
  for (unsigned char c : key) {
    h = (h ^ c) * 16777619u;
  }
  return (h & 0x7fffffffu) == 0 ? 1 : (h & 0x7fffffffu);
}

} // namespace

Expected<EnvVars> worker_env(const SliceEnvInput& in, int worker, EnvProfile profile,
                             const EnvVars& user_env) {
  ErrorList errors;
  validate_input(in, worker, profile, errors);
  if (!errors.empty()) {
    return errors.combined();
  }
  const auto& type = in.type;
  const int hosts = type.hosts;
  const int process_id = in.slice_id * hosts + worker;
  const int num_processes = hosts * in.num_slices;
  // Global worker 0: the Megascale coordinator (slice 0 worker 0) or this slice's worker 0.
  std::string global_head = in.hostnames[0];
  if (!in.megascale_coordinator.empty()) {
    global_head = in.megascale_coordinator;
  } else if (!in.job_hostnames.empty()) {
    global_head = in.job_hostnames[0];
  }
  const std::vector<std::string>& job_hosts =
      in.job_hostnames.empty() ? in.hostnames : in.job_hostnames;
  const std::string hostlist = util::join(in.hostnames, ",");

  EnvVars env;
  auto add = [&env](std::string name, std::string value) {
    env.emplace_back(std::move(name), std::move(value));
  };
  add("TPU_WORKER_ID", std::to_string(worker));
  add("TPU_WORKER_HOSTNAMES", hostlist);
  add("TPU_ACCELERATOR_TYPE", type.name);
  add("TPU_TOPOLOGY", type.topology());
  add("TPU_TOPOLOGY_WRAP",
      bool_text(type.wrap[0]) + "," + bool_text(type.wrap[1]) + "," + bool_text(type.wrap[2]));
  add("TPU_HOST_BOUNDS", topology::format_bounds(type.host_bounds));
  add("TPU_CHIPS_PER_HOST_BOUNDS", topology::format_bounds(type.chips_per_host_bounds));
  add("TPU_SKIP_MDS_QUERY", "1");
  add("TPU_NAME", in.tpu_name);
  add("JAX_COORDINATOR_ADDRESS",
      host_port(in.num_slices > 1 ? global_head : in.hostnames[0], k_jax_coordinator_port));
  add("JAX_NUM_CPU_DEVICES", std::to_string(chips_per_worker(type)));
  if (in.num_slices > 1) {
    add("MEGASCALE_COORDINATOR_ADDRESS", global_head);
    add("MEGASCALE_NUM_SLICES", std::to_string(in.num_slices));
    add("MEGASCALE_SLICE_ID", std::to_string(in.slice_id));
    add("MEGASCALE_PORT", std::to_string(k_megascale_port));
  }
  add("TPUCTL_WORKER_ID", std::to_string(worker));
  add("TPUCTL_NUM_WORKERS", std::to_string(hosts));
  add("TPUCTL_WORKER_HOSTNAMES", hostlist);
  add("TPUCTL_SLICE_ID", std::to_string(in.slice_id));
  add("TPUCTL_NUM_SLICES", std::to_string(in.num_slices));
  add("TPUCTL_PROCESS_ID", std::to_string(process_id));
  add("TPUCTL_NUM_PROCESSES", std::to_string(num_processes));
  if (!in.slice_uid.empty()) {
    add("TPUCTL_QR_UID", in.slice_uid);
  }
  if (!in.python_env.empty()) {
    add("TPUCTL_PYTHON_ENV", in.python_env);
  }

  switch (profile) {
  case EnvProfile::none:
    break;
  case EnvProfile::torchrun:
    add("RANK", std::to_string(process_id));
    add("WORLD_SIZE", std::to_string(num_processes));
    add("LOCAL_RANK", "0");
    add("MASTER_ADDR", global_head);
    add("MASTER_PORT", std::to_string(k_torchrun_master_port));
    break;
  case EnvProfile::slurm:
    add("SLURM_PROCID", std::to_string(process_id));
    add("SLURM_NTASKS", std::to_string(num_processes));
    add("SLURM_NODEID", std::to_string(process_id));
    add("SLURM_LOCALID", "0");
    add("SLURM_JOB_NODELIST", util::fold_hostlist(job_hosts));
    add("SLURM_NNODES", std::to_string(num_processes));
    // What srun adds for a job step. JAX's Slurm detection keys on SLURM_JOB_ID and reads the
    // step's node list, so jax.distributed.initialize() needs no arguments (README's recipe).
    add("SLURM_JOB_ID", std::to_string(slurm_job_id(in, job_hosts)));
    add("SLURM_JOB_NUM_NODES", std::to_string(num_processes));
    add("SLURM_STEP_ID", "0");
    add("SLURM_STEP_NODELIST", util::fold_hostlist(job_hosts));
    add("SLURM_STEP_NUM_NODES", std::to_string(num_processes));
    add("SLURM_STEP_NUM_TASKS", std::to_string(num_processes));
    add("SLURM_STEP_TASKS_PER_NODE", "1(x" + std::to_string(num_processes) + ")");
    break;
  case EnvProfile::skypilot:
    add("SKYPILOT_NODE_RANK", std::to_string(process_id));
    add("SKYPILOT_NODE_IPS", util::join(job_hosts, "\n"));
    add("SKYPILOT_NUM_NODES", std::to_string(num_processes));
    add("SKYPILOT_NUM_GPUS_PER_NODE", "0");
    break;
  }

  apply_user_env(env, user_env, errors);
  if (!errors.empty()) {
    return errors.combined();
  }
  return env;
}

Status validate_python_env(std::string_view dir, std::string_view source) {
  const bool rooted = util::starts_with(dir, "/") || util::starts_with(dir, "~/");
  if (!rooted || dir.find_first_of(std::string_view("\0\n", 2)) != std::string_view::npos) {
    return usage_error(std::string(source) + " '" + util::printable(dir) +
                       "' is not a Python environment's directory: give an absolute path (or "
                       "~/...) on the workers, e.g. /opt/tpuctl/frameworks");
  }
  return tpuctl::ok();
}

bool jax_init_off(const EnvVars& env) {
  for (const auto& [name, value] : env) {
    if (name == k_jax_init_var) {
      const std::string v = util::to_lower(util::trim(value));
      return v == "0" || v == "off" || v == "false" || v == "no";
    }
  }
  return false;
}

int chips_per_worker(const topology::AcceleratorType& type) {
  const auto& b = type.chips_per_host_bounds;
  return std::max(1, b[0] * b[1] * b[2]);
}

std::string env_command_prefix(const EnvVars& env, const std::string& agent_dir) {
  std::string out;
  std::string python_env;
  for (const auto& [name, value] : env) {
    if (!is_env_name(name)) {
      continue; // precondition violated; never let a name become shell syntax
    }
    out += out.empty() ? "export " : " ";
    out += name + "=" + util::shell_quote(value);
    if (name == "TPUCTL_PYTHON_ENV") {
      python_env = value;
    }
  }
  if (!out.empty()) {
    out += "; ";
  }
  if (!agent_dir.empty()) {
    std::string path = util::shell_quote_path(agent_dir);
    if (!python_env.empty()) {
      path += ":" + util::shell_quote_path(python_env + "/bin");
    }
    out += "export PATH=" + path + ":\"$PATH\"";
    if (!jax_init_off(env)) {
      out += " PYTHONPATH=" + util::shell_quote_path(agent_dir + "/python") +
             "${PYTHONPATH:+:\"$PYTHONPATH\"}";
    }
    out += "; ";
  }
  return out;
}

std::string to_dotenv(const EnvVars& env) {
  std::string out;
  for (const auto& [name, value] : env) {
    out += name + "=" + util::shell_quote(value) + "\n";
  }
  return out;
}

} // namespace tpuctl::provision
