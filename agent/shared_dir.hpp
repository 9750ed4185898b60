// `tpuctl agent shared-dir`: is a directory one filesystem that every worker of a job sees?
// Orbax (and any multi-host checkpoint) assumes the checkpoint directory is shared storage: a
// path that is local on each host makes every host write its own half-checkpoint, and a restart
// on other hosts finds nothing (google/orbax#999). So before a workload with --checkpoint-dir
// starts, every worker runs this at once, in one SSH round:
//
//   worker 0 creates DIR (when missing) and writes DIR/.tpuctl-shared-TOKEN holding TOKEN; every
//   other worker creates DIR too, waits for that file to appear with that content, then writes
//   DIR/.tpuctl-shared-TOKEN.I; worker 0 waits for every I, then removes all of them.
//
// A worker that does not see worker 0's file within the timeout is looking at another
// filesystem (or another directory); worker 0 names the workers whose files it never saw. Either
// way the files are removed by whoever wrote them: nothing is left in DIR.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace tpuctl::agent {

struct SharedDirOptions {
  std::string dir;
  std::string token; // the same on every worker of one check: [0-9a-f]{8,64}
  int index = 0;     // this worker
  int count = 1;     // workers in the check
  std::chrono::milliseconds timeout{10000};
};

struct SharedDirResult {
  bool shared = false;      // this worker saw what the check needs
  std::string problem;      // why not (a worker that saw nothing, a directory it cannot make)
  std::vector<int> missing; // worker 0: the workers whose files it never saw
};

// Runs this worker's part. Errors: usage for bad options only; what the filesystem says is
// the result.
Expected<SharedDirResult> check_shared_dir(const SharedDirOptions& options);

nlohmann::json to_json(const SharedDirResult& result);

} // namespace tpuctl::agent
