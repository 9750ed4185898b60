// The worker environment of an SPMD process (see spmd_env.hpp for the arithmetic).
#include "agent/spmd_env.hpp"

#include <cstdlib>

#include "util/strings.hpp"

namespace tpuctl::agent {

namespace {

const std::string k_fix = ": run the program on a slice's workers, e.g. `tpuctl ssh NAME "
                          "--worker=all -- tpuctl agent spmd-matmul ...`, which sets it";

// The value of `name` as an integer in [min, max]; records a problem and returns `fallback`
// when it is missing (and required) or malformed.
int read_int(const EnvMap& env, const std::string& name, bool required, int fallback, int min,
             int max, ErrorList& errors) {
  auto it = env.find(name);
  if (it == env.end()) {
    if (required) {
      errors.add(usage_error(name + " is not set" + k_fix));
    }
    return fallback;
  }
  auto v = util::parse_int(it->second, name, min, max);
  if (!v) {
    errors.add(v.error());
    return fallback;
  }
  return static_cast<int>(*v);
}

} // namespace

const std::vector<std::string>& spmd_env_names() {
  static const std::vector<std::string> k_names = {
      "TPU_WORKER_ID",        "TPU_WORKER_HOSTNAMES", "JAX_COORDINATOR_ADDRESS",
      "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID",   "MEGASCALE_COORDINATOR_ADDRESS",
      "TPUCTL_PROCESS_ID",    "TPUCTL_NUM_PROCESSES"};
  return k_names;
}

EnvMap read_spmd_env() {
  EnvMap env;
  for (const auto& name : spmd_env_names()) {
    if (const char* v = std::getenv(name.c_str())) {
      env[name] = v;
    }
  }
  return env;
}

Expected<SpmdIdentity> parse_spmd_identity(const EnvMap& env) {
  ErrorList errors;
  SpmdIdentity id;
  constexpr int k_max = 1 << 20;
  if (auto it = env.find("TPU_WORKER_HOSTNAMES"); it == env.end()) {
    errors.add(usage_error("TPU_WORKER_HOSTNAMES is not set" + k_fix));
  } else {
    id.slice_hostnames = util::split(it->second, ',');
    for (size_t i = 0; i < id.slice_hostnames.size(); ++i) {
      if (util::trim(id.slice_hostnames[i]).empty()) {
        errors.add(usage_error("TPU_WORKER_HOSTNAMES '" + it->second + "': entry " +
                               std::to_string(i) + " is empty (give one address per worker)"));
      }
    }
  }
  id.workers = std::max<int>(1, static_cast<int>(id.slice_hostnames.size()));
  id.worker = read_int(env, "TPU_WORKER_ID", true, 0, 0, k_max, errors);
  if (!id.slice_hostnames.empty() && id.worker >= id.workers) {
    errors.add(usage_error("TPU_WORKER_ID '" + std::to_string(id.worker) +
                           "' is out of range: TPU_WORKER_HOSTNAMES lists " +
                           std::to_string(id.workers) + " workers (0 to " +
                           std::to_string(id.workers - 1) + ")"));
  }
  id.slices = read_int(env, "MEGASCALE_NUM_SLICES", false, 1, 1, k_max, errors);
  id.slice = read_int(env, "MEGASCALE_SLICE_ID", id.slices > 1, 0, 0, k_max, errors);
  if (id.slice >= id.slices) {
    errors.add(usage_error("MEGASCALE_SLICE_ID '" + std::to_string(id.slice) +
                           "' is out of range: MEGASCALE_NUM_SLICES is " +
                           std::to_string(id.slices) + " (use 0 to " +
                           std::to_string(id.slices - 1) + ")"));
  }
  if (auto it = env.find("JAX_COORDINATOR_ADDRESS"); it == env.end()) {
    errors.add(usage_error("JAX_COORDINATOR_ADDRESS is not set" + k_fix));
  } else if (auto hp = split_host_port(it->second, "JAX_COORDINATOR_ADDRESS"); !hp) {
    errors.add(hp.error());
  } else {
    id.coordinator = *hp;
  }
  if (!errors.empty()) {
    return errors.combined();
  }
  id.process = id.slice * id.workers + id.worker;
  id.processes = id.slices * id.workers;
  id.own_host = util::trim(id.slice_hostnames[static_cast<size_t>(id.worker)]);
  for (auto& h : id.slice_hostnames) {
    h = std::string(util::trim(h));
  }
  // tpuctl's own names must tell the same story as JAX's arithmetic.
  auto agree = [&](const std::string& name, int want) {
    auto it = env.find(name);
    if (it != env.end() && it->second != std::to_string(want)) {
      errors.add(usage_error(name + " '" + it->second + "' disagrees with " + std::to_string(want) +
                             " from MEGASCALE_SLICE_ID * workers per slice + TPU_WORKER_ID (or "
                             "workers per slice * MEGASCALE_NUM_SLICES): export the environment "
                             "of one slice, unmodified"));
    }
  };
  agree("TPUCTL_PROCESS_ID", id.process);
  agree("TPUCTL_NUM_PROCESSES", id.processes);
  if (!errors.empty()) {
    return errors.combined();
  }
  return id;
}

} // namespace tpuctl::agent
