// Copying local files to many hosts: `tpuctl pool scp` and `tpuctl scp` (a slice's workers)
// share this loop over remote::push_file (streamed, sha256-verified, atomic rename, mode kept).
#pragma once

#include <string>
#include <vector>

#include "cli/context.hpp"
#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

// Copies `sources` to `dest` on every target, printing per-host failures as a broadcast does and
// one summary row per file (source, destination, hosts, copied). `dest` is a directory when it
// ends in '/' or there are several sources (or any directory source); with `recurse`, a
// directory source is copied with its tree under dest/<its name>/, otherwise it is refused.
// Returns the broadcast exit status (0, a host's status, 130 on Ctrl-C). Errors: usage for a
// missing source or a directory without `recurse` (nothing is copied then).
Expected<int> copy_files(Context& ctx, const std::vector<remote::SshTarget>& targets,
                         const std::vector<std::string>& sources, const std::string& dest,
                         bool recurse, const remote::SshOptions& options);

} // namespace tpuctl::cli
