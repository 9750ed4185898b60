// Copying one local file to many hosts, over the fan-out engine.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

struct PushJob {
  SshTarget target;
  std::string remote_path; // absolute, or relative to the remote home ("~/..." also works)
  size_t index = 0;
};

struct PushOptions {
  std::filesystem::path local_path;
  std::optional<unsigned> mode; // e.g. 0755; default: the local file's permission bits
  // Content-addressed skip: when the remote file already has the same sha256, nothing is sent
  // (its mode is still set) and the host's result has `unchanged` set.
  bool skip_if_same = false;
  bool make_parents = true; // mkdir -p the remote directory
  // Remembers a verification in DEST.sha256 (the hash with the file's mode, size, mtime, ctime
  // and inode), so that a later skip_if_same check of an unchanged file needs one `stat` instead
  // of hashing it again; any write, chmod or replacement of the file changes its ctime or inode
  // and the next check hashes it in full. For tpuctl's own files (the agent), not users'.
  bool stamp = false;
  // The file's bytes and their sha256, when the caller has them already (read once, hashed
  // once, for every step that pushes it); local_path then only names it in messages.
  std::shared_ptr<const std::string> content;
  std::string sha256;
};

// Streams the file to every host over an exec channel (no SFTP): `cat` into DEST.tmp.<random>
// in the destination directory, check it with the remote `sha256sum` against the local hash,
// chmod, then `mv -f` into place, so readers see the old file or the new one, never a torn one.
// The temporary file is removed on any failure. options.command_timeout bounds each step.
// Per-host failures are in the results (a sha256 mismatch is an error naming both hashes).
// Errors (nothing sent): failure (the local file cannot be read), and run_fanout's errors.
Expected<std::vector<HostResult>> push_file(const std::vector<PushJob>& jobs,
                                            const PushOptions& push, const SshOptions& options,
                                            const FanoutCallbacks& callbacks = {},
                                            const CancelToken* cancel = nullptr);

// The same remote path for every target; index = position. Never fails.
std::vector<PushJob> make_push_jobs(const std::vector<SshTarget>& targets,
                                    const std::string& remote_path);

// The remote shell scripts push_file runs (exposed for tests). `dest` is quoted here.
std::string push_check_script(const std::string& dest, const std::string& sha256, unsigned mode,
                              bool stamp = false);
std::string push_upload_script(const std::string& dest, const std::string& sha256, unsigned mode,
                               const std::string& temp_suffix, bool make_parents,
                               bool stamp = false);
// A bash script (run it with `bash -c`) that fetches the file from host:port over plain TCP (a
// worker running `tpuctl agent serve-file`, asked with an 'F'), then installs it as
// push_upload_script does: sha256 checked against `sha256` (exit 97 on a mismatch), mode set,
// renamed into place, stamped. Exit 1 with "cannot fetch from host:port" when nothing answers for
// 10 s.
std::string push_fetch_script(const std::string& dest, const std::string& sha256, unsigned mode,
                              const std::string& host, int port, const std::string& temp_suffix,
                              bool stamp);
// The check of push_check_script and, when the copy is not there, push_fetch_script's fetch, in
// one bash script: exit 0 when the copy was there, k_fetched_exit when it was fetched and
// installed, else push_fetch_script's failures (1, or 97 for bytes of another sha256). With
// no host (no seed to fetch from), exit k_missing_exit when the copy is not there.
// A command that runs the bash `script` in the shell that runs the command when that shell is
// bash (one process fewer), else in a bash it starts (exec). Either way an `exit` in the script
// ends that shell: give it a subshell or a command of its own.
std::string with_bash(const std::string& script);
inline constexpr int k_fetched_exit = 10;
inline constexpr int k_missing_exit = 11;
std::string push_check_or_fetch_script(const std::string& dest, const std::string& sha256,
                                       unsigned mode, const std::string& host, int port,
                                       const std::string& temp_suffix);

} // namespace tpuctl::remote
