#include "cli/compat.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "provision/pool/pools.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

using A = CompatAction;

// Scopes used below.
constexpr std::string_view k_qr_create = "queued-resources create|tpu-vm create";
constexpr std::string_view k_ssh_scp =
    "queued-resources ssh|queued-resources scp|tpu-vm ssh|tpu-vm scp|ssh|scp";
constexpr std::string_view k_lists =
    "queued-resources list|tpu-vm list|accelerator-types list|tpu-vm accelerator-types "
    "list|topologies list|locations list|cluster list|workload list|pool list";
constexpr std::string_view k_xpk_cluster = "cluster create";
constexpr std::string_view k_xpk_workload = "workload create";
constexpr std::string_view k_xpk_all = "cluster|workload|config|version";

constexpr std::string_view k_gcp_only = "a Google Cloud setting; your own hosts have none";
constexpr std::string_view k_vm_only = "it configures a Google Cloud VM; tpuctl uses your hosts as "
                                       "they are";
constexpr std::string_view k_gke_only = "it configures GKE (Kubernetes); tpuctl clusters are "
                                        "queued resources on your pool, with no Kubernetes";
constexpr std::string_view k_libssh =
    "tpuctl connects with libssh in-process, not with the ssh or scp binary";

} // namespace

const std::vector<CompatFlag>& compat_flags() {
  static const std::vector<CompatFlag> k_flags = {
      // ---- gcloud-wide flags (every command) ----
      {"--billing-project", "*", true, A::project, "", ""},
      {"--account", "*", true, A::ignore, k_gcp_only, ""},
      {"--impersonate-service-account", "*", true, A::ignore, k_gcp_only, ""},
      {"--access-token-file", "*", true, A::ignore, k_gcp_only, ""},
      {"--configuration", "*", true, A::ignore,
       "gcloud configurations are gcloud's; tpuctl's defaults live in 'tpuctl config'", ""},
      {"--trace-token", "*", true, A::ignore, k_gcp_only, ""},
      {"--log-http", "*", false, A::ignore,
       "tpuctl calls no Google API; --verbosity debug shows what it does", ""},
      {"--user-output-enabled,--no-user-output-enabled", "*", false, A::ignore,
       "use --quiet for no progress, --format none is not needed: results go to stdout only", ""},
      {"--zone", "*", true, A::zone, "", ""},
      {"--flatten", "*", true, A::refuse, "tpuctl's output has no repeated fields to flatten",
       "--format json and jq"},
      {"--flags-file", "*", true, A::refuse, "tpuctl reads no flags file",
       "'tpuctl config set KEY VALUE' for defaults"},
      // ---- xpk's shared flags (every xpk command) ----
      {"--project-number", k_xpk_all, true, A::ignore, k_gcp_only, ""},
      {"--skip-validation,--no-skip-validation", k_xpk_all, false, A::ignore,
       "tpuctl needs no local kubectl, gcloud or docker to check", ""},
      {"--no-quiet", "*", false, A::ignore, "tpuctl never prompts", ""},
      {"--sandbox-kubeconfig,--no-sandbox-kubeconfig", k_xpk_all, false, A::ignore, k_gke_only, ""},
      {"--dependency-auto-download,--no-dependency-auto-download", k_xpk_all, false, A::ignore,
       "tpuctl downloads nothing", ""},
      {"--no-dry-run", "*", false, A::ignore, "commands run unless --dry-run is given", ""},
      {"--namespace", k_xpk_all, true, A::ignore,
       "a Kubernetes namespace; tpuctl clusters are queued resources on your pool, with no "
       "Kubernetes",
       ""},
      // ---- queued-resources create, tpu-vm create ----
      {"--workload-type", k_qr_create, true, A::ignore,
       "multislice requests here are always placed all or nothing", ""},
      {"--reservation-host-project", k_qr_create, true, A::ignore, k_gcp_only, ""},
      {"--reservation-host-folder", k_qr_create, true, A::ignore, k_gcp_only, ""},
      {"--reservation-host-organization", k_qr_create, true, A::ignore, k_gcp_only, ""},
      {"--min-duration", k_qr_create, true, A::ignore,
       "a standard or reserved slice runs until deleted", ""},
      {"--network", k_qr_create, true, A::ignore, k_vm_only, ""},
      {"--subnetwork", k_qr_create, true, A::ignore, k_vm_only, ""},
      {"--internal-ips", k_qr_create, false, A::ignore, k_vm_only, ""},
      {"--network-config", k_qr_create, true, A::ignore, k_vm_only, ""},
      {"--service-account", k_qr_create, true, A::ignore, k_vm_only, ""},
      {"--scopes", k_qr_create, true, A::ignore, k_vm_only, ""},
      {"--tags", k_qr_create, true, A::ignore, k_vm_only, ""},
      {"--description", k_qr_create, true, A::ignore, "tpuctl keeps no descriptions; use --labels",
       ""},
      {"--boot-disk", k_qr_create, true, A::ignore, k_vm_only, ""},
      {"--shielded-secure-boot", k_qr_create, false, A::ignore, k_vm_only, ""},
      {"--range", k_qr_create, true, A::ignore, k_vm_only, ""},
      {"--autocheckpoint-enabled", k_qr_create, false, A::ignore,
       "it is a Google Cloud maintenance feature", ""},
      {"--queue-count", "tpu-vm create", true, A::ignore, k_vm_only, ""},
      {"--image", "tpu-vm create", true, A::ignore,
       "your hosts keep the OS they run; --version is recorded as the runtime version", ""},
      {"--data-disk", k_qr_create, true, A::refuse, "tpuctl attaches no disks to your hosts",
       "mount the storage on the hosts yourself, then point the workload at it"},
      // ---- ssh and scp (gcloud's) ----
      {"--internal-ip", k_ssh_scp, false, A::ignore,
       "tpuctl connects to the address each host has in the pool", ""},
      {"--tunnel-through-iap", k_ssh_scp, false, A::ignore,
       "tpuctl connects to your hosts directly; a jump host goes in ~/.ssh/config (ProxyJump)", ""},
      {"--ssh-key-file", k_ssh_scp, true, A::ignore,
       "tpuctl uses each host's key from the pool (pool add-hosts --identity-file) or ssh-agent",
       ""},
      {"--force-key-file-overwrite,--no-force-key-file-overwrite", k_ssh_scp, false, A::ignore,
       "tpuctl makes no keys", ""},
      {"--plain", k_ssh_scp, false, A::ignore, "tpuctl adds no keys and no ssh options anyway", ""},
      {"--ssh-key-expiration", k_ssh_scp, true, A::ignore, "tpuctl puts no keys in metadata", ""},
      {"--ssh-key-expire-after", k_ssh_scp, true, A::ignore, "tpuctl puts no keys in metadata", ""},
      {"--compress", "queued-resources scp|tpu-vm scp|scp", false, A::ignore,
       "files are streamed and checked by sha256, not compressed", ""},
      {"--scp-flag", "queued-resources scp|tpu-vm scp|scp", true, A::refuse, k_libssh,
       "put ssh options in ~/.ssh/config or a file named by --ssh-config"},
      // ---- list commands ----
      {"--page-size", k_lists, true, A::ignore, "tpuctl lists are read whole, not in pages", ""},
      {"--uri", k_lists, false, A::refuse, "tpuctl's resources have no URIs",
       "--format 'value(id)' for one name a line"},
      // ---- xpk cluster create ----
      {"--num-nodes", "cluster create|workload create", true, A::ignore,
       "a TPU slice's hosts follow from its type", ""},
      {"--host-maintenance-interval", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--gke-version", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--default-pool-cpu-machine-type", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--default-pool-cpu-num-nodes", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--cluster-cpu-machine-type", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--pathways-gce-machine-type", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--custom-cluster-arguments", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--custom-nodepool-arguments", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--custom-tpu-nodepool-arguments", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--force", "cluster delete|workload delete", false, A::ignore, "tpuctl never prompts", ""},
      {"--private", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--authorized-networks", k_xpk_cluster, true, A::ignore, k_gke_only, "", true},
      {"--enable-private-endpoint", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--private-endpoint-subnetwork", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--enable-master-global-access", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--enable-workload-identity", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--adapt-from-ct", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--ignore-nodepool-creation-errors", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--enable-gcsfuse-csi-driver", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--enable-gcpfilestore-csi-driver", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--enable-parallelstore-csi-driver", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--enable-pd-csi-driver", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--enable-lustre-csi-driver", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--enable-legacy-lustre-port", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--managed-mldiagnostics", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--enable-autoprovisioning", k_xpk_cluster, false, A::ignore,
       "the pool is the capacity; nothing is provisioned on demand", ""},
      {"--autoprovisioning-min-chips", k_xpk_cluster, true, A::ignore,
       "the pool is the capacity; nothing is provisioned on demand", ""},
      {"--autoprovisioning-max-chips", k_xpk_cluster, true, A::ignore,
       "the pool is the capacity; nothing is provisioned on demand", ""},
      {"--create-vertex-tensorboard", k_xpk_cluster, false, A::ignore, k_gcp_only, ""},
      {"--tensorboard-region", "cluster create|workload create", true, A::ignore, k_gcp_only, ""},
      {"--tensorboard-name", k_xpk_cluster, true, A::ignore, k_gcp_only, ""},
      {"--enable-mtc", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--mtc-ramdisk-size", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--mtc-gcs-bucket", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--mtc-toleration-key", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--memory-limit", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--cpu-limit", k_xpk_cluster, true, A::ignore, k_gke_only, ""},
      {"--sub-slicing", k_xpk_cluster, false, A::ignore, k_gke_only, ""},
      {"--cluster-state-gcs-bucket", "cluster create|cluster delete", true, A::ignore,
       "the cluster's state is in tpuctl's state store", ""},
      {"--super-slicing", k_xpk_cluster, false, A::refuse,
       "tpuctl places each slice as one torus; super-slicing is not supported",
       "--num-slices for several slices joined over the data-center network"},
      {"--num-cubes", k_xpk_cluster, true, A::refuse,
       "tpuctl places each slice as one torus; super-slicing is not supported",
       "--num-slices for several slices joined over the data-center network"},
      {"--enable-pathways", "cluster create", false, A::refuse, "Pathways is not supported",
       "a multi-controller workload (the same command on every worker, JAX-style)"},
      {"--dry-run", "cluster create|cluster delete|workload delete", false, A::refuse,
       "xpk's --dry-run prints the gcloud and kubectl commands it would run; tpuctl runs none",
       "'tpuctl qr create NAME --accelerator-type TYPE --node-count N --dry-run' shows where "
       "a cluster's slices would go"},
      {"--dry-run", "cluster list|cluster describe|workload list|workload describe", false,
       A::ignore, "this command changes nothing", ""},
      // ---- xpk workload create ----
      {"--scheduler", k_xpk_workload, true, A::ignore, k_gke_only, ""},
      {"--docker-image-pull-secret", k_xpk_workload, true, A::ignore,
       "images are pulled with the workers' own registry login (docker login / podman login)", ""},
      {"--deploy-stacktrace-sidecar", k_xpk_workload, false, A::ignore, k_gke_only, ""},
      {"--ramdisk-directory", k_xpk_workload, true, A::ignore, k_gke_only, ""},
      {"--mtc-enabled", k_xpk_workload, false, A::ignore, k_gke_only, ""},
      {"--use-parallel-containers,--no-use-parallel-containers", k_xpk_workload, false, A::ignore,
       k_gke_only, ""},
      {"--colocated-python-sidecar-image", k_xpk_workload, true, A::ignore, k_gke_only, ""},
      {"--enable-debug-logs", k_xpk_workload, false, A::ignore, "use --verbosity debug", ""},
      {"--use-vertex-tensorboard", k_xpk_workload, false, A::ignore, k_gcp_only, ""},
      {"--experiment-name", k_xpk_workload, true, A::ignore, k_gcp_only, ""},
      {"--on-demand", k_xpk_workload, false, A::ignore,
       "a workload runs on its cluster; the cluster's create chose the capacity", ""},
      {"--flex", k_xpk_workload, false, A::ignore,
       "a workload runs on its cluster; the cluster's create chose the capacity", ""},
      {"--reservation", k_xpk_workload, true, A::ignore,
       "a workload runs on its cluster; the cluster's create chose the capacity", ""},
      {"--spot", k_xpk_workload, false, A::ignore,
       "a workload runs on its cluster; the cluster's create chose the capacity", ""},
      {"--storage", k_xpk_workload, true, A::refuse, "tpuctl attaches no storage",
       "mount the storage on the hosts yourself, then point --command at it"},
      {"--debug-dump-gcs", k_xpk_workload, true, A::refuse, "tpuctl uploads nothing to GCS",
       "--env XLA_FLAGS=--xla_dump_to=DIR, then 'tpuctl scp' the dumps back"},
      {"--use-pathways", k_xpk_workload, false, A::refuse, "Pathways is not supported",
       "a multi-controller workload (the same command on every worker, JAX-style)"},
      {"--output-manifest-file", k_xpk_workload, true, A::refuse,
       "tpuctl workloads have no Kubernetes manifest",
       "'tpuctl workload describe W --format json' for what was launched"},
  };
  return k_flags;
}

const std::vector<CompatCommand>& compat_commands() {
  static const std::vector<CompatCommand> k_commands = {
      {"queued-resources perform-maintenance", "there is no provider maintenance on your own hosts",
       "'tpuctl pool drain HOST --reason ...' to take a host out of service"},
      {"tpu-vm start", "a node is its hosts, which tpuctl does not power on or off",
       "'tpuctl qr reset QR' to place a FAILED or SUSPENDED request again"},
      {"tpu-vm stop", "a node is its hosts, which tpuctl does not power on or off",
       "'tpuctl tpu-vm delete NODE' to free its hosts"},
      {"tpu-vm update", "a node's hosts are configured in the pool, not per node",
       "'tpuctl pool' commands (add-hosts --label, drain)"},
      {"tpu-vm get-guest-attributes", "tpuctl's workers keep no guest attributes",
       "'tpuctl ssh NODE --worker=all --command ...' to read what you need"},
      {"tpu-vm attach-disk", "tpuctl attaches no disks to your hosts",
       "mount the storage on the hosts yourself"},
      {"tpu-vm detach-disk", "tpuctl attaches no disks to your hosts",
       "unmount the storage on the hosts yourself"},
      {"tpu-vm perform-maintenance", "there is no provider maintenance on your own hosts",
       "'tpuctl pool drain HOST --reason ...'"},
      {"tpu-vm simulate-maintenance-event", "there is no provider maintenance on your own hosts",
       "'tpuctl pool drain HOST --reason ...' to take a host out of service"},
      {"tpu-vm versions", "tpuctl installs no runtime images: your hosts keep their OS",
       "--runtime-version is recorded as given; 'tpuctl pool check' shows each host's OS"},
      {"tpu-vm service-identity", "there are no Google service agents here",
       "nothing: none is needed"},
      {"versions", "tpuctl installs no runtime images: your hosts keep their OS",
       "'tpuctl pool check' shows each host's OS"},
      {"reservations", "tpuctl has no named reservations",
       "--reserved on 'qr create' puts a request in the reserved tier, placed first"},
      {"cluster create-pathways", "Pathways is not supported",
       "'tpuctl cluster create' and a multi-controller workload"},
      {"cluster create-ray", "Ray clusters are not supported",
       "'tpuctl cluster create' and 'tpuctl workload create --env-profile' for your launcher"},
      {"cluster adapt", "there is no existing GKE cluster to adapt", "'tpuctl cluster create'"},
      {"cluster cacheimage",
       "images are pulled by each worker's docker or podman when a workload starts",
       "'tpuctl ssh QR --worker=all --command \"docker pull IMAGE\"' to pull ahead"},
      {"workload create-pathways", "Pathways is not supported",
       "'tpuctl workload create' runs a multi-controller command on every worker"},
      {"storage", "tpuctl attaches no storage", "mount the storage on the hosts yourself"},
      {"inspector", "there is no Kubernetes to inspect",
       "'tpuctl cluster describe', 'tpuctl workload describe W', 'tpuctl pool check'"},
  };
  return k_commands;
}

namespace {

// The path of `app` below the root: "queued-resources create".
std::string path_below_root(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app; a->get_parent(); a = a->get_parent()) {
    path = path.empty() ? a->get_name() : a->get_name() + " " + path;
  }
  return path;
}

// True when `scope` covers the command at `path` (a group's scope covers its commands).
bool in_scope(std::string_view scope, const std::string& path) {
  if (scope == "*") {
    return true;
  }
  for (const auto& s : util::split(scope, '|')) {
    if (path == s || util::starts_with(path, s + " ")) {
      return true;
    }
  }
  return false;
}

// True when `app` or a parent it falls through to already has option `name`.
bool has_option(const CLI::App& app, const std::string& name) {
  for (const CLI::App* a = &app; a; a = a->get_parent()) {
    if (a->get_option_no_throw(name) != nullptr) {
      return true;
    }
  }
  return false;
}

// The subcommand of `app` named `name` (or aliased so), or nullptr.
CLI::App* subcommand(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(name)) {
      return sub;
    }
  }
  return nullptr;
}

// The row for flag `name` on the command at `path` (a flag may have rows for several scopes).
const CompatFlag* find_flag(const std::string& name, const std::string& path) {
  for (const auto& f : compat_flags()) {
    for (const auto& n : util::split(f.names, ',')) {
      if (n == name && in_scope(f.scope, path)) {
        return &f;
      }
    }
  }
  return nullptr;
}

} // namespace

std::vector<std::string> take_compat_flags(const CLI::App& root, std::vector<std::string> args,
                                           CompatValues& values) {
  // Which command the words name: subcommand words, skipping flags (and the values of those
  // that take one) on the way, as CLI11 will parse them.
  const CLI::App* at = &root;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--") {
      break;
    }
    if (util::starts_with(w, "-")) {
      if (w.find('=') == std::string::npos) {
        const CLI::App* owner = at;
        std::string name = w;
        for (; owner; owner = owner->get_parent()) {
          if (const CLI::Option* o = owner->get_option_no_throw(name);
              o != nullptr && o->get_items_expected_max() > 0) {
            ++i; // its value
            break;
          }
        }
      }
      continue;
    }
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->check_name(w)) {
        next = sub;
        break;
      }
    }
    if (next == nullptr) {
      break; // a positional: the command is found
    }
    at = next;
  }
  const std::string path = path_below_root(*at);
  values.path = path;
  std::vector<std::string> kept;
  bool options_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (i == 0 || options_ended || !util::starts_with(w, "--") || w == "--") {
      options_ended = options_ended || w == "--";
      kept.push_back(w);
      continue;
    }
    const std::string name = w.substr(0, w.find('='));
    const CompatFlag* f = find_flag(name, path);
    if (f == nullptr || has_option(*at, name)) {
      kept.push_back(w); // the command's own flag, or a mistake CLI11 will name
      continue;
    }
    auto& given = values.given[name];
    if (w.size() > name.size()) {
      given.push_back(w.substr(name.size() + 1));
    } else if (f->many) {
      // argparse's nargs='+': every word up to the next flag (xpk's --authorized-networks
      // 1.2.3.0/24 1.2.4.5/32), kept as one value.
      std::string all;
      while (i + 1 < args.size() && !util::starts_with(args[i + 1], "-")) {
        all += (all.empty() ? "" : " ") + args[++i];
      }
      given.push_back(all);
    } else if (f->takes_value && i + 1 < args.size()) {
      given.push_back(args[++i]);
    } else {
      given.push_back("");
    }
  }
  return kept;
}

void add_compat(CLI::App& root, Registry& registry, CompatValues& values) {
  for (const auto& c : compat_commands()) {
    auto words = util::split(c.path, ' ');
    CLI::App* at = &root;
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      CLI::App* next = subcommand(*at, words[i]);
      if (next == nullptr) {
        next = at->add_subcommand(words[i], "");
        next->group("");
      }
      at = next;
    }
    if (subcommand(*at, words.back()) != nullptr) {
      continue; // tpuctl has the command itself
    }
    CLI::App* cmd = at->add_subcommand(words.back(), "");
    cmd->group("");
    // Whatever follows is the refused command's own words, not a parse error.
    cmd->allow_extras();
    cmd->fallthrough(false);
    cmd->add_option("ARGS", values.swallowed, "")->group("");
    std::string path(c.path);
    registry.bind(*cmd, [path, &values](Context&) -> Expected<int> {
      values.refused_command = path;
      return 0; // apply_compat has already refused it
    });
    values.commands.push_back(cmd);
  }
}

Status apply_compat(Context& ctx, const CompatValues& values) {
  for (const auto& c : compat_commands()) {
    for (const CLI::App* cmd : values.commands) {
      if (cmd->parsed() && path_below_root(*cmd) == c.path) {
        return usage_error("'tpuctl " + std::string(c.path) + "' is not supported: " +
                           std::string(c.why) + "; instead: " + std::string(c.instead));
      }
    }
  }
  // Refused flags that share a reason are one line ("--super-slicing and --num-cubes are not
  // supported: ..."); each reason is its own line.
  std::vector<std::pair<const CompatFlag*, std::vector<std::string>>> refused;
  std::vector<std::string> notices;
  for (const auto& [name, given] : values.given) {
    if (given.empty()) {
      continue;
    }
    const CompatFlag* f = find_flag(name, values.path);
    if (f == nullptr) {
      continue;
    }
    const std::string shown =
        name + (f->takes_value ? " '" + util::printable(given.back()) + "'" : std::string());
    switch (f->action) {
    case CompatAction::refuse: {
      auto same = std::find_if(refused.begin(), refused.end(), [&](const auto& r) {
        return r.first->why == f->why && r.first->instead == f->instead;
      });
      if (same == refused.end()) {
        refused.push_back({f, {name}});
      } else {
        same->second.push_back(name);
      }
      break;
    }
    case CompatAction::zone:
      ctx.globals.zone = given.back();
      ctx.globals.zone_flag = true;
      break;
    case CompatAction::project:
      // gcloud's --billing-project is "the project charged for quota": it wins over --project.
      if (name == "--billing-project" || ctx.globals.project.empty()) {
        ctx.globals.project = given.back();
      }
      break;
    case CompatAction::ignore:
      notices.push_back(shown + " ignored: " + std::string(f->why));
      break;
    }
  }
  if (!refused.empty()) {
    ErrorList errors;
    for (const auto& [f, names] : refused) {
      errors.add(usage_error(util::join(names, " and ") + (names.size() > 1 ? " are" : " is") +
                             " not supported: " + std::string(f->why) +
                             "; instead: " + std::string(f->instead)));
    }
    return errors.combined();
  }
  if (ctx.globals.zone.empty()) {
    if (const char* z = std::getenv("CLOUDSDK_COMPUTE_ZONE"); z && *z) {
      ctx.globals.zone = z;
    }
  }
  if (!ctx.globals.quiet) {
    for (const auto& n : notices) {
      *ctx.err << "tpuctl: notice: " << util::escape_controls(n) << "\n";
    }
  }
  return ok();
}

Expected<std::string> resolve_pool(Context& ctx, state::StateStore& store) {
  if (ctx.globals.zone.empty()) {
    return provision::resolve_pool_name(store, ctx.globals.pool);
  }
  const std::string zone = ctx.globals.zone;
  ctx.globals.zone.clear(); // said once
  const bool quiet = ctx.globals.quiet;
  if (!ctx.globals.pool.empty() && !ctx.globals.pool_from_config) {
    // --pool (or TPUCTL_POOL) names the pool itself: it wins over a zone.
    if (zone != ctx.globals.pool && !quiet) {
      *ctx.err << "tpuctl: notice: --zone '" << util::escape_controls(zone)
               << "' ignored: --pool (or TPUCTL_POOL) selects pool '"
               << util::escape_controls(ctx.globals.pool) << "'\n";
    }
    return provision::resolve_pool_name(store, ctx.globals.pool);
  }
  TPUCTL_TRY_ASSIGN(auto pools, provision::list_pools(store));
  for (const auto& p : pools) {
    if (p.name == zone) {
      ctx.globals.pool = p.name; // over the config file's pool, as gcloud's --zone over its config
      ctx.globals.pool_from_config = false;
      return p.name;
    }
  }
  TPUCTL_TRY_ASSIGN(auto pool, provision::resolve_pool_name(store, ctx.globals.pool));
  if (!quiet) {
    *ctx.err << "tpuctl: notice: --zone '" << util::escape_controls(zone)
             << "' names no pool here (a zone is a pool in tpuctl); using pool '" << pool << "'"
             << (ctx.globals.pool_from_config ? " (the config's)" : "") << "\n";
  }
  return pool;
}

std::string enum_value(std::string_view value) {
  std::string out;
  for (char c : value) {
    out += c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Expected<std::string> positional_or_flag(const std::string& positional,
                                         const std::string& flag_value, const std::string& what,
                                         const std::string& forms) {
  if (positional.empty() == flag_value.empty()) {
    return usage_error("give the " + what + (positional.empty() ? ": " : " once: ") + forms);
  }
  return positional.empty() ? flag_value : positional;
}

Expected<provision::Tier> tier_of(const std::vector<TierFlag>& given, bool exclusive,
                                  const std::string& conflict) {
  for (size_t i = 1; i < given.size(); ++i) {
    if (exclusive || given[i].second != given.front().second) {
      return usage_error(given.front().first + " and " + given[i].first + conflict);
    }
  }
  return given.empty() ? provision::Tier::standard : given.front().second;
}

std::vector<std::string> normalize_aliases(std::vector<std::string> args) {
  // gcloud's own words before the command: `tpuctl [alpha|beta] compute tpus qr list`, for a
  // command copied with only `gcloud` replaced.
  size_t at = 1;
  if (at < args.size() && (args[at] == "alpha" || args[at] == "beta")) {
    ++at;
  }
  if (at + 1 < args.size() && args[at] == "compute" && args[at + 1] == "tpus") {
    args.erase(args.begin() + 1, args.begin() + static_cast<long>(at) + 2);
  }
  for (auto& a : args) {
    if (a == "-tgps") {
      a = "--termination-grace-period-seconds";
    } else if (util::starts_with(a, "-tgps=")) {
      a = "--termination-grace-period-seconds=" + a.substr(6);
    }
  }
  // `--ssh-flag "-L 9001:localhost:9001"`: the value starts with '-', which CLI11 would take for
  // an option; gcloud takes it as the value, and so does `--ssh-flag=VALUE`.
  for (size_t i = 1; i + 1 < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--ssh-flag") {
      args[i] += "=" + args[i + 1];
      args.erase(args.begin() + static_cast<long>(i) + 1);
    }
  }
  return args;
}

} // namespace tpuctl::cli
