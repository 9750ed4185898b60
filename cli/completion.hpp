// Shell completion from the live command table. `tpuctl completion bash|zsh` prints a small
// script whose only logic is to call the hidden `tpuctl __complete -- WORDS...` with the words
// typed so far; this engine answers with one candidate per line (`value<TAB>description` for
// zsh). So completion always matches the binary that runs: groups, commands, flags, fixed flag
// values (formats, generations, accelerator types, dataflows, worker keywords...) and live values
// from the store (pools, hosts, queued resources, nodes, clusters, workloads).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace tpuctl::cli {

struct Candidate {
  std::string value;
  std::string description; // may be empty
};

// What the store holds, asked for lazily (only when a candidate list needs it). `subject_nodes`
// and `subject_workers` are about the command's subject (its TARGET, QR, NODE or workload, or
// --workload/--cluster): the node ids (and indices) of that request, and its worker indices.
enum class LiveKind {
  pools,
  hosts,
  queued_resources,
  nodes,    // queued resources and their nodes (an ssh TARGET)
  node_ids, // nodes only (a tpu-vm NODE; a one-node request's node has its id)
  clusters,
  workloads,
  subject_nodes,
  subject_workers
};
using LiveValues =
    std::function<std::vector<std::string>(LiveKind kind, const std::string& subject)>;

// What the shell completes itself: a first candidate ":files" (or ":dirs"), optionally followed
// by a TAB and the part of the word before the path ("--log-file=", "startup-script="), asks the
// script for file (directory) names; candidates after it are offered too.
inline constexpr const char* k_files_marker = ":files";
inline constexpr const char* k_dirs_marker = ":dirs";

// The candidates for the last element of `words` (the words after `tpuctl`, the last one being
// the word under the cursor, possibly empty), filtered by its prefix, in a stable order, each
// value once.
std::vector<Candidate> complete(const CLI::App& root, const std::vector<std::string>& words,
                                const LiveValues& live);

// The fixed values a flag (or a positional, by its name: TYPE, KEY) takes (empty when it takes
// free text or a live value): --format, --generation, --accelerator-type, --topology, --for,
// --dataflow, config keys, ... Exposed so a test can check each one against the real parser.
std::vector<std::string> fixed_values(std::string_view long_name);

// The scripts `tpuctl completion bash|zsh` print (also completions/tpuctl.bash, _tpuctl).
std::string bash_script();
std::string zsh_script();

} // namespace tpuctl::cli
