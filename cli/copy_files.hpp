// Copying local files to many hosts: `tpuctl pool scp` and `tpuctl scp` (a slice's workers)
// share this loop over remote::push_file (streamed, sha256-verified, atomic rename, mode kept).
#pragma once

#include <string>
#include <vector>

#include "cli/context.hpp"
#include "cli/fanout_output.hpp"
#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

// How a copy reports: `prefixed` prints per-host failures as a broadcast does and then summary
// rows; `jsonl` prints one jsonl_record per host and file as each ends (with `source` and
// `destination`) and no summary. `identities` (by target index) name a slice's workers.
struct CopyReport {
  FanoutOutput mode = FanoutOutput::prefixed;
  std::vector<JobIdentity> identities;
};

// Copies `sources` to `dest` on every target, reporting per `report`; the summary has one row
// per file (source, destination, hosts, copied_count). `dest` is a directory when it
// ends in '/' or there are several sources (or any directory source); with `recurse`, a
// directory source is copied with its tree under dest/<its name>/, otherwise it is refused.
// Returns the broadcast exit status (0, a host's status, 128+N on signal N). Errors: usage for a
// missing source or a directory without `recurse` (nothing is copied then).
Expected<int> copy_files(Context& ctx, const std::vector<remote::SshTarget>& targets,
                         const std::vector<std::string>& sources, const std::string& dest,
                         bool recurse, const remote::SshOptions& options,
                         const CopyReport& report = {});

// One host to copy from, and the name its copies get locally.
struct FetchSource {
  remote::SshTarget target;
  std::string label;    // "3", or "node-1-3" across nodes: unique among the sources
  JobIdentity identity; // on a slice: node, slice, worker, host (summary rows, jsonl)
};

// Copies remote `paths` from every source into `dest`: with one source, `dest` is the file (or,
// when it is an existing directory or ends in '/', the directory) the copy lands in, as scp
// does; with several, `dest` is a directory (made if missing) and each source's files land in
// dest/<label>/, so workers' files of the same name never collide. Each file is streamed and
// checked by sha256 (remote::pull_file). Reports as copy_files does (`report.identities` are
// taken from the sources); the summary has one row per file and host (node, slice, worker, host,
// source, destination, copied). Returns the broadcast exit status (0, a host's status, 128+N on
// signal N). Errors: usage for an unusable destination (nothing is copied then).
Expected<int> fetch_files(Context& ctx, const std::vector<FetchSource>& sources,
                          const std::vector<std::string>& paths, const std::string& dest,
                          const remote::SshOptions& options, FanoutOutput mode);

} // namespace tpuctl::cli
