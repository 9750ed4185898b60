// POSIX shell quoting for commands sent to remote hosts (they run through the login shell as
// `$SHELL -c '...'`). Every value tpuctl puts into a remote command line goes through here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpuctl::util {

// `text` as one POSIX shell word: wrapped in single quotes, each `'` written as `'\''`.
// Safe for any byte string (`;`, `$(...)`, backticks, newlines, a leading `-`). Never fails.
std::string shell_quote(std::string_view text);

// A remote path as one shell word. A leading `~/` stays unquoted as "$HOME"/ so it still
// refers to the remote user's home; the rest is quoted as by shell_quote. Never fails.
std::string shell_quote_path(std::string_view path);

// argv as one shell command line, each argument quoted. Never fails.
std::string shell_join(const std::vector<std::string>& argv);

} // namespace tpuctl::util
