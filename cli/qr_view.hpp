// How queued resources and their nodes look on stdout: json objects with stable fields (the
// record's own fields plus times as RFC 3339 text) and, for people, aligned tables.
#pragma once

#include <ostream>

#include "cli/output.hpp"
#include "provision/queued_resource.hpp"

namespace tpuctl::cli {

// The record as json (provision::to_json) with created_at/state_since/valid_* as RFC 3339 text
// and the lease left out (it is this machine's business).
Json qr_json(const provision::QueuedResource& qr);
// One row of `list`: id, state, accelerator_type, nodes, tier, created_at, reason.
Json qr_row(const provision::QueuedResource& qr);
extern const std::vector<Column> k_qr_columns;
// `describe` for people: fields, workers in worker order, pending reason or error, history.
void print_qr(std::ostream& os, const provision::QueuedResource& qr);

// A node's state as gcloud's tpu-vm shows it: READY (ACTIVE), CREATING (PROVISIONING),
// STOPPING (SUSPENDING), PREEMPTED/STOPPED (SUSPENDED by SERVICE/USER), DELETING.
std::string node_state(const provision::QueuedResource& qr);
Json node_json(const provision::QueuedResource& qr, const provision::QrNode& node);
extern const std::vector<Column> k_node_columns;

} // namespace tpuctl::cli
