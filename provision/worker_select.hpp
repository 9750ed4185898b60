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

} // namespace tpuctl::provision
