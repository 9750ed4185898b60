#include "cli/reference_text.hpp"

#include <sstream>

#include "cli/exit_codes.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

const std::vector<ExitStatusRow>& exit_status_rows() {
  static const std::vector<ExitStatusRow> k_rows = {
      {k_exit_ok, "success"},
      {k_exit_failure,
       "failure: the operation did not succeed (a request or workload FAILED, a store is "
       "unreachable)"},
      {k_exit_usage, "usage error or invalid input; nothing was changed"},
      {k_exit_capacity, "no capacity for the request, or timed out waiting"},
      {k_exit_not_found,
       "not found: the named pool, host, queued resource, node... does not exist"},
      {k_exit_auth,
       "authentication or host-key failure, or not allowed (not an admin of the pool)"},
      {k_exit_partial, "partly done: what the command names (a queued resource, cluster or "
                       "workload, and its state) was "
                       "created and exists, then a later step failed (say, the state store's disk "
                       "filled up)"},
      {k_exit_timeout, "a remote command timed out (as timeout(1))"},
      {k_exit_interrupted, "interrupted by SIGINT (Ctrl-C); remote processes were killed"},
      {143, "terminated by SIGTERM; remote processes were killed"},
      {k_exit_transport, "a host could not be reached over SSH (as ssh(1))"},
  };
  return k_rows;
}

std::string exit_status_text() {
  std::ostringstream os;
  os << "Exit status:\n";
  for (const auto& r : exit_status_rows()) {
    std::string code = std::to_string(r.code);
    os << "  " << code << std::string(5 - code.size(), ' ') << r.meaning << "\n";
  }
  os << "  A broadcast (ssh, scp, pool ssh) exits with the first failing worker's status: its\n"
        "  exit code, 128+N for signal N, 124, 5 or 255.\n";
  return os.str();
}

const std::vector<RecordFields>& record_fields() {
  static const std::vector<RecordFields> k_fields = {
      {"queued resource",
       "id, pool, uid, state, state_initiator, accelerator_type, runtime_version, tier, "
       "on_preemption, node_count, nodes ({name, slice, workers}), created_at, state_since, "
       "active_since, "
       "valid_until, valid_after, max_run_duration_ms, labels, metadata, secrets, request_id, "
       "owner, "
       "project, reason, "
       "pending_reason, waiting_for, error ({code, message, worker, node, host}), history "
       "({time, from, to, "
       "initiator, reason}), provisioning"},
      {"worker", "node, slice, worker, host, address, coords"},
      {"node", "name, queued_resource, slice, state, accelerator_type, runtime_version, project, "
               "worker_count, "
               "workers, network_endpoints ({ip_address})"},
      {"pool",
       "name, generation, chips_per_host, shape, host_grid, capacity, hosts, local, owner; list: "
       "free; "
       "describe: admins, ssh_work, quotas, free, claimed, drained, largest_free_blocks ({origin, "
       "size, hosts}), "
       "host_list"},
      {"host", "name, address, port, user, identity_file, proxy_jump, workdir, coords, state, claimed_by, "
               "drain_reason, labels"},
      {"host check",
       "host, status, reachable, authenticated, host_key, os, cores, memory_total_mib, "
       "disk_free_mib, units, error"},
      {"broadcast result (--output jsonl, a line per worker)",
       "node, slice, worker (null for pool ssh), host, index, outcome, exit_code, signal, error "
       "({code, message}), duration_ms, stdout, stderr; scp adds source, destination"},
      {"copy", "to the workers, per file: source, destination, hosts, copied_count; from them, per "
               "file and worker: node, slice, worker, host, source, destination, copied"},
      {"workload",
       "name, pool, uid, cluster, queued_resource, state, command, env ({name, value}), secrets, "
       "env_profile, fail_policy, max_restarts, priority, num_slices, slices, slice_nodes, "
       "queue_position, head_of_queue_since, admitted_at, evictions, "
       "termination_grace_seconds, failure_grace_seconds, restart_on_exit_codes, "
       "ttl_seconds_after_finished, max_repairs, repairs, restarts, attempt, "
       "recoveries, timeout_ms, "
       "deleting, created_at, owner, project, started_at, attempt_started_at, recovering_since, "
       "finished_at, "
       "message, repair ({hosts, reason}), goodput ({wall_ms, provisioning_ms, queued_ms, "
       "recovering_ms, running_ms, lost_ms, evicted_ms, goodput}), running, worker_count, "
       "workers ({node, "
       "slice, worker, host, state, exit_code, attempt, last_heartbeat, last_contact, detail}), "
       "container"},
      {"log line (--output jsonl)", "node, slice, worker, host, line"},
      {"cluster",
       "name, pool, tpu_type, num_slices, tier, on_preemption, state, queued_resource, "
       "created_at, owner, project, running_workloads, goodput, slices ({name, slice, workers}), "
       "workloads "
       "({name, state, goodput}), reason, error; a resize (cluster create on an existing "
       "cluster) adds resize ({from, to, added, removed, evicted, async})"},
  };
  return k_fields;
}

namespace {

const char* fields_of(const std::string& kind) {
  for (const auto& r : record_fields()) {
    if (kind == r.kind) {
      return r.fields;
    }
  }
  return "";
}

// The command (words under tpuctl) and the kind of record it prints.
struct Printed {
  std::vector<std::string> path;
  const char* kind;
};

const std::vector<Printed>& printed() {
  static const std::vector<Printed> k_printed = {
      {{"queued-resources", "create"}, "queued resource"},
      {{"queued-resources", "list"}, "queued resource"},
      {{"queued-resources", "describe"}, "queued resource"},
      {{"queued-resources", "wait"}, "queued resource"},
      {{"tpu-vm", "list"}, "node"},
      {{"tpu-vm", "describe"}, "node"},
      {{"pool", "list"}, "pool"},
      {{"pool", "describe"}, "pool"},
      {{"pool", "hosts"}, "host"},
      {{"pool", "check"}, "host check"},
      {{"pool", "ssh"}, "broadcast result (--output jsonl, a line per worker)"},
      {{"ssh"}, "broadcast result (--output jsonl, a line per worker)"},
      {{"queued-resources", "ssh"}, "broadcast result (--output jsonl, a line per worker)"},
      {{"tpu-vm", "ssh"}, "broadcast result (--output jsonl, a line per worker)"},
      {{"scp"}, "copy"},
      {{"queued-resources", "scp"}, "copy"},
      {{"tpu-vm", "scp"}, "copy"},
      {{"workload", "create"}, "workload"},
      {{"workload", "list"}, "workload"},
      {{"workload", "describe"}, "workload"},
      {{"workload", "wait"}, "workload"},
      {{"workload", "logs"}, "log line (--output jsonl)"},
      {{"cluster", "create"}, "cluster"},
      {{"cluster", "list"}, "cluster"},
      {{"cluster", "describe"}, "cluster"},
  };
  return k_printed;
}

CLI::App* find_command(CLI::App& root, const std::vector<std::string>& path) {
  CLI::App* at = &root;
  for (const auto& word : path) {
    CLI::App* next = nullptr;
    for (CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == word) {
        next = sub;
      }
    }
    if (next == nullptr) {
      return nullptr;
    }
    at = next;
  }
  return at;
}

// `text` wrapped at 94 columns, every line indented by two spaces.
std::string wrapped(const std::string& text) {
  std::string out, line = " ";
  for (const auto& word : util::split(text, ' ')) {
    if (line.size() + 1 + word.size() > 94) {
      out += line + "\n";
      line = " ";
    }
    line += " " + word;
  }
  return out + line + "\n";
}

} // namespace

void add_field_footers(CLI::App& root) {
  for (const auto& p : printed()) {
    CLI::App* cmd = find_command(root, p.path);
    if (cmd == nullptr) {
      continue; // a group built alone (tpuctl agent ...)
    }
    std::string footer = cmd->get_footer();
    if (!footer.empty() && footer.back() != '\n') {
      footer += "\n";
    }
    std::string fields = wrapped(fields_of(p.kind));
    fields.pop_back(); // CLI11 ends the footer's line
    footer +=
        (footer.empty() ? "" : "\n") + std::string("Fields of each ") + p.kind + ":\n" + fields;
    cmd->footer(footer);
  }
}

} // namespace tpuctl::cli
