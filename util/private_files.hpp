// Directories and files only their owner may read: tpuctl's state, config, logs and local pools
// locally, and the workload directories it writes on workers (SECURITY.md "What tpuctl stores").
#pragma once

#include <string>
#include <string_view>

#include "util/expected.hpp"

namespace tpuctl::util {

// Creates `dir` and every missing parent with mode 0700 (exactly, whatever the umask); levels
// that already exist are left as they are. Errors: failure naming the level that could not be
// created, or the one that exists but is not a directory.
Status make_private_directories(const std::string& dir);

// Creates `file` empty with mode 0600 when it does not exist; an existing file is left as it is.
// Errors: failure naming the file and why it could not be created.
Status create_private_file(const std::string& file);

// Replaces `file` with `content` all at once: written to a 0600 temporary file next to it,
// flushed to disk, then renamed over it (a reader sees the old content or the new, never part).
// Errors: failure naming the file and why (a full disk included); `file` is then unchanged.
Status replace_private_file(const std::string& file, const std::string& content);

// Writes all of `data` to `fd`, going on after interrupted and short writes. False on an error
// (errno says which) or when nothing more can be written.
bool write_all(int fd, std::string_view data);

} // namespace tpuctl::util
