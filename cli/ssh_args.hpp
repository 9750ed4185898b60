// The ssh options `tpuctl ssh`, `queued-resources ssh` and `tpu-vm ssh` take, as gcloud passes
// them to ssh(1): each --ssh-flag value split on whitespace (empty parts and `--` dropped, as
// gcloud drops them), then the words after `--`, read as ssh reads the words after its host:
// options first, up to the first word that is not one (or a second `--`), then the command.
//
// Supported: -L [BIND:]PORT:HOST:HOSTPORT, -R [BIND:]PORT:HOST:HOSTPORT (the spec in the same
// word or the next: `-L9001:...` or `-L 9001:...`), -N (no command, forward only) and -4 (IPv4
// only for the sockets tpuctl opens), bundled as getopt allows (`-4NL 9001:...`). tpuctl runs no
// ssh binary, so any other ssh option is refused with one line naming it.
#pragma once

#include <string>
#include <vector>

#include "remote/forwarding.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

struct SshArgs {
  std::vector<remote::ForwardSpec> forwards;
  bool no_command = false;          // -N
  bool ipv4 = false;                // -4
  std::vector<std::string> command; // the words after the options (after '--' only)
  std::vector<std::string> options; // the options as read, for --dry-run's ssh line
  // Something to forward, or -N (-4 alone changes nothing).
  bool any() const { return !forwards.empty() || no_command; }
};

// Reads every --ssh-flag value (split on whitespace) and then the words after '--' into `out`.
// Errors (usage, one line): an ssh option tpuctl does not take (naming it, and what to do
// instead), a -L/-R without its spec or with a malformed one (remote::parse_forward_spec), a word
// in --ssh-flag that is no option.
Expected<SshArgs> parse_ssh_args(const std::vector<std::string>& ssh_flags,
                                 const std::vector<std::string>& words);

} // namespace tpuctl::cli
