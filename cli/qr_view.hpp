// How queued resources and their nodes look on stdout: json objects with stable fields (the
// record's own fields plus times as RFC 3339 text) and, for people, aligned tables.
#pragma once

#include <ostream>

#include "cli/output.hpp"
#include "provision/queue/queued_resource.hpp"

namespace tpuctl::cli {

// The output json of a queued resource (the one mapping every command prints; fields in README
// "Output fields"): the record's own fields with times as RFC 3339 text (null when unset), every
// node with its workers (worker_json), node_count, reason, error null or an object, the
// provisioning report with each worker's slice; the lease is left out (this machine's business).
Json qr_json(const provision::QueuedResource& qr);
// `list`'s columns: fields of qr_json.
extern const std::vector<Column> k_qr_columns;
// `describe` for people: fields, workers in worker order, pending reason or error, history.
void print_qr(std::ostream& os, const provision::QueuedResource& qr);

// A worker of a placed node: node, slice, worker, host, address, coords ("x,y,z" in the pool's
// host grid). The same fields lead every worker object tpuctl prints.
Json worker_json(const std::string& node, int slice, const provision::QrWorker& worker);

// A node's state as gcloud's tpu-vm shows it: READY (ACTIVE), CREATING (PROVISIONING),
// STOPPING (SUSPENDING), PREEMPTED/STOPPED (SUSPENDED by SERVICE/USER), DELETING.
std::string node_state(const provision::QueuedResource& qr);
// Whether tpu-vm list shows the request's nodes: once placed, and while preempted or stopped
// (their hosts are freed, the nodes are PREEMPTED/STOPPED).
bool nodes_listed(const provision::QueuedResource& qr);
// Node `slice` of the request (its index in node_ids): name, queued_resource, slice, state,
// accelerator_type, runtime_version, worker_count, workers (worker_json; empty when the node
// holds no hosts now), network_endpoints (gcloud's, [{ip_address}] in worker order).
Json node_json(const provision::QueuedResource& qr, size_t slice);
extern const std::vector<Column> k_node_columns;

} // namespace tpuctl::cli
