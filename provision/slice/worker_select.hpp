// gcloud's `--worker` grammar for `tpuctl ssh`, `tpuctl scp` and `tpuctl env`: `all`, `N`, comma
// lists, ranges `a-b` with a < b, and mixes (`0,2-3`). Pure logic: no IO, no state.
#pragma once

#include <string_view>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::provision {

// The selected worker ids, ascending and without duplicates, for a slice of `workers` workers.
// Fails with usage, naming the flag's value and the rule it breaks: an empty item, a
// non-number, a range whose start is not below its end (`2-2`, as gcloud), or a worker outside
// 0..workers-1.
Expected<std::vector<int>> parse_worker_selection(std::string_view text, int workers);

// The same grammar for gcloud's --node (the nodes of a multislice request, 0-based) or any
// other index flag: `what` names it in messages ("node" -> "--node '5': node 5 does not
// exist; there are nodes 0-1").
Expected<std::vector<int>> parse_index_selection(std::string_view text, int count,
                                                 std::string_view what);

} // namespace tpuctl::provision
