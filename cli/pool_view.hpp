// How pools and hosts look on stdout: json objects with stable fields, and for people the host
// grid drawn as a map (one character per host position) with its legend.
#pragma once

#include <ostream>

#include "cli/output.hpp"
#include "provision/pool/pools.hpp"

namespace tpuctl::cli {

Json pool_summary_json(const provision::PoolInfo& pool, int hosts);
Json host_json(const provision::HostEntry& host, const std::string& claimed_by);
Json pool_view_json(const provision::PoolView& view);

// The map: '.' free, 'D' drained, '-' no host, and a letter per claimant (legend below).
void draw_grid(std::ostream& os, const provision::PoolView& view);
void print_pool_view(std::ostream& os, const provision::PoolView& view);

extern const std::vector<Column> k_host_columns;

} // namespace tpuctl::cli
