// Copying one remote file from many hosts to local files, over the fan-out engine: the other
// direction of push.hpp (`tpuctl scp NODE:PATH LOCAL --worker=all`).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

struct PullJob {
  SshTarget target;
  std::string remote_path;          // absolute, or relative to the remote home ("~/" too)
  std::filesystem::path local_path; // the file to write (its directory must exist)
  size_t index = 0;
};

// Streams each host's file into its local path: the remote `cat` writes into a temporary file
// next to the local path (0600), hashed as the bytes arrive; the remote then prints the file's
// `sha256sum`, and only a match renames the temporary file into place, with the remote file's
// permission bits. Anything else (no such file, a directory, a hash mismatch because the file
// changed while it was read, a lost connection) leaves no file and fails that host with the
// reason. Errors: run_fanout's (nothing copied).
Expected<std::vector<HostResult>> pull_file(const std::vector<PullJob>& jobs,
                                            const SshOptions& options,
                                            const FanoutCallbacks& callbacks = {},
                                            const CancelToken* cancel = nullptr);

// The remote script pull_file runs for `path` (exposed for tests): the file's bytes on stdout,
// then "MODE SHA256" as the last line on stderr; exit 3 when it is not a regular file.
std::string pull_script(const std::string& path);

} // namespace tpuctl::remote
