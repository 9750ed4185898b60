// Pure helpers over fan-out results: folding host names into ranges (w[0-15]) and gathering
// hosts with identical output (dshbak -c, clush -b). No IO.
#pragma once

#include <string>
#include <vector>

#include "remote/ssh_types.hpp"

namespace tpuctl::remote {

// Folds names that differ only in their last number into ranges, keeping first-appearance
// order: {w0,w1,w2,w5,db} -> "w[0-2,5],db"; zero-padded numbers fold only with the same width
// (n01,n02 -> "n[01-02]"). Duplicates are listed once. Never fails.
std::string fold_hosts(const std::vector<std::string>& names);

struct OutputGroup {
  std::string text;               // the shared output, when it was kept in HostResult::out/err
  const Spool* spool = nullptr;   // else a spool (spool_output) that holds it: the first
                                  // host's that still has its content
  std::vector<size_t> indices;    // job indices of the hosts, ascending
  std::vector<std::string> hosts; // their display names, same order
};

// Hosts whose `stream` output is byte-identical, one group per distinct non-empty output,
// ordered by the first host of each group. Hosts with empty output are left out. Spooled
// outputs are the same when their size and SHA-256 are. Never fails.
std::vector<OutputGroup> group_outputs(const std::vector<HostResult>& results, Stream stream);

// A short reason for a failed host: "exit 3", "signal KILL", "timed out", "connection refused",
// "unreachable", "authentication failed", "host key unknown", "host key changed",
// "interrupted", "error"; "ok" for success. Never fails.
std::string short_reason(const HostResult& result);

} // namespace tpuctl::remote
